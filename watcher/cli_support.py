"""What the ``watcher`` commands share: the ``--config`` option, reading settings (with or
without the secrets), and saying a problem in one line with the right exit code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:  # heavy imports stay inside the commands: `watcher --help` stays fast
    from watcher.alerting.ruleset import RuleSet
    from watcher.config.settings import Settings

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
    from watcher.alerting.ruleset import RuleSet
    from watcher.config.check import load_config
    from watcher.kinds import KINDS

    settings, rules = load_config(config, kinds=KINDS)
    return settings, RuleSet(rules, KINDS)


def settings_or_exit(config: Path, *, readonly: bool = False) -> Settings:
    """``readonly``: for a command that only reads the state database (no secret needed)."""
    from watcher.config.reading import load_settings
    from watcher.core.errors import ConfigError
    from watcher.service.readonly import load_readonly_settings

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
