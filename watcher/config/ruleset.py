"""The target registry: which source polls which target, how often, for which rules.

Rules that watch the same target share one call: a target is polled at the shortest ``every``
among the rules watching it, and a source's targets with the same interval form one ``Job`` (one
scheduled sweep). A target whose rules all give ``max_every`` backs off while quiet
(``watcher.budget``), down to the shortest ``max_every`` among them (the strictest promise);
one rule without it keeps the target at its interval. A job's targets share both bounds: jobs
are per (source, interval, max_interval), so a job sweeps every ``interval`` and polls the
targets whose cadence says they are due. Targets: addresses (source ``signatures``), mints
(``holders``), and the one ``cluster`` for the vote-account set (``votes``) and the node set
(``nodes``); each rule kind names the source it rides on (``watcher.kinds.KINDS``, handed
in: ``RuleSet(rules, KINDS)``).

Lookups are dictionaries built once, so that 100k addresses stay cheap; a reload (SIGHUP) builds
a new RuleSet and compares ``jobs()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from watcher.config.rule_models import CLUSTER, RuleBase, max_every_of

__all__ = ["CLUSTER", "Job", "RuleSet"]


@dataclass(frozen=True)
class Job:
    """One scheduled sweep: poll every target of ``source`` once per ``interval`` seconds;
    with ``max_interval``, the sweep still runs every ``interval`` but polls only the targets
    due, each backing off while quiet up to ``max_interval`` seconds between its polls."""

    source: str
    interval: float
    targets: tuple[str, ...]
    max_interval: float | None = None

    @property
    def adaptive(self) -> bool:
        return self.max_interval is not None


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class SourcedKind(Protocol):
    """What a rule set reads of a kind (``watcher.kinds.base.Kind``): the source it rides on."""

    @property
    def source(self) -> _Named: ...


class RuleSet:
    def __init__(self, rules: Sequence[RuleBase], kinds: Mapping[str, SourcedKind]) -> None:
        """``kinds``: the kinds of the rules, by name (``watcher.kinds.KINDS``)."""
        self.rules: tuple[RuleBase, ...] = tuple(rules)
        self._by_name: dict[str, RuleBase] = {}
        for rule in self.rules:
            if rule.name in self._by_name:
                raise ValueError(f"duplicate rule name {rule.name!r}")
            self._by_name[rule.name] = rule
        # source -> target -> the rules watching it, in rule order; insertion order of the
        # targets is the order they were first named, which jobs() keeps. Targets watched by
        # the same rules share one tuple: a million addresses of one rule hold one, not a
        # million lists (and no (source, target) key per target).
        self._jobs: list[Job] | None = None  # ``jobs()``, made once
        self._watchers: dict[str, dict[str, tuple[RuleBase, ...]]] = {}
        shared: dict[tuple[int, ...], tuple[RuleBase, ...]] = {}
        for rule in self.rules:
            source = kinds[rule.kind].source.name  # once a rule, not once per target (100,000)
            by_target = self._watchers.setdefault(source, {})
            alone = (rule,)
            for target in rule.targets:
                before = by_target.get(target)
                if before is None:
                    by_target[target] = alone
                    continue
                watching = (*before, rule)
                by_target[target] = shared.setdefault(tuple(map(id, watching)), watching)

    def rule(self, name: str) -> RuleBase:
        """The rule called ``name``; ``KeyError`` if there is none."""
        return self._by_name[name]

    def rules_for(self, source: str, target: str) -> list[RuleBase]:
        """The rules of ``source`` that watch ``target`` (empty when none)."""
        return list(self._watchers.get(source, {}).get(target, ()))

    def targets(self, source: str) -> list[str]:
        """Every target of ``source``, in the order the rules name them."""
        return list(self._watchers.get(source, ()))

    def interval(self, source: str, target: str) -> float:
        """How often ``target`` is polled: the shortest ``every`` of the rules watching it."""
        return _interval(self._watchers[source][target])

    def max_interval(self, source: str, target: str) -> float | None:
        """How far ``target`` may back off: the shortest ``max_every`` of the rules watching
        it, or None (always at its interval) when one of them has none."""
        return _max_interval(self._watchers[source][target])

    def jobs(self) -> list[Job]:
        """One job per source, interval and max_interval, sorted by them (a fixed job before
        an adaptive one); targets keep the order the rules name them. Made once (the same
        list every call: do not change it): a million targets take seconds, which a reload
        spends in its loading thread (``Reloader.reload``), not on the event loop."""
        if self._jobs is None:
            self._jobs = self._grouped_jobs()
        return self._jobs

    def _grouped_jobs(self) -> list[Job]:
        grouped: dict[tuple[str, float, float | None], list[str]] = {}
        for source, by_target in self._watchers.items():
            # The bounds once per distinct tuple of rules (targets of one rule share theirs).
            bounds_of: dict[int, tuple[float, float | None]] = {}
            for target, watching in by_target.items():
                bounds = bounds_of.get(id(watching))
                if bounds is None:
                    bounds = bounds_of[id(watching)] = (
                        _interval(watching),
                        _max_interval(watching),
                    )
                grouped.setdefault((source, *bounds), []).append(target)

        def order(key: tuple[str, float, float | None]) -> tuple[str, float, float]:
            source, interval, longest = key
            return source, interval, 0.0 if longest is None else longest

        return [
            Job(source=source, interval=interval, targets=tuple(targets), max_interval=longest)
            for (source, interval, longest), targets in sorted(
                grouped.items(), key=lambda item: order(item[0])
            )
        ]


def _interval(watching: Sequence[RuleBase]) -> float:
    return min(rule.every for rule in watching)


def _max_interval(watching: Sequence[RuleBase]) -> float | None:
    bounds = [max_every_of(rule) for rule in watching]
    if any(bound is None for bound in bounds):
        return None
    return min(bound for bound in bounds if bound is not None)
