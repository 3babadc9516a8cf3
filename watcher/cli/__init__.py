"""The ``watcher`` command line (typer): every command, option and exit code the docs name."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from watcher.cli.silences import silence_app
from watcher.cli.simulate import simulate_app
from watcher.cli.support import (
    ConfigOption,
    command_store,
    database_report_or_exit,
    fail_with_problems,
    load,
    settings_or_exit,
    state_or_exit,
    usage_error,
)
from watcher.core.stop_requests import StopRequests, stop_requests

if TYPE_CHECKING:  # heavy imports stay inside the commands: `watcher --help` stays fast
    from watcher.config.settings import Settings
    from watcher.kinds.ruleset import RuleSet

app = typer.Typer(
    name="watcher",
    help="Monitoring and alerting for a Solana-style ledger.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from watcher.core.version import __version__

        typer.echo(f"watcher {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Watch addresses, token holders, validators and node versions; alert through Apprise."""


@app.command()
def check(config: ConfigOption) -> None:
    """Validate the settings and every rule file; one FILE:LINE: message line per problem."""
    from watcher.core.errors import ConfigError

    try:  # read once: a big rule file is not parsed twice
        _settings, ruleset = load(config)
    except ConfigError as exc:
        fail_with_problems(list(exc.problems))
    # The database before OK: a settings file whose database refuses this watcher is not OK.
    state_line = None if _settings.state_url is None else database_report_or_exit(_settings)
    typer.echo(f"{config}: OK ({len(ruleset.rules)} rules)")
    if state_line is not None:
        typer.echo(state_line)
    from watcher.budget.cost import cadence_lines, cost_lines

    rpc = _settings.rpc
    jobs = ruleset.jobs()
    for line in cost_lines(jobs, rpc.max_rps, rpc.batch_size, rules=ruleset.rules):
        typer.echo(line)
    for line in cadence_lines(ruleset.rules, jobs, rpc.budget):
        typer.echo(line)


@app.command()
def run(config: ConfigOption) -> None:
    """Run the daemon in the foreground until SIGTERM/SIGINT; exit 0 after a clean stop."""
    # A stop asked for while the daemon starts (reading its rules, opening its database) is a
    # clean stop too, not death by the signal: noted since the console script's first line.
    early = stop_requests()
    from watcher.core import logs
    from watcher.core.allocator import settle_allocator
    from watcher.core.errors import ConfigError

    settle_allocator()  # before the rules' reading makes and frees its megabytes
    try:
        settings, ruleset = load(config)
    except ConfigError as exc:
        # One line per problem, each saying why nothing runs.
        fail_with_problems([f"watcher: refusing to start: {p}" for p in exc.problems])
    logs.configure(settings.log_level, settings.log_format)
    from contextlib import AbstractContextManager, nullcontext

    from watcher.core.errors import DaemonFailed, StateUnusable
    from watcher.state.lock import lock_state

    lock: AbstractContextManager[object]
    if settings.state_url is not None:
        # A wrong URL or password, a newer schema: one line, before anything starts. The file
        # lock is SQLite's: instances sharing a PostgreSQL database are meant to run together.
        database_report_or_exit(settings, prefix="watcher: refusing to start: ")
        lock = nullcontext()
    else:
        try:
            # Before anything touches the database (schema upgrade, requeue of interrupted
            # sends): a second daemon on the same file must change nothing of the first's.
            lock = lock_state(settings.state_path)
        except StateUnusable as exc:
            typer.echo(f"watcher: refusing to start: {exc}", err=True)
            raise typer.Exit(code=1) from None
    try:
        with lock:
            asyncio.run(_run_until_signalled(settings, ruleset, config, early))
    except DaemonFailed as exc:
        typer.echo(f"watcher: stopped with an error: {exc}", err=True)
        raise typer.Exit(code=1) from None


async def _run_until_signalled(
    settings: Settings, ruleset: RuleSet, config: Path, early: StopRequests
) -> None:
    import structlog

    from watcher.app import Daemon, settle_collector

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if early.caught is not None:  # nothing started yet: nothing to stop
        structlog.get_logger(__name__).info(
            "watcher stopped while starting", signal=early.caught.name
        )
        return
    daemon = Daemon(settings, ruleset)
    settle_collector()
    reloads: set[asyncio.Task[bool]] = set()

    def reload() -> None:
        # SIGHUP (systemctl reload, log rotation): re-read everything; one reload at a time.
        if not reloads:
            task = loop.create_task(daemon.reload(lambda: load(config)), name="reload")
            reloads.add(task)
            task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, reload)
    await daemon.run(stop)


