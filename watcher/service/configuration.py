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
from watcher.alerting.formatting import Presentation
from watcher.alerting.pipeline import Routes
from watcher.config.call_budget import Budget
from watcher.config.settings import Settings
from watcher.kinds.ruleset import Job, RuleSet


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
    def of(cls, settings: Settings, ruleset: RuleSet, endpoint: str | None) -> Configuration:
        """The configuration of ``settings`` and ``ruleset``; ``endpoint``: the RPC URL the
        built-in alerts name (its key masked; None: the settings' own)."""
        endpoint = settings.rpc_url_redacted if endpoint is None else endpoint
        builtins = Builtins.from_settings(settings, ruleset.rules, endpoint)
        return cls(
            settings=settings,
            ruleset=ruleset,
            jobs=ruleset.jobs(),
            builtins=builtins,
            routes=Routes([*ruleset.rules, *builtins.rules()], settings),
            presentation=Presentation(settings.labels, settings.explorer_url),
        )

    def kind_of(self, rule: str) -> str:
        """The kind of the rule called ``rule``: a built-in's is its name; "" for a rule not in
        force (its alert still fires until it is resolved or pruned)."""
        try:
            return self.ruleset.rule(rule).kind
        except KeyError:
            return next((b.kind for b in self.builtins.rules() if b.name == rule), "")

    @property
    def budget(self) -> Budget | None:
        """``rpc.budget``: the calls the adaptive rules may spend (None: no limit)."""
        return self.settings.rpc.budget


class Configured:
    """The one mutable reference: the configuration in force, swapped whole by a reload."""

    def __init__(self, configuration: Configuration) -> None:
        self._current = configuration

    @property
    def current(self) -> Configuration:
        return self._current

    def swap(self, configuration: Configuration) -> None:
        self._current = configuration

    # Bound methods for the parts that take a plain callable and read it on each use: each
    # reads the snapshot in force at that moment.

    def kind_of(self, rule: str) -> str:
        """The kind of the rule called ``rule`` in the configuration in force
        (``Configuration.kind_of``)."""
        return self._current.kind_of(rule)

    def presentation(self) -> Presentation:
        """How keys are shown in the configuration in force."""
        return self._current.presentation
