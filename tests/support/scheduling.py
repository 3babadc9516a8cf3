"""A sweeper for its scheduling only: what is due, the budget, catch-ups (nothing polls)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from watcher.budget.admission import Admission
from watcher.budget.cadences import CadenceBook
from watcher.config.call_budget import Budget
from watcher.kinds.ruleset import Job
from watcher.service.metrics import Metrics
from watcher.service.rounds import Fanout, RoundReports, Sweeper
from watcher.service.target_pipeline import LastErrors


class HeldShards:
    """What the sweeper's due filter reads of a store: no state stored, these shards held."""

    commits = 0

    def __init__(self, shards: frozenset[int] | None) -> None:
        self.shards = shards

    async def prefetch_states(self, source: str, targets: Sequence[str]) -> None:
        return None

    async def load_state(self, source: str, target: str) -> None:
        return None

    async def load_states(self, source: str, targets: Sequence[str]) -> list[None]:
        return [None] * len(targets)

    def shards_held(self) -> frozenset[int] | None:
        return self.shards


def time() -> float:
    return 0.0


@dataclass(frozen=True)
class InForce:
    """What a sweep reads of the configuration in force: the budget and the jobs."""

    budget: Budget | None
    jobs: Sequence[Job]
    builtins: Any = None  # no round ends here: no built-in rule is asked for


@dataclass(frozen=True)
class Fixed:
    """The configuration in force, never reloaded."""

    current: InForce


def in_force(budget: Budget | None, jobs: Sequence[Job]) -> Fixed:
    return Fixed(InForce(budget, jobs))


def scheduling_sweeper(
    store: HeldShards,
    book: CadenceBook,
    budget: Budget | None,
    jobs: Sequence[Job],
    metrics: Metrics,
) -> Sweeper:
    """A sweeper for its scheduling only (what is due, the budget, catch-ups): nothing polls."""
    unused = cast(Any, None)
    return Sweeper(
        polls=unused,
        store=cast(Any, store),
        admission=Admission(
            config=in_force(budget, jobs), cadences=book, shards=cast(Any, store), metrics=metrics
        ),
        reports=RoundReports(unused, unused, metrics, unused, LastErrors(), None),
        rpc_health=unused,
        fanout=Fanout(8),
        stopping=asyncio.Event(),
        clock=time,
    )
