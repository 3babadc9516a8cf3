"""The configuration in force: one immutable snapshot, one reference to it.

A reload (SIGHUP, ``watcher.service.reloading``) reads the settings and rules again and, when
they are valid, makes one new ``Configuration`` and puts it in the ``Configured`` box at once.
Every part that reads what a reload changes holds the box and reads ``current`` when it needs
it, so a reload reaches it without its knowing, and one poll reads one snapshot throughout
(take ``current`` once, then use that).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from watcher.alerting.builtin import Builtins
from watcher.alerting.messages import Presentation
from watcher.alerting.routing import Routes
from watcher.config.ruleset import Job, RuleSet
from watcher.config.settings import Settings


@dataclass(frozen=True)
class Configuration:
    """What one set of settings and rules puts in force: the rules and their jobs, the
    built-in rules, the routes and the wording's presentation."""

    settings: Settings
    ruleset: RuleSet
    jobs: Sequence[Job]  # the rule set's, made once (the budget's plan compares them by identity)
    builtins: Builtins
    routes: Routes
    presentation: Presentation

    @classmethod
    def of(cls, settings: Settings, ruleset: RuleSet, endpoint: str) -> Configuration:
        """The configuration of ``settings`` and ``ruleset``; ``endpoint``: the RPC URL the
        built-in alerts name (its key masked)."""
        builtins = Builtins.from_settings(settings, ruleset.rules, endpoint)
        return cls(
            settings=settings,
            ruleset=ruleset,
            jobs=ruleset.jobs(),
            builtins=builtins,
            routes=Routes([*ruleset.rules, *builtins.rules()], settings),
            presentation=Presentation(settings.labels, settings.explorer_url),
        )


class Configured:
    """The one mutable reference: the configuration in force, swapped whole by a reload."""

    def __init__(self, configuration: Configuration) -> None:
        self._current = configuration

    @property
    def current(self) -> Configuration:
        return self._current

    def swap(self, configuration: Configuration) -> None:
        self._current = configuration
