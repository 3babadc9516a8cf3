"""Several instances: a target whose shard another instance takes during a sweep is not polled
by this one, and the round's line says how many were handed back (the sweep's ``targets`` then
counts polls that did not happen, and a sum over instances would read more polls than targets).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

from structlog.testing import capture_logs

from watcher.alerting.builtin import RoundHealth, StateHealth
from watcher.kinds.base import Source
from watcher.kinds.ruleset import Job
from watcher.service.metrics import Metrics
from watcher.service.rounds import Fanout, RoundReports, Sweeper
from watcher.service.sweeps import Primed
from watcher.service.target_pipeline import LastErrors, PollFaults
from watcher.state.records import SourceRound
from watcher.state.shards import shard_of

from support.scheduling import HeldShards, time

JOB = Job("signatures", 60.0, tuple(f"target{i}" for i in range(40)))


class MovingShards(HeldShards):
    """A store holding ``shards`` until it is told to give some up; the sweep reads no state."""

    def __init__(self, shards: frozenset[int]) -> None:
        super().__init__(shards)
        self.shards: frozenset[int] = shards

    def holds(self, source: str, target: str) -> bool:
        # The job's targets only: the built-in rpc target is another instance's here.
        return source == JOB.source and shard_of(source, target) in self.shards

    async def flush_states(self) -> int:
        return 0

    async def record_round(self, done: SourceRound) -> None:
        return None


class Polls:
    """Polls that succeed; after the ``give_up_after``-th, the store gives up the shards of
    the targets not polled yet (another instance took them)."""

    def __init__(self, store: MovingShards, give_up_after: int) -> None:
        self.store, self.give_up_after = store, give_up_after
        self.polled: list[str] = []

    async def poll(self, source: Source[Any], target: str, *_: Any) -> bool:
        self.polled.append(target)
        if len(self.polled) == self.give_up_after:
            rest = JOB.targets[JOB.targets.index(target) + 1 :]
            taken = {shard_of(JOB.source, later) for later in rest[::2]}
            self.store.shards = frozenset(self.store.shards - taken)
        await asyncio.sleep(0)
        return True

    def quiet(
        self, source: Source[Any], polls: Sequence[tuple[str, Primed]], *_: Any
    ) -> list[bool]:
        return [False] * len(polls)  # none: each target's poll runs


async def test_a_target_whose_shard_moved_during_the_sweep_is_counted_handed_back() -> None:
    store = MovingShards(frozenset(shard_of(JOB.source, target) for target in JOB.targets))
    polls = Polls(store, give_up_after=10)
    metrics = Metrics(time)
    sweeper = Sweeper(
        polls=cast(Any, polls),
        store=cast(Any, store),
        admission=cast(Any, None),  # a fixed job: the budget is not asked
        reports=RoundReports(
            RoundHealth(), StateHealth(), metrics, PollFaults(), LastErrors(), None
        ),
        rpc_health=cast(Any, None),
        fanout=Fanout(1),  # one poll at a time: the move lands between two polls
        stopping=asyncio.Event(),
        clock=time,
    )
    with capture_logs() as logs:
        await sweeper.sweep(JOB)
    (line,) = [entry for entry in logs if entry["event"] == "round"]
    not_polled = [target for target in JOB.targets if target not in polls.polled]
    assert not_polled  # some shards moved
    assert all(not store.holds(JOB.source, target) for target in not_polled)
    assert (line["targets"], line["handed_back"]) == (len(JOB.targets), len(not_polled))
    assert len(polls.polled) + line["handed_back"] == len(JOB.targets)
