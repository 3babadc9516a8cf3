"""``watcher check`` and the daemon's start: the settings file and every rule file, checked
together so that a user sees every problem at once, one ``FILE:LINE: message`` each.

Above the parts it asks (the state database, the channels' URL readers, the kinds' wordings),
so that reading the settings (``watcher.config``) needs none of them.

Rule files are still checked when the settings have problems (with what could be read of the
``rules`` entries and channel names); whether each rule ends up with a channel (``notify``, else
``routes`` by severity, else ``default_channels``) is checked only when the settings are valid.
The kinds a rule may be of are the registry's (``watcher.kinds.KINDS``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from watcher.checks.templates import template_problems
from watcher.config.reading import read_settings
from watcher.config.rule_models import RuleBase
from watcher.config.settings import Settings
from watcher.config.yamlpos import Loc, display_path
from watcher.core.errors import ConfigError, Problem
from watcher.delivery.alertmanager import is_alertmanager
from watcher.delivery.notify_check import unreadable_urls
from watcher.delivery.webhook import is_webhook
from watcher.kinds.rule_files import read_rules
from watcher.state.database import state_path_problem


def check_config(path: Path | str, env: Mapping[str, str] | None = None) -> list[Problem]:
    """Every problem of the settings file ``path`` and of the rule files it names (empty when
    all is valid). Never raises for a user's mistake."""
    return _read(path, env)[2]


def load_config(
    path: Path | str, env: Mapping[str, str] | None = None
) -> tuple[Settings, list[RuleBase]]:
    """The settings and all rules, checked as ``check_config`` does; raises ``ConfigError``
    listing every problem."""
    settings, rules, problems = _read(path, env)
    if problems or settings is None:
        raise ConfigError(problems)
    return settings, rules


def _read(
    path: Path | str, env: Mapping[str, str] | None
) -> tuple[Settings | None, list[RuleBase], list[Problem]]:
    reading = read_settings(path, env, deep=what_settings_point_at)
    rules, rule_problems = read_rules(
        reading.rule_paths, reading.channels, routing=reading.settings
    )
    # Templates that compile but fail on a sample alert of their kind (TypeError at render).
    rule_problems += template_problems(rules)
    return reading.settings, rules, [*reading.problems, *rule_problems]


def what_settings_point_at(settings: Settings) -> Iterator[tuple[Loc, str]]:
    """That ``state_path`` (when no ``state_url`` is given) can be the state database (opened
    read-only if it exists; nothing is created) and that every channel URL can be read."""
    # With state_url the SQLite file is not used; the database is checked by connecting
    # (watcher.state.pg_connect), which `check` and `run` do, not every reading.
    state_problem = None if settings.state_url else state_path_problem(settings.state_path)
    if state_problem is not None:
        yield ("state_path",), f"{display_path(settings.state_path)}: {state_problem}"
    for name, index in unreadable_urls(settings.channels):
        url = settings.channels[name][index]
        if is_alertmanager(url):
            reader = "not a readable alertmanager://host:port[/prefix] URL"
        elif is_webhook(url):
            reader = "not a readable webhook://host:port[/path] URL"
        else:
            reader = "Apprise cannot read this URL"
        yield ("channels", name, index), f"{reader} (not shown: it may hold secrets)"
