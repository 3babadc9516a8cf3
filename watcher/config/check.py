"""``watcher check`` and the daemon's start: the settings file and every rule file, checked
together so that a user sees every problem at once, one ``FILE:LINE: message`` each.

Rule files are still checked when the settings have problems (with what could be read of the
``rules`` entries and channel names); whether each rule ends up with a channel (``notify``, else
``routes`` by severity, else ``default_channels``) is checked only when the settings are valid.
The kinds a rule may be of are handed in (``kinds``: ``watcher.kinds.KINDS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from watcher.config.reading import read_settings
from watcher.config.rule_models import RuleBase
from watcher.config.rules import read_rules
from watcher.config.settings import Settings
from watcher.config.template_check import SampledKind, template_problems
from watcher.core.errors import ConfigError, Problem


def check_config(
    path: Path | str, env: Mapping[str, str] | None = None, *, kinds: Mapping[str, SampledKind]
) -> list[Problem]:
    """Every problem of the settings file ``path`` and of the rule files it names (empty when
    all is valid). Never raises for a user's mistake."""
    return _read(path, env, kinds)[2]


def load_config(
    path: Path | str, env: Mapping[str, str] | None = None, *, kinds: Mapping[str, SampledKind]
) -> tuple[Settings, list[RuleBase]]:
    """The settings and all rules, checked as ``check_config`` does; raises ``ConfigError``
    listing every problem."""
    settings, rules, problems = _read(path, env, kinds)
    if problems or settings is None:
        raise ConfigError(problems)
    return settings, rules


def _read(
    path: Path | str, env: Mapping[str, str] | None, kinds: Mapping[str, SampledKind]
) -> tuple[Settings | None, list[RuleBase], list[Problem]]:
    reading = read_settings(path, env, deep=True)
    rules, rule_problems = read_rules(
        reading.rule_paths, reading.channels, kinds=kinds, routing=reading.settings
    )
    # Templates that compile but fail on a sample alert of their kind (TypeError at render).
    rule_problems += template_problems(rules, kinds)
    return reading.settings, rules, [*reading.problems, *rule_problems]
