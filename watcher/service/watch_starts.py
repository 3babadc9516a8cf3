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

from collections.abc import Iterable, Sequence
from typing import Protocol

import structlog

from watcher.config.ruleset import Job
from watcher.core.clock import Clock
from watcher.core.events import WatchSince
from watcher.kinds import SOURCES
from watcher.ledger.plausibility import SlotTip
from watcher.state.interface import TargetStateStore

log = structlog.get_logger(__name__)


class KnowsTip(Protocol):
    """Whoever knows the highest slot accepted answers have shown (the target pipeline)."""

    @property
    def tip(self) -> SlotTip | None: ...


def history_targets(jobs: Iterable[Job]) -> dict[str, set[str]]:
    """The targets of ``jobs`` per source, for the sources that read a history."""
    found: dict[str, set[str]] = {}
    for job in jobs:
        source = SOURCES.get(job.source)
        if source is not None and source.facts.reads_history:
            found.setdefault(job.source, set()).update(job.targets)
    return found


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
        for source, targets in sorted(history_targets(jobs).items()):
            known = before.get(source)
            # At start nothing came before: no copy of a million targets' set to subtract none.
            new = sorted(targets - known if known else targets)
            if not new:
                continue
            count = await self.store.register_watch(source, new, since)
            began += count
            if count:
                log.info("watch began", source=source, targets=count, since=since.at)
        return began
