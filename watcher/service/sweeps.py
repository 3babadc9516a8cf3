"""How one sweep runs its targets: enough at once to fill the batches and the rate, never all.

``run_bounded`` polls the targets with at most ``width`` observations in flight (workers pulling
from one iterator: 100,000 targets are never 100,000 tasks), results in the targets' order, each
chunk prepared (its states read in one query) as the polls reach it. ``run_batches`` does it a
batch at a time: ``FirstCalls`` makes a batch's first calls in one request; a poll whose answer
shows it quiet ends there (``watcher.service.rounds``), and ``run_eagerly`` runs the others at
once, each a task only once it waits.
``sweep_width`` is that width for a client: every request the concurrency cap allows, each
filled with a batch, eight times over: a first poll waits for two answers (its signatures,
then its balance), and the balance reads of the batches waiting at once share requests (twice
over, a first sweep sent 1.5 requests a batch; eight times, 1.13: bench/README). After a quiet
sweep (``quiet_sweep``: its polls ended at their first answers) twice over is enough to keep
every slot busy, and the batches beyond it would only wait for a slot, each wait a task switch
through the whole poll path (7% of a quiet poll's instructions).

``stretch_warning`` (pure): when the requests a sweep needs take longer at ``max_rps`` than its
interval, the sweep stretches to fit the rate (the pacer sees to it) and the user is told once,
by how much, rather than finding out from late alerts.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import threading
import weakref
from array import array
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from itertools import chain
from typing import Any, Generic, NamedTuple, TypeVar, cast

import structlog

from watcher.config.packed_keys import JoinedTargets, PackedAddresses, PickedTargets
from watcher.core.errors import StateError
from watcher.core.events import TargetState
from watcher.core.tally import count_call
from watcher.kinds import SOURCES
from watcher.kinds.base import FirstCall, LedgerReader, Source
from watcher.kinds.ruleset import Job
from watcher.ledger.rpc import RpcClient
from watcher.ledger.rpc_methods import Call, PrimedReader
from watcher.state.interface import TargetStateStore
from watcher.state.shards import shard_of

log = structlog.get_logger(__name__)

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


async def run_batches(
    targets: Sequence[T],
    poll_batch: Callable[[int, Sequence[T]], Awaitable[Sequence[R]]],
    width: int,
    *,
    batch: int,
    prepare: Callable[[int, int], Awaitable[None]] | None = None,
    chunk: int = 1,
) -> list[R]:
    """``run_bounded`` a batch at a time: ``poll_batch(start, part)`` polls the ``batch``
    targets from position ``start`` together and returns their results in order, at most
    ``width`` batches at a time; ``prepare(start, stop)`` as there, for the targets at those
    positions (a chunk of whole batches)."""
    results: list[R | None] = [None] * len(targets)
    count = math.ceil(len(targets) / batch)

    async def poll(index: int) -> None:
        start = index * batch
        results[start : start + batch] = await poll_batch(start, targets[start : start + batch])

    async def prepare_batches(indexes: Sequence[int]) -> None:
        assert prepare is not None
        await prepare(indexes[0] * batch, min(len(targets), (indexes[-1] + 1) * batch))

    await run_bounded(
        range(count),
        poll,
        min(width, max(1, count)),  # no idle workers for a few batches
        prepare=None if prepare is None else prepare_batches,
        chunk=max(1, chunk // batch),
    )
    return cast(list[R], results)  # every slot filled: each batch was polled


async def run_eagerly(polls: Sequence[Coroutine[Any, Any, R]]) -> list[R]:
    """Each of ``polls`` run at once, up to its first wait; one that finishes without waiting
    (its answer in hand: a failed call, say) costs no task and no turn of the event loop; the
    others go on as tasks, awaited together. Results in order. (Python 3.12's eager tasks, for
    3.11.)"""
    results: list[Any] = [None] * len(polls)
    waiting: list[tuple[int, asyncio.Task[R]]] = []
    try:
        for index, poll in enumerate(polls):
            try:
                yielded = poll.send(None)
            except StopIteration as done:
                results[index] = done.value
            else:
                waiting.append((index, asyncio.ensure_future(_finish(_Rest(poll, yielded)))))
        if waiting:
            for (index, _), value in zip(
                waiting, await asyncio.gather(*(task for _, task in waiting)), strict=True
            ):
                results[index] = value
    except BaseException:
        for _, task in waiting:
            task.cancel()
        if waiting:
            await asyncio.wait([task for _, task in waiting])
        # Every poll ended before the caller hears of it: one not started, or whose task was
        # cancelled before it ran, is closed here (its cleanups run); a finished one ignores it.
        for poll in polls:
            poll.close()
        raise
    return cast(list[R], results)


class _Rest(Generic[R]):
    """The rest of a coroutine that was started outside a task and waits on ``yielded``: each
    wait passed to the task running it, each wake-up (or cancellation) passed back."""

    def __init__(self, coroutine: Coroutine[Any, Any, R], yielded: Any) -> None:
        self._coroutine, self._yielded = coroutine, yielded

    def __await__(self) -> Generator[Any, None, R]:
        coroutine, yielded = self._coroutine, self._yielded
        while True:
            try:
                yield yielded
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as exc:  # the task cancelled: the coroutine hears it
                try:
                    yielded = coroutine.throw(exc)
                except StopIteration as done:
                    return cast(R, done.value)
            else:
                try:
                    yielded = coroutine.send(None)
                except StopIteration as done:
                    return cast(R, done.value)


async def _finish(rest: _Rest[R]) -> R:
    return await rest


class FirstCalls:
    """The first calls of a batch of polls, made together in one request through ``client``:
    the source of a ``FirstCall`` says each target's, by its state (the signatures of an
    address since its cursor); each poll then starts from its ``Primed``: its state and a
    reader holding that answer. Not for polls under quorum (they ask several endpoints)."""

    def __init__(self, client: RpcClient, store: TargetStateStore) -> None:
        self.client, self.store = client, store

    def batch(self, source: Source[Any]) -> int | None:
        """Targets of ``source`` whose first calls go in one request; None: each poll makes
        its own calls (the source does not say them, or the client does not batch)."""
        batcher = self.client.batcher
        if batcher is None or not isinstance(source, FirstCall):
            return None
        method = source.facts.batched
        return batcher.cap(method) if method else batcher.batch_size

    async def prime(
        self,
        source: Source[Any],
        targets: Sequence[str],
        rests: Sequence[str | None] | None = None,
    ) -> list[Primed | None]:
        """What each target's poll starts from: its state as read (handed on: a sweep's
        prefetched copy is handed out once) and a reader holding its first call's answer. No
        reader: a state with no first call (a first poll) or one the source cannot read (its
        poll meets that error). Each with its state's rest when it is at rest. A target with a
        rest kept (``rests``: the sweep's, by position; ``watcher.service.rests``) has its call
        made from it and no state read (``Primed.unread``): only ``Polls.quiet`` reads such a
        ``Primed``, and ``restored`` gives it its state. None for every poll when a database
        error failed the batch's read: each poll reads its own state (and meets the error)."""
        first = cast(FirstCall, source)  # as ``batch`` found
        if rests is None:
            unknown, rests = targets, [None] * len(targets)
        else:
            unknown = [target for target, rest in zip(targets, rests, strict=True) if rest is None]
        try:
            read = iter(await self.store.load_states(source.name, unknown) if unknown else ())
        except StateError:
            return [None] * len(targets)
        states: list[TargetState | None] = []
        calls: list[Call | None] = []
        at_rest: list[str | None] = []
        for target, rest in zip(targets, rests, strict=True):
            state = None if rest is not None else next(read)
            call: Call | None = None
            try:
                if rest is None:
                    call = first.first_call(self.client, target, state)
                    rest = first.rest(state)  # what the sweep keeps if the poll is quiet
                else:
                    call = first.call_at_rest(self.client, target, rest)
            except Exception:  # an unreadable state: its own poll fails on it, as any
                call = None
            states.append(state)
            calls.append(call)
            at_rest.append(rest)
        made = [call for call in calls if call is not None]
        if len({call.method for call in made}) > 1:
            made = []  # one request, one method: each poll makes its own call
        answers = iter(await self._answers(made) if made else ())
        client = self.client
        # A poll with no call made runs as any (one not read: it reads its own state).
        return [
            (None if state is None and rest is not None else Primed(state))
            if call is None or not made
            else Primed(state, call, next(answers), client, rest)
            for state, call, rest in zip(states, calls, at_rest, strict=True)
        ]

    async def restored(
        self, source: Source[Any], targets: Sequence[str], primed: Sequence[Primed]
    ) -> list[Primed | None]:
        """The polls of ``targets`` primed from their rests, each with its state read (one
        query), to be run; None for each when a database error failed the read: each poll
        reads its own (and meets the error)."""
        try:
            states = await self.store.load_states(source.name, targets)
        except StateError:
            return [None] * len(targets)
        return [first._replace(state=state) for first, state in zip(primed, states, strict=True)]

    async def _answers(self, calls: Sequence[Call]) -> list[Any]:
        """The answers of ``calls`` (one method), in one request: each a value or its error."""
        count_call(len(calls))  # the round's tally (watcher.core.tally), as each call of its own
        method, model = calls[0].method, calls[0].model
        return await self.client.call_batch(method, [call.params for call in calls], model)


class Primed(NamedTuple):
    """What a poll of a batch starts from: the target's state as its batch read it (a state
    read once: a sweep's prefetched copy is handed out once) and, when the batch made its first
    call, that ``call`` and its ``answer`` (a value, or the ``RpcError`` it failed with), made
    through ``client``; its ``rest`` (``FirstCall.rest``), None when it is not at rest. A
    ``rest`` with no ``state`` is ``unread``: the call was made from the rest a sweep kept,
    for ``Polls.quiet`` only; a poll runs from it once ``FirstCalls.restored``. (A tuple: one
    is made per poll.)"""

    state: TargetState | None
    call: Call | None = None
    answer: Any = None
    client: RpcClient | None = None
    rest: str | None = None

    @property
    def unread(self) -> bool:
        """Primed from a kept rest: the state was not read."""
        return self.state is None and self.rest is not None

    def ledger(self) -> LedgerReader | None:
        """A reader that gives the poll that answer when it makes that call (None: no call
        made, the poll makes its calls itself)."""
        if self.call is None or self.client is None:
            return None
        return PrimedReader(self.client, self.call, self.answer)


HOLD_FROM = 65_536  # a packed list this long keeps only the held shards' keys in memory


class ShardedTargets:
    """A job's targets in the shards an instance holds (several instances on one database),
    shard by shard. Each job's partition is computed once (a hash per target) and kept while
    the job is in force, as positions in the job's targets (4 bytes a target): a reload makes
    new jobs, and the old ones' partitions are dropped. The held shards' targets are their
    positions too (``PickedTargets``): a job of packed addresses holds no str for any shard,
    each made when its poll comes. A packed list of ``hold_from`` addresses or more keeps in
    memory only the keys of the shards held (``PackedAddresses.hold_only``): a quarter of a
    million's 32 MB on each of four instances, the rest read from a file when shards move."""

    def __init__(self, hold_from: int = HOLD_FROM) -> None:
        self._hold_from = hold_from
        self._by_job: dict[int, tuple[Job, dict[int, array[int]]]] = {}
        # Per job, the last shards asked about and their targets: the same sequence while the
        # shards held stay the same (the cadence book indexes it once).
        self._held: dict[int, tuple[Job, frozenset[int], PickedTargets]] = {}
        # Per job, the shards its packed lists hold the keys of; per packed list, the positions
        # each job of it wants held (two rules of two sources may share a file's list: it
        # holds both shares). Weak: a list or a job a reload dropped is not kept for this.
        self._kept_for: dict[int, tuple[Job, frozenset[int]]] = {}
        self._shares: dict[int, _Shares] = {}
        self._lock = threading.Lock()
        self._warned = False  # said once that a list could not keep its share only

    async def prepare(self, job: Job, shards: frozenset[int]) -> None:
        """Partitions ``job``'s targets when it is new, and keeps its packed lists' keys of
        ``shards`` (all the instance holds) when they moved, in a thread: a million hashes
        take a second or more, which on the event loop would hold up the lease renewals."""
        kept = self._kept_for.get(id(job))
        if self._kept(job) is None or kept is None or kept[0] is not job or kept[1] != shards:
            await asyncio.to_thread(self._prepare, job, shards)

    def _prepare(self, job: Job, shards: frozenset[int]) -> None:
        with self._lock:  # two jobs' threads may share a list
            self._prepare_locked(job, shards)

    def _prepare_locked(self, job: Job, shards: frozenset[int]) -> None:
        picked = self._picked(job, shards)
        if len(self._kept_for) > 64:  # jobs of rules replaced by a reload
            self._kept_for.clear()
        self._kept_for[id(job)] = (job, shards)
        if not isinstance(job.targets, JoinedTargets):
            return
        positions = picked.positions
        for start, part in job.targets.placed():
            if isinstance(part, PackedAddresses) and len(part) >= self._hold_from:
                end = start + len(part)
                mine = array("I", (p - start for p in positions if start <= p < end))
                self._share(part, job, mine)

    def _share(self, packed: PackedAddresses, job: Job, positions: array[int]) -> None:
        for key in [key for key, shares in self._shares.items() if shares.list() is None]:
            del self._shares[key]
        shares = self._shares.get(id(packed))
        if shares is None or shares.list() is not packed:
            shares = self._shares[id(packed)] = _Shares(weakref.ref(packed), {})
        shares.by_job[id(job)] = (weakref.ref(job), positions)
        wanted = [mine for owner, mine in shares.by_job.values() if owner() is not None]
        if not packed.hold_only(chain.from_iterable(wanted)) and not self._warned:
            self._warned = True
            log.warning(
                "no temporary file for the addresses of shards not held: all kept in memory",
                addresses=len(packed),
                directory=tempfile.gettempdir(),
            )

    def held(self, job: Job, shards: frozenset[int] | None) -> Sequence[str]:
        """``job``'s targets in ``shards`` (None: all of them, in the job's order)."""
        if shards is None:
            return job.targets
        return self._picked(job, shards)

    def _picked(self, job: Job, shards: frozenset[int]) -> PickedTargets:
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


class _Shares(NamedTuple):
    """A packed list (weakly) and the positions each job of it wants held, by the job's id."""

    list: weakref.ref[PackedAddresses]
    by_job: dict[int, tuple[weakref.ref[Job], array[int]]]


def sweep_width(max_concurrency: int, batch_size: int, *, quiet: bool = False) -> int:
    """Observations in flight in one sweep; ``quiet``: in a sweep after a quiet one."""
    return (2 if quiet else 8) * max_concurrency * batch_size


QUIET_SHARE = 10  # a sweep is quiet when at most one poll in this many went past its first call


def quiet_sweep(targets: int, calls: int, balance_reads: int) -> bool:
    """Whether a sweep of ``targets`` polls making ``calls`` calls and ``balance_reads`` balance
    reads (its ``RoundTally``) was quiet: nearly every poll ended at its first answer."""
    return calls * QUIET_SHARE <= targets * (QUIET_SHARE + 1) and (
        balance_reads * QUIET_SHARE <= targets
    )


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
