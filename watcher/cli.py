"""The ``watcher`` command line (typer). Commands and options follow contract.md exactly."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from watcher import __version__

if TYPE_CHECKING:  # heavy imports stay inside the commands: `watcher --help` stays fast
    from watcher.ruleset import RuleSet
    from watcher.settings import Settings

app = typer.Typer(
    name="watcher",
    help="Monitoring and alerting for a Solana-style ledger.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ConfigOption = Annotated[
    Path,
    typer.Option(
        "--config",
        "-c",
        envvar="WATCHER_CONFIG",
        help="Settings file (YAML). Defaults to $WATCHER_CONFIG.",
        show_envvar=True,
    ),
]


def _version(value: bool) -> None:
    if value:
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


def _fail_with_problems(problems: list[object]) -> None:
    for problem in problems:
        typer.echo(str(problem), err=True)
    raise typer.Exit(code=2)


@app.command()
def check(config: ConfigOption) -> None:
    """Validate the settings and every rule file; one FILE:LINE: message line per problem."""
    from watcher.config_check import check_config

    problems = check_config(config)
    if problems:
        _fail_with_problems(list(problems))
    _settings, ruleset = _load(config)
    typer.echo(f"{config}: OK ({len(ruleset.rules)} rules)")


@app.command()
def run(config: ConfigOption) -> None:
    """Run the daemon in the foreground until SIGTERM/SIGINT; exit 0 after a clean stop."""
    from watcher import logs
    from watcher.errors import ConfigError

    try:
        settings, ruleset = _load(config)
    except ConfigError as exc:
        typer.echo("watcher: refusing to start, the configuration has problems:", err=True)
        _fail_with_problems(list(exc.problems))
    logs.configure(settings.log_level, settings.log_format)
    asyncio.run(_run_until_signalled(settings, ruleset))


def _load(config: Path) -> tuple[Settings, RuleSet]:
    from watcher.config_check import load_config
    from watcher.ruleset import RuleSet

    settings, rules = load_config(config)
    return settings, RuleSet(rules)


async def _run_until_signalled(settings: Settings, ruleset: RuleSet) -> None:
    from watcher.app import Daemon

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    daemon = Daemon(settings, ruleset)
    await daemon.run(stop)


@app.command()
def alerts(
    config: ConfigOption,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    limit: Annotated[int, typer.Option(help="How many alerts to show.")] = 50,
    rule: Annotated[str | None, typer.Option(help="Only this rule's alerts.")] = None,
) -> None:
    """Alert history from the state database, newest first."""
    from watcher.clock import iso
    from watcher.errors import ConfigError
    from watcher.settings import load_settings
    from watcher.store import Store

    try:
        settings = load_settings(config)
    except ConfigError as exc:
        _fail_with_problems(list(exc.problems))
    if not settings.state_path.exists():
        typer.echo(f"no state database yet at {settings.state_path}", err=True)
        raise typer.Exit(code=1)
    store = Store(settings.state_path)
    try:
        records = store.history(limit=limit, rule=rule)
    finally:
        store.close()
    for record in records:
        if as_json:
            typer.echo(json.dumps(record.as_dict(), sort_keys=True))
        else:
            typer.echo(
                f"{iso(record.created_at)}  {record.severity.upper():8} {record.reason:8} "
                f"{record.status:9} {record.rule}: {record.title}"
            )
    if not records and not as_json:
        typer.echo("no alerts yet")


@app.command()
def simulate(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 to serve on.")] = 8899,
    scenario: Annotated[
        str, typer.Option(help="Scripted scenario to play: demo or quiet.")
    ] = "demo",
    api_key: Annotated[str, typer.Option(help="The key expected in the path /v3/KEY.")] = "sim-key",
) -> None:
    """Serve the ledger simulator on loopback, for trying rules against a scripted ledger."""
    from watcher.simulator import serve

    serve(port=port, scenario_name=scenario, api_key=api_key)


@app.command()
def demo(
    rules: Annotated[
        Path, typer.Option(help="Rule files or folder to demonstrate.")
    ] = Path("rules"),
) -> None:
    """Offline demo: simulator + daemon + example rules; prints every notification; exits 0."""
    from watcher.demo import run_demo

    raise typer.Exit(code=run_demo(rules))


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
