"""How one sweep runs its targets: enough at once to fill the batches and the rate, never all.

``run_bounded`` polls the targets with at most ``width`` observations in flight (workers pulling
from one iterator: 100,000 targets are never 100,000 tasks), results in the targets' order, each
chunk prepared (its states read in one query) as the polls reach it.
``sweep_width`` is that width for a client: every request the concurrency cap allows, each
filled with a batch, twice over so that the next batch is ready when a slot frees.

``stretch_warning`` (pure): when the requests a sweep needs take longer at ``max_rps`` than its
interval, the sweep stretches to fit the rate (the pacer sees to it) and the user is told once,
by how much, rather than finding out from late alerts.
"""

from __future__ import annotations

import asyncio
import math
from array import array
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

from watcher.config.ruleset import Job, PickedTargets
from watcher.kinds import SOURCES
from watcher.ledger.rpc import RpcClient
from watcher.state.shards import shard_of

T = TypeVar("T")
R = TypeVar("R")


YIELD_AFTER = 0.01  # seconds a sweep's worker may hold the event loop before it gives a turn


async def run_bounded(
    targets: Sequence[T],
    poll: Callable[[T], Awaitable[R]],
    width: int,
    *,
    prepare: Callable[[Sequence[T]], Awaitable[None]] | None = None,
    chunk: int = 1,
) -> list[R]:
    """``poll`` of each target, at most ``width`` at a time; results in the targets' order.
    ``prepare`` (if any) is awaited on each chunk of ``chunk`` targets when the polls reach it,
    before any poll of that chunk starts (a sweep reads its targets' states a chunk at a time)."""
    # One slot per target, filled in place: a dict of index -> result held an entry and an int
    # per target until the sweep ended (about 90 bytes an address at its peak).
    results: list[R | None] = [None] * len(targets)
    pending = iter(range(len(targets)))
    prepared: dict[int, asyncio.Future[None]] = {}  # a chunk's first index -> its prepare
    loop = asyncio.get_running_loop()
    # A poll answered without waiting (a shared answer: one getVoteAccounts serves a thousand
    # validators) does not give the loop back; a worker then steps poll after poll and holds
    # the loop for a quarter of a second (a scrape of /metrics waited that long). Each worker
    # gives the loop a turn once it has held it this long.
    turn_ends = [loop.time() + YIELD_AFTER]

    async def worker() -> None:
        for index in pending:
            if loop.time() >= turn_ends[0]:
                await asyncio.sleep(0)
                turn_ends[0] = loop.time() + YIELD_AFTER
            if prepare is not None:
                start = index - index % chunk
                ready = prepared.get(start)
                if ready is None:
                    ready = asyncio.ensure_future(prepare(targets[start : start + chunk]))
                    prepared[start] = ready
                await ready  # at once when done: the chunk's other polls wait only for its start
            results[index] = await poll(targets[index])

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, width))]
    try:
        await asyncio.gather(*workers)
    finally:
        for task in [*workers, *prepared.values()]:
            task.cancel()
    return cast(list[R], results)  # every slot filled: each index was polled


class ShardedTargets:
    """A job's targets in the shards an instance holds (several instances on one database),
    shard by shard. Each job's partition is computed once (a hash per target) and kept while
    the job is in force, as positions in the job's targets (4 bytes a target): a reload makes
    new jobs, and the old ones' partitions are dropped. The held shards' targets are their
    positions too (``PickedTargets``): a job of packed addresses holds no str for any shard,
    each made when its poll comes."""

    def __init__(self) -> None:
        self._by_job: dict[int, tuple[Job, dict[int, array[int]]]] = {}
        # Per job, the last shards asked about and their targets: the same sequence while the
        # shards held stay the same (the cadence book indexes it once).
        self._held: dict[int, tuple[Job, frozenset[int], PickedTargets]] = {}

    async def prepare(self, job: Job) -> None:
        """Partitions ``job``'s targets in a thread when it is new: a million hashes take a
        second or more, which on the event loop would hold up the lease renewals."""
        if self._kept(job) is None:
            await asyncio.to_thread(self._partition, job)

    def held(self, job: Job, shards: frozenset[int] | None) -> Sequence[str]:
        """``job``'s targets in ``shards`` (None: all of them, in the job's order)."""
        if shards is None:
            return job.targets
        kept = self._held.get(id(job))
        if kept is not None and kept[0] is job and kept[1] == shards:
            return kept[2]
        partition = self._partition(job)
        positions = array("I")
        for shard in sorted(shards):
            positions.extend(partition.get(shard, ()))
        targets = PickedTargets(job.targets, positions)
        if len(self._held) > 64:  # jobs of rules replaced by a reload
            self._held.clear()
        self._held[id(job)] = (job, shards, targets)
        return targets

    def _kept(self, job: Job) -> dict[int, array[int]] | None:
        """``job``'s partition when it is made already."""
        kept = self._by_job.get(id(job))
        return kept[1] if kept is not None and kept[0] is job else None

    def _partition(self, job: Job) -> dict[int, array[int]]:
        kept = self._kept(job)
        if kept is not None:
            return kept
        if len(self._by_job) > 64:  # jobs of rules replaced by a reload
            self._by_job.clear()
        partition: dict[int, array[int]] = {}
        for index, target in enumerate(job.targets):
            shard = shard_of(job.source, target)
            positions = partition.get(shard)
            if positions is None:
                positions = partition[shard] = array("I")
            positions.append(index)
        self._by_job[id(job)] = (job, partition)
        return partition


def sweep_width(max_concurrency: int, batch_size: int) -> int:
    """Observations in flight in one sweep."""
    return 2 * max_concurrency * batch_size


def stretch_warning(job: Job, *, max_rps: float | None, calls_per_request: int) -> str | None:
    """The one-line warning when ``job``'s sweep cannot fit its interval at ``max_rps``."""
    if max_rps is None or not job.targets:
        return None
    requests = math.ceil(len(job.targets) / max(1, calls_per_request))
    needed = requests / max_rps
    if needed <= job.interval:
        return None
    source = SOURCES.get(job.source)  # what its targets are: the source says (``SourceFacts``)
    noun = source.facts.noun if source is not None else "targets"
    return (
        f"sweep of {len(job.targets)} {noun} needs {_seconds(needed)} s at {max_rps:g} req/s, "
        f"longer than every: {job.interval:g}s"
    )


def _seconds(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def stretch_for(client: RpcClient, job: Job) -> str | None:
    """``stretch_warning`` for ``job`` on ``client``, at the first endpoint's ``max_rps``."""
    endpoints, batcher = client.endpoints, client.batcher
    if not endpoints:
        return None
    source = SOURCES.get(job.source)  # the method it batches, if the source names one
    method = source.facts.batched if source is not None else None
    per_request = 1
    if batcher is not None:
        per_request = batcher.cap(method) if method else batcher.batch_size
    return stretch_warning(job, max_rps=endpoints[0].max_rps, calls_per_request=per_request)