@app.command()
def alerts(
    config: ConfigOption,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    limit: Annotated[int, typer.Option(help="How many alerts to show.")] = 50,
    rule: Annotated[str | None, typer.Option(help="Only this rule's alerts.")] = None,
) -> None:
    """Alert history from the state database, newest first."""
    from watcher.core.clock import iso

    settings = settings_or_exit(config, readonly=True)
    with state_or_exit(), command_store(settings, readonly=True) as store:
        records = store.history(limit=limit, rule=rule)
    for record in records:
        if as_json:
            typer.echo(json.dumps(record.as_dict(), sort_keys=True))
        else:
            alert = record.alert
            typer.echo(
                f"{iso(record.created_at)}  {alert.severity.upper():8} {alert.reason:8} "
                f"{_status(record.status, alert.facts):9} {alert.rule}: {alert.title}"
                f"{_silence_note(alert.facts)}"
            )
    if not records and not as_json:
        typer.echo("no alerts yet")


@app.command()
def status(
    config: ConfigOption,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    health: Annotated[
        bool, typer.Option("--health", help="Exit 1 (reasons on stderr) when unhealthy.")
    ] = False,
) -> None:
    """Firing alerts, each source's last poll, pending and dead deliveries (state database)."""
    import time

    from watcher.service.status import read_status

    settings = settings_or_exit(config, readonly=True)
    with state_or_exit(), command_store(settings, readonly=True) as store:
        current = read_status(store, time.time())
    typer.echo(current.as_json() if as_json else "\n".join(current.lines()))
    problems = current.problems(time.time()) if health else []
    for problem in problems:
        typer.echo(f"watcher: unhealthy: {problem}", err=True)
    raise typer.Exit(code=1 if problems else 0)


def _status(status: str, facts: dict[str, object]) -> str:
    """An alert kept below its rule's thresholds reads "below" (it has no delivery, as a
    silenced one)."""
    from watcher.core.events import BELOW_THRESHOLD_FACT

    return "below" if BELOW_THRESHOLD_FACT in facts else status


def _silence_note(facts: dict[str, object]) -> str:
    from watcher.core.events import BELOW_THRESHOLD_FACT, SILENCE_FACT

    silence = facts.get(SILENCE_FACT)
    below = facts.get(BELOW_THRESHOLD_FACT)
    if isinstance(below, dict):
        return f"  (below the threshold: {below.get('detail')})"
    return f"  (silence {silence['id']})" if isinstance(silence, dict) else ""


@app.command()
def demo(
    rules: Annotated[Path, typer.Option(help="Rule files or folder to demonstrate.")] = Path(
        "rules"
    ),
    listen: Annotated[
        str, typer.Option(help="HOST:PORT where /metrics and /healthz are served meanwhile.")
    ] = "127.0.0.1:9108",
) -> None:
    """Offline demo: simulator + daemon + example rules; prints every notification; exits 0."""
    from watcher.cli.demo import run_demo

    raise typer.Exit(code=run_demo(rules, listen=listen))


@app.command("test")
def test_rules(
    files: Annotated[list[Path], typer.Argument(help="Rule test files (*.test.yaml).")],
) -> None:
    """Run rule tests offline against the simulator; exit 1 if a step fails, 2 on bad input."""
    from watcher.core import logs
    from watcher.ruletest.runner import run_test_files

    logs.configure("error", "console")
    raise typer.Exit(code=run_test_files(files))


# -- silences and channel tests ------------------------------------------------------------

app.add_typer(silence_app, name="silence")
app.add_typer(simulate_app, name="simulate")


@app.command("notify-test")
def notify_test(
    config: ConfigOption,
    channel: Annotated[str, typer.Option(help="The channel to test (a name under channels).")],
) -> None:
    """Send a test notification to every URL of a channel now; exit 1 if any URL failed."""
    from watcher.delivery.notify_check import send_test

    settings = settings_or_exit(config)
    urls = settings.channels.get(channel)
    if urls is None:
        known = ", ".join(sorted(settings.channels)) or "none are defined"
        usage_error(f"no channel named {channel!r} (channels: {known})")
    outcomes = asyncio.run(send_test(channel, urls))
    for outcome in outcomes:
        typer.echo(f"{channel}  {outcome.line()}")
    raise typer.Exit(code=0 if all(o.error is None for o in outcomes) else 1)


def main() -> None:
    from watcher.core.errors import StateError

    try:
        app()
    except StateError as exc:  # any command: one line naming the database, no traceback
        typer.echo(f"watcher: {exc}", err=True)
        raise SystemExit(1) from None
