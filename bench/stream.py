"""A steady stream of transactions on watched addresses, for the kill -9 loop and the soak.

Each address has a rule of its own whose title is a template that names what the alert
covers (``soak ADDRESS slot=S count=N``): the simulator lands each transaction in its own slot,
so the alert covers the N transactions of that address ending at slot S. That reads even out
of a digest (which lists its alerts by title), and lets every signature be accounted for
without relying on the 10 a message lists.
"""

from __future__ import annotations

import bisect
import random
import re
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    API_KEY,
    DaemonProcess,
    Receiver,
    Table,
    key_leaks,
    outbox_pending,
    rss_kb,
    sigkill,
    wait_for,
    write_config,
)

from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey

COVERS = re.compile(r"soak (\w+) slot=(\d+) count=(\d+)")
DIGEST = re.compile(r"in \d+ notifications on \d+ address")
TITLE = "soak {{ address }} slot={{ newest_slot }} count={{ count }}"

# The simulator's own fault kinds for the soak's random 5 % (options keep each one short).
RANDOM_FAULTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("http_429", {"retry_after": 0}),
    ("http_502_html", {}),
    ("http_503_html", {}),
    ("garbage", {}),
    ("truncated_json", {}),
    ("timeout", {"seconds": 3.0}),
    ("rpc_error", {}),
    ("rpc_429", {}),
    ("wrong_shape", {}),
)


@dataclass
class Tally:
    expected: int = 0
    delivered: int = 0
    lost: list[str] = field(default_factory=list)
    duplicate_alerts: int = 0
    duplicate_messages: int = 0  # posts that repeat an alert already accepted
    worst_kill: int = 0  # most duplicate posts accepted after one kill
    duplicate_signatures: int = 0
    duplicate_ids: int | None = None
    false_alerts: list[str] = field(default_factory=list)
    truncated_digests: int = 0
    messages: int = 0


def _rules(addresses: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "name": f"stream-{i}",
            "kind": "new_transactions",
            "addresses": [address],
            "every": "200ms",
            "group_wait": "300ms",
            "notify": ["hooks"],
            "title": TITLE,
        }
        for i, address in enumerate(addresses)
    ]


def tally(
    ledger: Ledger,
    addresses: list[str],
    baseline: set[str],
    accepted: list[tuple[dict[str, Any], str | None]],
    kills_at: list[int] | None = None,
) -> Tally:
    """Every signature that appeared after the baseline, against what the receiver accepted.
    ``kills_at``: how many posts had been accepted at each kill (to count duplicates per kill)."""
    result = Tally(messages=len(accepted))
    per_run: Counter[int] = Counter()
    seen_alerts: set[tuple[str, int, int]] = set()
    histories = {a: list(reversed(ledger.signatures(a))) for a in addresses}  # oldest first
    expected = {e["signature"] for h in histories.values() for e in h} - baseline
    result.expected = len(expected)
    covered: Counter[str] = Counter()
    alerts: Counter[tuple[str, int, int]] = Counter()
    for position, (body, _) in enumerate(accepted):
        text = f"{body.get('title', '')}\n{body.get('message', '')}"
        found = COVERS.findall(text)
        if DIGEST.search(text) and re.search(r"^\.\.\. and \d+ more$", text, re.M):
            result.truncated_digests += 1  # alerts past the 10 listed are not readable
        if not found:
            result.false_alerts.append(f"unrecognised notification: {body.get('title')!r}")
        keys = [(a, int(slot), int(count)) for a, slot, count in found]
        if keys and any(key in seen_alerts for key in keys):
            result.duplicate_messages += 1
            per_run[bisect.bisect_right(kills_at or [], position)] += 1
        seen_alerts.update(keys)
        for key in keys:
            alerts[key] += 1
    for (address, slot, count), times in alerts.items():
        history = histories.get(address, [])
        index = next((i for i, e in enumerate(history) if e["slot"] == slot), None)
        if index is None or count < 1 or index + 1 < count:
            result.false_alerts.append(f"{address} slot={slot} count={count}: no such activity")
            continue
        span = [e["signature"] for e in history[index + 1 - count : index + 1]]
        old = [s for s in span if s in baseline]
        if old:
            result.false_alerts.append(f"{address} slot={slot}: {len(old)} baseline signatures")
        for signature in span:
            covered[signature] += times
        result.duplicate_alerts += times - 1
    result.worst_kill = max(per_run.values(), default=0)
    result.delivered = sum(1 for s in expected if covered[s])
    result.lost = sorted(s for s in expected if not covered[s])
    result.duplicate_signatures = sum(n - 1 for s, n in covered.items() if n > 1)
    ids = [watcher_id for _, watcher_id in accepted if watcher_id]
    if ids:
        result.duplicate_ids = sum(n - 1 for n in Counter(ids).values() if n > 1)
    return result


