"""``watcher demo``: the simulator, the daemon and the example rules, offline, in one process.

The daemon is the real one (same Daemon, same RPC client over real HTTP on loopback, same SQLite
outbox and Apprise sender); only the channels are replaced by ``console://`` so notifications
print here, and every rule polls each second so the scripted scenario shows in well under 30 s.
Meanwhile ``/metrics`` and ``/healthz`` are served on ``--listen`` (127.0.0.1:9108, the port a
Prometheus scrape config for watcher names), so that the values it observes can be looked at.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from watcher.app import Daemon
from watcher.config.settings import Settings
from watcher.core import logs
from watcher.core.errors import ConfigError, DaemonFailed
from watcher.core.events import BELOW_THRESHOLD_FACT
from watcher.kinds.rule_files import load_rules
from watcher.kinds.ruleset import RuleSet
from watcher.simulator import SCENARIOS, Ledger, Scenario, SimulatorServer, run_scenario
from watcher.simulator.scenarios import Step
from watcher.state.store import SqliteStore

DEMO_POLL_SECONDS = 1.0
DEMO_GROUP_WAIT_SECONDS = 0.5
# After the scenario's last step: time for the last change to be polled and delivered.
SETTLE_SECONDS = 3.0
BASELINE_TIMEOUT_SECONDS = 15.0
DEMO_LISTEN = "127.0.0.1:9108"
# What the demo must show: every kind fires, and the state kinds resolve too.
EXPECTED = {
    "new_transactions": {"event"},
    "holder_changes": {"event"},
    "delinquent_validators": {"firing", "resolved"},
    "version_drift": {"firing", "resolved"},
    # Validator checks beyond delinquency: a delinquent validator's vote lags first.
    "vote_lag": {"firing", "resolved"},
    "commission_changed": {"event"},
    # Who can move the funds: a durable nonce account staged on a signer's key.
    "nonce_accounts": {"event"},
}


def run_demo(rules_path: Path, *, listen: str = DEMO_LISTEN) -> int:
    logs.configure("warning", "console")
    try:
        rules = load_rules([rules_path], channels=None)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem)
        return 2
    # The demo's scenario plays the kinds it shows; example rules of other kinds stay out.
    rules = [rule for rule in rules if rule.kind in EXPECTED]
    scenario = SCENARIOS["demo"]
    print(f"watcher demo: {scenario.summary}")
    print(f"rules from {rules_path}/: " + ", ".join(f"{r.name} ({r.kind})" for r in rules))
    with tempfile.TemporaryDirectory(prefix="watcher-demo-") as folder:
        ledger = scenario.new_ledger()
        ledger.follow_wall_clock()  # as `watcher simulate`'s: slots of the real time
        with SimulatorServer(ledger) as server:
            try:
                settings = _demo_settings(Path(folder), server.url, rules_path, rules, listen)
            except ConfigError as exc:
                for problem in exc.problems:
                    print(problem)
                return 2
            print(f"metrics: http://{listen}/metrics  health: http://{listen}/healthz", flush=True)
            fast_rules = [rule.model_copy(update=_demo_pace(rule)) for rule in rules]
            try:
                asyncio.run(_play(settings, RuleSet(fast_rules), ledger, scenario))
            except DaemonFailed as exc:  # e.g. the port is taken: say so, in one line
                print(f"watcher demo: {exc} (--listen HOST:PORT serves elsewhere)")
                return 1
        with SqliteStore(settings.state_path) as store:
            history = store.history(limit=1000)
    seen = [
        (record.alert.rule, record.alert.reason)
        for record in history
        if not record.alert.facts.get(BELOW_THRESHOLD_FACT)
    ]
    return _report(rules, seen, len(history) - len(seen))


def _demo_pace(rule: object) -> dict[str, float]:
    """Every rule polls each second; event rules gather a digest for half a second only, so
    each notification prints right after the step that caused it."""
    pace = {"every": DEMO_POLL_SECONDS}
    if hasattr(rule, "group_wait"):
        pace["group_wait"] = DEMO_GROUP_WAIT_SECONDS
    return pace


def _demo_settings(
    folder: Path, rpc_url: str, rules_path: Path, rules: Sequence[object], listen: str
) -> Settings:
    channel_names = {name for rule in rules for name in (getattr(rule, "notify", None) or ())}
    return Settings.build(
        rpc_url=rpc_url,
        state_path=folder / "watcher.db",
        rules=[rules_path.resolve()],
        channels={name: ["console://"] for name in sorted(channel_names)},
        default_channels=sorted(channel_names)[:1],
        delivery={"first_retry": "500ms"},
        http={"listen": listen},
        # Names shown beside the keys (the amounts say "USDC +25,000").
        labels={
            "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v": "USDC",
            "Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB": "USDT",
        },
    )


async def _play(settings: Settings, ruleset: RuleSet, ledger: Ledger, scenario: Scenario) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    scenario_stop = threading.Event()

    def show_step(step: Step) -> None:
        print(f"\n>> ledger: {step.description}", flush=True)

    daemon = Daemon(settings, ruleset)
    runner = asyncio.create_task(daemon.run(stop))
    await _baseline_taken(daemon, ruleset, runner)
    # The ledger follows the wall clock: the scenario ticks no slots of its own.
    thread = run_scenario(
        ledger, scenario, stop=scenario_stop, on_step=show_step, slot_seconds=None
    )
    try:
        await loop.run_in_executor(None, thread.join)
        await asyncio.sleep(SETTLE_SECONDS)
    finally:
        scenario_stop.set()
        stop.set()
        await runner


async def _baseline_taken(daemon: Daemon, ruleset: RuleSet, runner: asyncio.Task[None]) -> None:
    """The scenario starts once every target has been observed: its history is the baseline.
    A daemon that could not start (``--listen``'s port taken) says why at once."""
    targets = [(job.source, target) for job in ruleset.jobs() for target in job.targets]
    deadline = asyncio.get_running_loop().time() + BASELINE_TIMEOUT_SECONDS
    while [pair for pair in targets if await daemon.store.load_state(*pair) is None]:
        if runner.done():
            await runner  # raises what ended it
            raise RuntimeError("the daemon stopped before it observed every target")
        if asyncio.get_running_loop().time() > deadline:
            raise RuntimeError("the daemon did not observe every target in time")
        await asyncio.sleep(0.05)


def _report(rules: Sequence[object], seen: Sequence[tuple[str, str]], kept: int = 0) -> int:
    """``seen``: the notifications (rule, reason); ``kept``: the alerts kept in the history
    below a rule's threshold, not notified (the dust)."""
    kind_of = {getattr(rule, "name"): getattr(rule, "kind") for rule in rules}  # noqa: B009
    fired: dict[str, set[str]] = {}
    for rule_name, reason in seen:
        fired.setdefault(kind_of.get(rule_name, "?"), set()).add(reason)
    missing = {
        kind: sorted(reasons - fired.get(kind, set()))
        for kind, reasons in EXPECTED.items()
        if kind in kind_of.values() and reasons - fired.get(kind, set())
    }
    below = f", {kept} kept below a threshold and not notified (watcher alerts lists them)"
    print(f"\nwatcher demo: {len(seen)} notifications" + (below if kept else "") + ".")
    if missing:
        print(f"watcher demo: these did not happen: {missing}")
        return 1
    print("watcher demo: every rule kind fired" + " (and the state kinds resolved).")
    return 0
