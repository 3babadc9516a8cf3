"""The target registry: which source polls which target, how often, for which rules.

Rules that watch the same target share one call: a target is polled at the shortest ``every``
among the rules watching it, and a source's targets with the same interval form one ``Job`` (one
scheduled sweep). A target whose rules all give ``max_every`` backs off while quiet
(``watcher.budget``), down to the shortest ``max_every`` among them (the strictest promise);
one rule without it keeps the target at its interval. A job's targets share both bounds: jobs
are per (source, interval, max_interval), so a job sweeps every ``interval`` and polls the
targets whose cadence says they are due. Targets: addresses (source ``signatures``), mints
(``holders``), and the one ``cluster`` for the vote-account set (``votes``) and the node set
(``nodes``); each rule's kind names the source it rides on (``KINDS``).

A ``Job`` is what the scheduler, the sweeps and the call budget take.

Lookups are dictionaries built once, so that 100k addresses stay cheap; a reload (SIGHUP) builds
a new RuleSet and compares ``jobs()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from watcher.config.address_files import RuleAddresses
from watcher.config.packed_keys import ALL_KEPT, JoinedTargets, PackedAddresses
from watcher.config.rule_models import RuleBase, max_every_of
from watcher.kinds import KINDS


@dataclass(frozen=True)
class Job:
    """One scheduled sweep: poll every target of ``source`` once per ``interval`` seconds;
    with ``max_interval``, the sweep still runs every ``interval`` but polls only the targets
    due, each backing off while quiet up to ``max_interval`` seconds between its polls."""

    source: str
    interval: float
    targets: Sequence[str]  # a tuple, or with packed addresses a ``JoinedTargets``
    max_interval: float | None = None

    @property
    def adaptive(self) -> bool:
        return self.max_interval is not None


class RuleSet:
    def __init__(self, rules: Sequence[RuleBase]) -> None:
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
        # source -> the packed addresses of each rule's ``addresses_file``, with the rule (in
        # rule order), kept as they are: no str and no dict entry per address. A target in
        # more than one place (two files, or a file and a rule's list) is in ``_watchers``
        # instead, with all its rules, and out of the packed lists the jobs sweep.
        self._packed: dict[str, list[tuple[PackedAddresses, tuple[RuleBase, ...]]]] = {}
        self._swept: dict[str, list[tuple[PackedAddresses, RuleBase]]] = {}
        shared: dict[tuple[int, ...], tuple[RuleBase, ...]] = {}
        for rule in self.rules:
            source = KINDS[rule.kind].source.name  # once a rule, not once per target (100,000)
            by_target = self._watchers.setdefault(source, {})
            alone = (rule,)
            targets = rule.targets
            if isinstance(targets, RuleAddresses):
                self._packed.setdefault(source, []).append((targets.packed, alone))
                targets = targets.listed
            for target in targets:
                before = by_target.get(target)
                if before is None:
                    by_target[target] = alone
                    continue
                watching = (*before, rule)
                by_target[target] = shared.setdefault(tuple(map(id, watching)), watching)
        for source, packed in self._packed.items():
            self._swept[source] = self._apart(self._watchers[source], packed, shared)
        # Few packed addresses in all: each list keeps every str it makes (``ALL_KEPT``).
        read = [addresses for packed in self._packed.values() for addresses, _ in packed]
        every = sum(map(len, read)) <= ALL_KEPT
        for addresses in read + [a for swept in self._swept.values() for a, _ in swept]:
            addresses.keep_every_str(every)

    def _apart(
        self,
        by_target: dict[str, tuple[RuleBase, ...]],
        packed: list[tuple[PackedAddresses, tuple[RuleBase, ...]]],
        shared: dict[tuple[int, ...], tuple[RuleBase, ...]],
    ) -> list[tuple[PackedAddresses, RuleBase]]:
        """Moves the packed addresses named more than once into ``by_target``, with every rule
        watching them; the packed lists the jobs sweep, without those."""
        named_again: dict[str, None] = {}
        for target in by_target:
            if any(target in addresses for addresses, _ in packed):
                named_again[target] = None
        for index, (addresses, _) in enumerate(packed):
            for other, _ in packed[index + 1 :]:
                named_again.update(dict.fromkeys(addresses.common(other)))
        if not named_again:
            return [(addresses, rules[0]) for addresses, rules in packed]
        order = {id(rule): index for index, rule in enumerate(self.rules)}
        for target in named_again:
            rules = {id(rule): rule for rule in by_target.get(target, ())}
            for addresses, (rule,) in packed:
                if target in addresses:
                    rules[id(rule)] = rule
            watching = tuple(sorted(rules.values(), key=lambda rule: order[id(rule)]))
            by_target[target] = shared.setdefault(tuple(map(id, watching)), watching)
        return [(addresses.without(named_again), rules[0]) for addresses, rules in packed]

    def rule(self, name: str) -> RuleBase:
        """The rule called ``name``; ``KeyError`` if there is none."""
        return self._by_name[name]

    def rules_for(self, source: str, target: str) -> list[RuleBase]:
        """The rules of ``source`` that watch ``target`` (empty when none)."""
        return list(self.watching(source, target))

    def watching(self, source: str, target: str) -> tuple[RuleBase, ...]:
        """``rules_for``'s rules as the rule set holds them: the same tuple for every target
        the same rules watch."""
        found = self._watchers.get(source, {}).get(target)
        if found is None and source in self._packed:
            packed = self._packed[source]
            # A sweep asks of the target its list made a moment ago: that list knows it, and
            # the lists before it are not searched (a bisect each, and a miss kept).
            for addresses, rules in packed:
                if addresses.known_item(target):
                    return rules
            for addresses, rules in packed:
                if target in addresses:
                    return rules
        return found or ()

    def targets(self, source: str) -> list[str]:
        """Every target of ``source``: those the rules list, in the order they name them,
        then those of their ``addresses_file``, file by file."""
        listed = list(self._watchers.get(source, ()))
        return listed + [t for addresses, _ in self._swept.get(source, ()) for t in addresses]

    def interval(self, source: str, target: str) -> float:
        """How often ``target`` is polled: the shortest ``every`` of the rules watching it."""
        return _interval(self._known(source, target))

    def max_interval(self, source: str, target: str) -> float | None:
        """How far ``target`` may back off: the shortest ``max_every`` of the rules watching
        it, or None (always at its interval) when one of them has none."""
        return _max_interval(self._known(source, target))

    def _known(self, source: str, target: str) -> tuple[RuleBase, ...]:
        watching = self.watching(source, target)
        if not watching:
            raise KeyError((source, target))
        return watching

    def jobs(self) -> list[Job]:
        """One job per source, interval and max_interval, sorted by them (a fixed job before
        an adaptive one); targets keep the order the rules name them, those of the rules'
        ``addresses_file`` after the listed ones (``JoinedTargets``). Made once (the same
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
        files: dict[tuple[str, float, float | None], list[PackedAddresses]] = {}
        for source, swept in self._swept.items():
            for addresses, rule in swept:
                if addresses:
                    key = (source, rule.every, max_every_of(rule))
                    grouped.setdefault(key, [])
                    files.setdefault(key, []).append(addresses)

        def targets_of(key: tuple[str, float, float | None]) -> Sequence[str]:
            listed = tuple(grouped[key])
            packed = files.get(key)
            return JoinedTargets((listed, *packed)) if packed else listed

        def order(key: tuple[str, float, float | None]) -> tuple[str, float, float]:
            source, interval, longest = key
            return source, interval, 0.0 if longest is None else longest

        return [
            Job(source=source, interval=interval, targets=targets_of(key), max_interval=key[2])
            for key in sorted(grouped, key=order)
            for source, interval in [key[:2]]
        ]


def _interval(watching: Sequence[RuleBase]) -> float:
    return min(rule.every for rule in watching)


def _max_interval(watching: Sequence[RuleBase]) -> float | None:
    bounds = [max_every_of(rule) for rule in watching]
    if any(bound is None for bound in bounds):
        return None
    return min(bound for bound in bounds if bound is not None)