class _Stream(threading.Thread):
    """Lands 1 to 3 transactions on a random watched address every ``pace`` seconds."""

    def __init__(self, ledger: Ledger, addresses: list[str], rng: random.Random, pace: float):
        super().__init__(name="bench-stream", daemon=True)
        self.ledger, self.addresses, self.rng, self.pace = ledger, addresses, rng, pace
        self.stop_flag = threading.Event()
        self.landed = 0

    def run(self) -> None:
        while not self.stop_flag.wait(self.pace):
            count = self.rng.choice((1, 1, 1, 2, 3))
            self.ledger.add_transactions(self.rng.choice(self.addresses), count)
            self.landed += count


class _RandomFaults(threading.Thread):
    """Keeps about ``share`` of the RPC calls and of the deliveries failing."""

    def __init__(
        self, server: SimulatorServer, receiver: Receiver, rng: random.Random, share: float
    ) -> None:
        super().__init__(name="bench-faults", daemon=True)
        self.server, self.receiver, self.rng, self.share = server, receiver, rng, share
        self.stop_flag = threading.Event()
        self.injected: Counter[str] = Counter()
        self.refusals = 0

    def run(self) -> None:
        seen_calls, seen_posts = self.server.count(), len(self.receiver.paths)
        while not self.stop_flag.wait(0.1):
            calls, posts = self.server.count(), len(self.receiver.paths)
            for _ in range(calls - seen_calls):
                if self.rng.random() < self.share and self.server.ledger.faults.pending() < 5:
                    kind, options = self.rng.choice(RANDOM_FAULTS)
                    self.server.ledger.faults.inject(kind, **options)
                    self.injected[kind] += 1
            for _ in range(posts - seen_posts):
                if self.rng.random() < self.share:
                    self.receiver.refuse(1)
                    self.refusals += 1
            seen_calls, seen_posts = calls, posts


def baseline_taken(server: SimulatorServer, addresses: list[str]) -> bool:
    """Every address was polled with ``until``: its baseline cursor is committed."""
    polled = {
        r.params[0]
        for r in server.requests
        if r.method == "getSignaturesForAddress"
        and isinstance(r.params, list)
        and len(r.params) > 1
        and isinstance(r.params[1], dict)
        and "until" in r.params[1]
    }
    return set(addresses) <= polled


