"""What the ``watcher`` commands share: the ``--config`` option, reading settings (with or
without the secrets), and saying a problem in one line with the right exit code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:  # heavy imports stay inside the commands: `watcher --help` stays fast
    from watcher.config.settings import Settings
    from watcher.kinds.ruleset import RuleSet
    from watcher.state.commands import CommandStore

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


def fail_with_problems(problems: list[object]) -> None:
    for problem in problems:
        typer.echo(str(problem), err=True)
    raise typer.Exit(code=2)


def load(config: Path) -> tuple[Settings, RuleSet]:
    from watcher.checks import load_config
    from watcher.kinds.ruleset import RuleSet

    settings, rules = load_config(config)
    return settings, RuleSet(rules)


def load_for_state(config: Path) -> tuple[Settings, RuleSet]:
    """The settings and the rules, for a command that uses the state and the rule files but
    reaches neither the endpoint nor a channel (``silence add``): an unset ``${VAR}`` (the RPC
    key, a channel token) is a placeholder, and the channels' URLs, which may then hold one,
    are not read. The settings and the rules are checked as ``load`` checks them otherwise."""
    from watcher.config.reading import read_settings
    from watcher.config.readonly import readonly_environ
    from watcher.core.errors import ConfigError
    from watcher.kinds.rule_files import read_rules
    from watcher.kinds.ruleset import RuleSet

    reading = read_settings(config, readonly_environ(config))
    rules, rule_problems = read_rules(
        reading.rule_paths, reading.channels, routing=reading.settings
    )
    problems = [*reading.problems, *rule_problems]
    if problems or reading.settings is None:
        raise ConfigError(problems)
    return reading.settings, RuleSet(rules)


def settings_or_exit(config: Path, *, readonly: bool = False) -> Settings:
    """``readonly``: for a command that only reads the state database (no secret needed)."""
    from watcher.config.reading import load_settings
    from watcher.config.readonly import load_readonly_settings
    from watcher.core.errors import ConfigError

    try:
        return load_readonly_settings(config) if readonly else load_settings(config)
    except ConfigError as exc:
        fail_with_problems(list(exc.problems))
        raise  # unreachable: _fail_with_problems exits


def usage_error(message: str) -> NoReturn:
    typer.echo(f"watcher: {message}", err=True)
    raise typer.Exit(code=2)


@contextmanager
def state_or_exit() -> Iterator[None]:
    """A state database a command cannot use (missing, another schema, broken) is one line
    naming it and exit 1, as ``main`` says any other state error."""
    from watcher.core.errors import StateError

    try:
        yield
    except StateError as exc:
        typer.echo(f"watcher: {exc}", err=True)
        raise typer.Exit(code=1) from None


def database_report_or_exit(settings: Settings, *, prefix: str = "watcher: ") -> str:
    """With ``state_url``: connect, and the line saying what the database is (``state:
    postgresql://watcher:***@host/db, schema version 3 of 3``); a database this watcher cannot
    use is one line (``prefix`` + the problem) and exit 1, as any other state problem."""
    from watcher.core.errors import StateUnusable
    from watcher.state.pg_connect import check_database_sync

    assert settings.state_url is not None
    try:
        report = check_database_sync(settings.state_url.get_secret_value())
    except StateUnusable as exc:
        typer.echo(f"{prefix}{exc}", err=True)
        raise typer.Exit(code=1) from None
    return f"state: {settings.state_url_masked}, {report.describe()}"


def command_store(settings: Settings, *, readonly: bool) -> AbstractContextManager[CommandStore]:
    """The state a one-shot command reads or writes (``alerts``, ``status``, ``silence``), on
    the engine the settings name. A shared database this watcher cannot reach or use is one
    line and exit 1 (``database_report_or_exit``); then ``state_or_exit`` tells any other state
    error."""
    from watcher.state.commands import SharedCommandStore, sqlite_command_store

    if settings.state_url is not None:
        database_report_or_exit(settings)
        return SharedCommandStore(
            settings.state_url.get_secret_value(), lease_ttl=settings.lease_ttl
        )
    return sqlite_command_store(settings.state_path, readonly=readonly)
