"""When a watch begins: the moment a target is first asked for, kept before its first poll.

A source that reads a history (``SourceFacts.reads_history``: the signatures of an address)
notifies, at a target's first poll, what came after the watch began and takes the rest as the
baseline. The watch begins when the daemon starts with the target in its rules, or when the
reload that adds it is put in force, not when its first poll comes: under ``rpc.budget`` or
``max_rps`` a large list is first polled over minutes, and a deposit in that window is what
the operator asked to hear about.

``WatchStarts.began`` keeps that moment (``WatchSince``) as the first state of each target that
has none, in the store, before the sweeps run: durable across a restart (a crash before the
first poll redoes it from the same moment), and the same for every instance of a shared store
(a row that exists is never changed, so the first instance's moment is kept). A target already
polled keeps its state: its cursor says where it was seen up to.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

import structlog

from watcher.config.packed_keys import JoinedTargets, PackedAddresses
from watcher.core.clock import Clock
from watcher.core.events import WatchSince
from watcher.kinds import SOURCES
from watcher.kinds.ruleset import Job
from watcher.ledger.plausibility import SlotTip
from watcher.state.interface import TargetStateStore

log = structlog.get_logger(__name__)


class KnowsTip(Protocol):
    """Whoever knows the highest slot accepted answers have shown (the target pipeline)."""

    @property
    def tip(self) -> SlotTip | None: ...


def history_targets(jobs: Iterable[Job]) -> dict[str, list[Sequence[str]]]:
    """The targets of ``jobs`` per source, for the sources that read a history: the parts of
    each job's targets (its listed ones, and the packed addresses of rule files, which are not
    turned into a million str at once)."""
    found: dict[str, list[Sequence[str]]] = {}
    for job in jobs:
        source = SOURCES.get(job.source)
        if source is not None and source.facts.reads_history:
            targets = job.targets
            parts = targets.parts if isinstance(targets, JoinedTargets) else (targets,)
            found.setdefault(job.source, []).extend(parts)
    return found


def _new_targets(
    parts: list[Sequence[str]], before: list[Sequence[str]]
) -> Iterator[Sequence[str]]:
    """The targets of ``parts`` not in ``before``, a bounded piece at a time: the listed ones
    sorted, then each packed list's in its order (the same order in every instance)."""
    packed_before = [part for part in before if isinstance(part, PackedAddresses)]
    listed_before = {t for part in before if not isinstance(part, PackedAddresses) for t in part}

    def known(target: str) -> bool:
        return target in listed_before or any(target in part for part in packed_before)

    listed = {t for part in parts if not isinstance(part, PackedAddresses) for t in part}
    # At start nothing came before: nothing to look up.
    yield sorted(t for t in listed if not known(t)) if before else sorted(listed)
    for part in parts:
        if not isinstance(part, PackedAddresses) or part in packed_before:
            continue  # listed: above; packed and in force already: every target known
        for start in range(0, len(part), PIECE):
            yield [t for t in part[start : start + PIECE] if not (before and known(t))]


PIECE = 10_000  # packed addresses registered at once (made into str for it)


class WatchStarts:
    """Keeps when the watch of each history-reading target began (see the module)."""

    def __init__(self, store: TargetStateStore, clock: Clock, tips: KnowsTip) -> None:
        """``tips``: the slot at the moment, where an answer has shown one (a lower bound)."""
        self.store, self.clock, self.tips = store, clock, tips

    async def began(self, jobs: Sequence[Job], previous: Sequence[Job] = ()) -> int:
        """The watch of the targets of ``jobs`` not in ``previous`` begins now (those with a
        state keep it); how many targets began. Raises ``StateError`` when the store cannot
        keep it: their polls must not start without it."""
        tip = self.tips.tip
        since = WatchSince(self.clock(), None if tip is None else tip.slot)
        before = history_targets(previous)
        began = 0
        for source, parts in sorted(history_targets(jobs).items()):
            count = 0
            for new in _new_targets(parts, before.get(source, [])):
                if new:
                    count += await self.store.register_watch(source, new, since)
            began += count
            if count:
                log.info("watch began", source=source, targets=count, since=since.at)
        return began