def run(
    *,
    kills: int,
    seconds: float,
    fault_share: float,
    seed: int,
    title: str,
    addresses_count: int = 3,
    pace: float = 0.25,
) -> Table:
    rng = random.Random(seed)
    ledger = Ledger(seed=seed)
    addresses = [derived_pubkey(f"bench stream {seed} {i}") for i in range(addresses_count)]
    for address in addresses:
        ledger.add_transactions(address, 5)  # history: the baseline, quiet
    # The second a watch begins in counts as after it (an entry of that second is notified
    # rather than lost): the daemon starts in a later second than the baseline's last entry,
    # or the baseline would be news to it (one run in three, before).
    newest = max(e["blockTime"] for a in addresses for e in ledger.signatures(a))
    wait_for(lambda: time.time() >= newest + 1, 2)
    table = Table(title)
    with (
        tempfile.TemporaryDirectory(prefix="watcher-bench-") as tmp,
        SimulatorServer(ledger, api_key=API_KEY) as server,
        Receiver() as receiver,
    ):
        folder = Path(tmp)
        config = write_config(
            folder, rpc_url=server.url, channels={"hooks": [receiver.url]}, rules=_rules(addresses)
        )
        database = folder / "state" / "watcher.db"
        daemon = DaemonProcess(config)
        started = time.monotonic()
        daemon.start()
        if not wait_for(lambda: baseline_taken(server, addresses), 60):
            daemon.kill()
            table.add("baseline taken", "no (timed out after 60 s)", fail=True)
            table.note(daemon.output()[-3000:])
            return table
        baseline = {e["signature"] for a in addresses for e in ledger.signatures(a)}
        stream = _Stream(ledger, addresses, rng, pace)
        faults = _RandomFaults(server, receiver, rng, fault_share)
        stream.start()
        if fault_share > 0:
            faults.start()
        rss: list[int] = []
        crashes = done = on_accept = 0
        kills_at: list[int] = []
        deadline = time.monotonic() + seconds
        next_rss = time.monotonic()
        while done < kills or (kills == 0 and time.monotonic() < deadline):
            assert daemon.proc is not None
            if daemon.proc.poll() is not None:  # died on its own
                crashes += 1
                daemon.start()
                continue
            if kills == 0:
                if time.monotonic() >= next_rss:
                    sample = rss_kb(daemon.proc.pid)
                    if sample:
                        rss.append(sample)
                    next_rss += 5.0
                time.sleep(0.2)
                continue
            pid = daemon.proc.pid
            if rng.random() < 0.4:  # right after the receiver accepted a message
                fired = threading.Event()

                def kill_now(pid: int = pid, fired: threading.Event = fired) -> None:
                    if not fired.is_set():
                        fired.set()
                        sample = rss_kb(pid)
                        if sample:
                            rss.append(sample)
                        sigkill(pid)

                receiver.after_accept = kill_now
                if fired.wait(rng.uniform(3.0, 6.0)):
                    on_accept += 1
                receiver.after_accept = None
                kill_now()  # no message came in time: a random moment instead
            else:
                time.sleep(rng.uniform(0.2, 3.0))  # a random moment
                sample = rss_kb(pid)
                if sample:
                    rss.append(sample)
                sigkill(pid)
            daemon.kill()  # reaps it
            kills_at.append(len(receiver.accepted))
            done += 1
            daemon.start()
        stream.stop_flag.set()
        faults.stop_flag.set()
        stream.join(5)
        if faults.is_alive():
            faults.join(5)
        server.ledger.faults.clear()
        receiver.refuse(0)

        # Drain: every signature notified and the outbox empty, or a deadline.
        def drained() -> bool:
            assert daemon.proc is not None
            if daemon.proc.poll() is not None:
                return False
            now = tally(ledger, addresses, baseline, receiver.accepted)
            return not now.lost and outbox_pending(database) == 0

        drain_started = time.monotonic()
        is_drained = wait_for(drained, 90, step=0.5)
        drain_seconds = time.monotonic() - drain_started
        end_rss = rss_kb(daemon.proc.pid if daemon.proc else None)
        if end_rss:
            rss.append(end_rss)
        try:
            exit_code: int | str = daemon.stop(timeout=10)
        except AssertionError:
            exit_code = "did not stop in 10 s"
        result = tally(ledger, addresses, baseline, receiver.accepted, kills_at)
        leaks = key_leaks(folder, [body for body, _ in receiver.accepted])

        if kills:
            table.add("kills (SIGKILL)", done)
            table.add("  right after a message was accepted", on_accept)
        table.add("daemon crashes (not ours)", crashes, fail=crashes > 0)
        table.add("run time (s)", f"{time.monotonic() - started:.0f}")
        table.add("transactions after the baseline", result.expected)
        table.add("notifications accepted", result.messages)
        table.add("signatures delivered", result.delivered)
        table.add("lost", len(result.lost), fail=bool(result.lost))
        allowed = kills
        table.add(
            "duplicate notifications (by alert)",
            result.duplicate_alerts,
            fail=result.duplicate_alerts > allowed,
        )
        table.add(
            "duplicate messages",
            result.duplicate_messages,
            fail=result.duplicate_messages > allowed,
        )
        if kills:
            table.add(
                "  most after one kill (bar: 1)", result.worst_kill, fail=result.worst_kill > 1
            )
        table.add("duplicate signatures", result.duplicate_signatures)
        table.add(
            "duplicates by X-Watcher-Id",
            "n/a (no header)" if result.duplicate_ids is None else result.duplicate_ids,
            fail=(result.duplicate_ids or 0) > allowed,
        )
        if kills:
            table.add("duplicates per kill", f"{result.duplicate_alerts / kills:.2f}")
        table.add("false alerts", len(result.false_alerts), fail=bool(result.false_alerts))
        table.add("digests cut short (... and K more)", result.truncated_digests)
        table.add("RPC calls served", server.count())
        if fault_share:
            table.add("RPC faults injected", sum(faults.injected.values()))
            table.add("deliveries refused", faults.refusals)
        table.add(
            "outbox drained",
            f"yes, in {drain_seconds:.0f} s" if is_drained else "no",
            fail=not is_drained,
        )
        table.add("clean stop exit code", exit_code, fail=exit_code != 0)
        if rss:
            table.add("RSS start -> end (MiB)", f"{rss[0] / 1024:.0f} -> {rss[-1] / 1024:.0f}")
            table.add("RSS max (MiB)", f"{max(rss) / 1024:.0f}")
        table.add("API key leaks", ", ".join(leaks) or 0, fail=bool(leaks))
        for line in result.false_alerts[:10]:
            table.note(f"false alert: {line}")
        for signature in result.lost[:10]:
            table.note(f"lost: {signature}")
        if crashes or not is_drained:
            table.note("daemon log tail:\n" + daemon.output()[-3000:])
    return table
