"""One scheduled round (a sweep) of a source over its targets, and what it tells afterwards.

The targets are polled a bounded number at once (``watcher.service.sweeps``), each through the
poll it is given (``watcher.service.target_pipeline``); a target its last sweep found quiet is
polled from what that poll kept of its state (``watcher.service.rests``), with no read of the
state unless its answer is news; the states that quiet polls changed are written in one go at
the end; then the round's health (the built-in rpc_unhealthy), its row in
the sources' rounds, its log line and the heartbeat. A database error ends only the work it hit
(one poll, one of these writes): its transaction rolled back, the next round redoes it. Any other
error a poll raises is that target's failure (``watcher.service.target_pipeline.PollFaults``):
the sweep goes on with the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import structlog

from watcher.alerting import builtin
from watcher.alerting.builtin import RoundHealth, RoundVerdict, StateHealth
from watcher.alerting.messages import PresentedRule
from watcher.budget.admission import Admission
from watcher.budget.cadences import stored_cadence
from watcher.config.current import Current
from watcher.core.allocator import hand_back_freed
from watcher.core.clock import Clock
from watcher.core.errors import LeaseLost, StateError
from watcher.core.events import StepOutcome
from watcher.core.tally import count_handed_back, tallying
from watcher.kinds import SOURCES
from watcher.kinds.base import Source
from watcher.kinds.ruleset import Job
from watcher.ledger.models_accounts import MAX_KEYS_PER_CALL
from watcher.service.heartbeat import Heartbeat
from watcher.service.metrics import Metrics
from watcher.service.rests import Rests
from watcher.service.sweeps import (
    FirstCalls,
    Primed,
    ShardedTargets,
    quiet_sweep,
    run_batches,
    run_bounded,
    run_eagerly,
)
from watcher.service.target_pipeline import LastErrors, PollFaults
from watcher.state.interface import Store, TargetStateStore
from watcher.state.records import SourceRound

log = structlog.get_logger("watcher.app")

PREFETCH_CHUNK = 500  # targets whose states one query reads (SQLite takes up to 32,766 values)
TRIM_AFTER = 10_000  # a sweep of this many targets hands its freed memory back (a few ms)


class Polls(Protocol):
    """The polls of targets (``TargetPipeline``)."""

    def poll(
        self,
        source: Source[Any],
        target: str,
        interval: float,
        max_interval: float | None = None,
        primed: Primed | None = None,
        /,
    ) -> Awaitable[bool]:
        """One observation of a target by the job sweeping its source every ``interval`` s
        (backing off up to ``max_interval`` s when set): whether it succeeded."""
        ...

    def quiet(
        self,
        source: Source[Any],
        polls: Sequence[tuple[str, Primed | None]],
        interval: float,
        max_interval: float | None,
        /,
    ) -> list[bool]:
        """For each poll of a batch (its target and what it was primed with), whether its
        first answer shows it quiet: those are counted done, not run."""
        ...


class InForce(Protocol):
    """What a round reads of the configuration in force (``watcher.service.configuration``)."""

    @property
    def builtins(self) -> builtin.Builtins: ...


# The commit path of a (source, target)'s step under these rules at this time
# (``Committer.commit``).
Commit = Callable[[str, str, StepOutcome, Sequence[PresentedRule], float], Awaitable[None]]


@dataclass(frozen=True)
class RoundReports:
    """Where a round and its polls tell how they went."""

    health: RoundHealth  # each poll's success or failure; the round's verdict (rpc_unhealthy)
    state_health: StateHealth  # whether the database works (a write shows it does again)
    metrics: Metrics  # polls that raised
    poll_faults: PollFaults  # targets whose polls raise
    # Each source's last failed poll's error, for the round's log line; the poll writes it too.
    last_errors: LastErrors
    heartbeat: Heartbeat | None  # told each round's outcome


CoveredKey = tuple[str, float, float | None]


def _covered_key(job: Job) -> CoveredKey:
    """A job as its rounds' covered shards are kept: its source and bounds (a reload that
    changes only its targets keeps what its rounds covered)."""
    return (job.source, job.interval, job.max_interval)


class RpcHealth:
    """The built-in rpc_unhealthy: its episode, stepped by each round's verdict
    (``RoundHealth.round_done``) and stored like a target's state. ``config`` gives the built-in
    rules in force (a reload swaps them)."""

    def __init__(
        self, *, config: Current[InForce], store: TargetStateStore, commit: Commit
    ) -> None:
        self.config, self.store, self.commit = config, store, commit

    async def round_done(self, verdict: RoundVerdict, now: float) -> None:
        builtins = self.config.current.builtins
        state = await self.store.load_state(builtin.SOURCE, builtin.RPC_TARGET)
        outcome = builtins.rpc_step(state, verdict, now)
        if outcome is not None:
            rules = [builtins.rpc_unhealthy]
            await self.commit(builtin.SOURCE, builtin.RPC_TARGET, outcome, rules, now)


@dataclass(frozen=True)
class _JobRests:
    """A job's rests, and what they hold for: that job (a reload replaces it), its targets'
    sequence, the shards held (the store's object; None: every shard)."""

    job: weakref.ref[Job]
    targets: Sequence[str]
    shards: frozenset[int] | None
    rests: Rests


@dataclass(frozen=True)
class Fanout:
    """How a sweep runs its polls: ``width`` under way at once; with ``first_calls``, the
    first calls of a batch of them in one request (None: each poll makes its own), and then
    ``quiet_width`` in a sweep after a quiet one of the same job (None: ``width``)."""

    width: int
    first_calls: FirstCalls | None = None
    quiet_width: int | None = None


class Sweeper:
    """Runs the rounds. ``admission`` says which of an adaptive job's due targets the budget
    lets a sweep poll (by the cadences it keeps); ``reports`` hear how each round went, and
    ``rpc_health`` its verdict on the endpoints; ``fanout``: how many polls at once, and
    whether in batches; ``stopping`` set: no new round starts."""

    def __init__(
        self,
        *,
        polls: Polls,
        store: Store,
        admission: Admission,
        reports: RoundReports,
        rpc_health: RpcHealth,
        fanout: Fanout,
        stopping: asyncio.Event,
        clock: Clock,
    ) -> None:
        self.polls, self.store, self.admission = polls, store, admission
        self.reports, self.rpc_health = reports, rpc_health
        self.fanout = fanout
        self.stopping, self.clock = stopping, clock
        self.targets = ShardedTargets()  # each job's targets by shard, for the shards held
        # Per job (source, interval, max_interval): the shards its rounds covered since they
        # were taken (several instances; ``catch_up``).
        self._covered: dict[CoveredKey, frozenset[int]] = {}
        self._quiet: set[CoveredKey] = set()  # jobs whose last sweep was quiet (``Fanout``)
        # Per job: its targets' rests (``watcher.service.rests``), for one job object, one
        # sequence of targets and one set of held shards (the store's object).
        self._rests: dict[CoveredKey, _JobRests] = {}

    async def sweep(self, job: Job, only: frozenset[int] | None = None) -> None:
        """One scheduled round of a source over its targets, a bounded number at once
        (``watcher.service.sweeps``); the RPC client paces and batches their calls. ``only``:
        a catch-up round of just those shards (``catch_up``)."""
        if self.stopping.is_set():
            return
        source = SOURCES[job.source]
        started = self.clock()
        shards = held_at_start = self.store.shards_held()
        key = _covered_key(job)
        if shards is not None:
            if only is None:
                self._covered[key] = shards
            else:
                shards = shards & only
                self._covered[key] = self._covered.get(key, frozenset()) | shards
        if held_at_start is not None:
            await self.targets.prepare(job, held_at_start)
        held = self.targets.held(job, shards)
        targets, deferred = await self.to_poll(job, held, started) if job.adaptive else (held, 0)
        first_calls = self.fanout.first_calls
        batch = None if first_calls is None else first_calls.batch(source)
        with tallying() as tally:
            # The states of each chunk of targets are read in one query as the sweep reaches it.
            if first_calls is not None and batch is not None:
                width = self.fanout.width
                if key in self._quiet and self.fanout.quiet_width is not None:
                    width = self.fanout.quiet_width
                # A catch-up round's targets are a few shards': no rests of their own.
                rests = None if only is not None else self.rests_for(job, targets, held_at_start)
                results = await run_batches(
                    targets,
                    lambda start, part: self._poll_batch(
                        first_calls, source, start, part, job, held_at_start, rests
                    ),
                    max(1, width // batch),
                    batch=batch,
                    prepare=lambda start, stop: self._prefetch_unknown(
                        job, targets, start, stop, rests
                    ),
                    chunk=PREFETCH_CHUNK,
                )
            else:
                results = await run_bounded(
                    targets,
                    lambda target: self._unless_handed_back(source, target, job, held_at_start),
                    min(self.fanout.width, max(1, len(targets))),  # no idle workers for one
                    prepare=lambda part: self._prefetch(job, part),
                    chunk=PREFETCH_CHUNK,
                )
        self.reports.metrics.flush_polls()
        if quiet_sweep(len(targets), tally.calls, tally.balance_reads):
            self._quiet.add(key)
        else:
            self._quiet.discard(key)
        if tally.balance_reads:
            # Paid from the budget as polls are: the next sweeps have that much less room. The
            # calls they cost: a sweep's SOL reads go together, up to 100 addresses a
            # getMultipleAccounts; getTokenAccounts is one call an address.
            calls = math.ceil(tally.balance_reads / MAX_KEYS_PER_CALL) + tally.token_reads
            self.admission.spent(job, self.clock(), calls)
            self.reports.metrics.balance_reads(job.source, tally.balance_reads)
        with self.database_work("save the sweep's states"):
            await self.store.flush_states()
        now = self.clock()
        verdict = self.reports.health.round_done(job.source, now, interval=job.interval)
        if verdict is not None and self.store.holds(builtin.SOURCE, builtin.RPC_TARGET):
            with self.database_work("rpc health"):
                await self.rpc_health.round_done(verdict, now)
        failed = sum(result is False for result in results)
        done = SourceRound(
            job.source, now, len(results), failed, now - started, now if any(results) else None
        )
        with self.database_work("record the round"):
            await self.store.record_round(done)
        problem = {"error": self.reports.last_errors.last(job.source)} if failed else {}
        log.info(
            "round",
            source=job.source,
            targets=len(results),
            due=len(targets) + deferred,
            deferred=deferred,  # due, but the budget's limit had no room: the next sweep's
            skipped=len(held) - len(targets) - deferred,
            # Of ``targets``, those whose shard another instance took during the sweep: not
            # polled here (their new holder's catch-up polls them).
            handed_back=tally.handed_back,
            failed=failed,
            disagreed=tally.disagreements,  # answered, not evidence: not failed
            calls=tally.calls,
            balance_reads=tally.balance_reads,  # of the calls: amounts of addresses that moved
            alerts=tally.alerts,
            duration=round(now - started, 3),
            **problem,
        )
        if self.reports.heartbeat is not None:
            self.reports.heartbeat.round_done(all(results) and self.reports.state_health.healthy)
        if len(results) >= TRIM_AFTER:
            hand_back_freed()  # the sweep's answers, polls and states, freed by now

    async def catch_up(self, job: Job) -> None:
        """Several instances: the shards this instance took since ``job``'s last round are
        swept now rather than at its next interval (a takeover of a dead instance's targets, an
        instance that held nothing when its first round began); shards it no longer holds are
        forgotten, so one taken back later is swept again at once too. A job whose first round
        has not begun (a reload's new job, run at once) has nothing to catch up: that round
        polls every shard held when it begins, and a catch-up beside it would poll them twice."""
        held = self.store.shards_held()
        key = _covered_key(job)
        if held is None or key not in self._covered:
            return
        covered = self._covered[key] & held
        self._covered[key] = covered
        taken = held - covered
        if taken:
            await self.sweep(job, only=taken)

    async def to_poll(self, job: Job, held: Sequence[str], now: float) -> tuple[list[str], int]:
        """The targets of an adaptive job that a sweep at ``now`` polls, and how many more were
        due but put off by the budget's limit."""
        due = await self._due(job, held, now)
        polled = self.admission.admit(job, due, now)
        return polled, len(due) - len(polled)

    async def _due(self, job: Job, held: Sequence[str], now: float) -> list[str]:
        """The targets of an adaptive job to poll now (``watcher.budget.cadences``; under a
        budget, ``watcher.budget.admission`` paces the first polls). A target
        the book does not know yet has its stored cadence read first, once (at start, or when
        its shard is taken): a restart keeps every backoff (the poll goes on from the stored
        cadence)."""
        unknown = self.admission.cadences.unknown(job.source, held)
        for start in range(0, len(unknown), PREFETCH_CHUNK):
            chunk = unknown[start : start + PREFETCH_CHUNK]
            # A failed read leaves the chunk unknown: due, so polled (never later than promised).
            with self.database_work(f"read {job.source} cadences"):
                await self.store.prefetch_states(job.source, chunk)
                for target in chunk:
                    state = await self.store.load_state(job.source, target)
                    cadence = stored_cadence(state)
                    # One whose time passed while no watcher ran is due like a target never
                    # polled: under a budget, such polls after a restart are paced alike.
                    fresh = cadence is not None and cadence.next_due > now
                    self.admission.cadences.learn(job.source, target, cadence if fresh else None)
        return self.admission.due(job, held, now)

    def rests_for(
        self, job: Job, targets: Sequence[str], shards: frozenset[int] | None
    ) -> Rests | None:
        """The rests kept for this sweep of ``job`` over ``targets`` with ``shards`` held: those
        of its last sweep when it was of this very job (a reload makes new ones), the same
        targets and the same shards (no shard moved: nobody else wrote their states); else
        none known. None: a job whose polls are never quiet (adaptive: each poll moves its
        cadence)."""
        if job.adaptive:
            return None
        key = _covered_key(job)
        kept = self._rests.get(key)
        if (
            kept is not None
            and kept.job() is job
            and kept.targets is targets
            and kept.shards is shards  # identity: shards that moved and came back are not
        ):
            return kept.rests
        self._rests.pop(key, None)  # freed before its successor is made (91 bytes a target)
        for gone in [other for other, rests in self._rests.items() if rests.job() is None]:
            del self._rests[gone]  # a job a reload replaced
        rests = Rests(len(targets))
        self._rests[key] = _JobRests(weakref.ref(job), targets, shards, rests)
        return rests

    async def _prefetch_unknown(
        self, job: Job, targets: Sequence[str], start: int, stop: int, rests: Rests | None
    ) -> None:
        """``_prefetch`` of the targets at positions ``start`` to ``stop`` with no rest."""
        if rests is None:
            await self._prefetch(job, targets[start:stop])
            return
        unknown = [targets[i] for i in range(start, stop) if not rests.known(i)]
        if unknown:
            await self._prefetch(job, unknown)

    async def _prefetch(self, job: Job, chunk: Sequence[str]) -> None:
        # A failed read costs only speed: each poll then reads its own state (and meets the error).
        with self.database_work(f"read {job.source} states"):
            try:
                await self.store.prefetch_states(job.source, chunk)
            except StateError:
                raise  # database_work's
            except Exception:
                log.exception(
                    "reading a chunk of states failed; each poll reads its own", source=job.source
                )

    async def _poll_batch(
        self,
        first_calls: FirstCalls,
        source: Source[Any],
        start: int,
        targets: Sequence[str],
        job: Job,
        held_at_start: frozenset[int] | None,
        rests: Rests | None,
    ) -> list[bool | None]:
        """The polls of a batch of targets (from position ``start`` of the sweep's), their first
        calls made in one request: one whose answer shows it quiet is counted and not run
        (``Polls.quiet``), its rest kept; the others run at once, each a task of its own only
        once it waits (``run_eagerly``), their rests dropped (their states may change)."""
        known = None if rests is None else [rests.get(start + i) for i in range(len(targets))]
        primed = await first_calls.prime(source, targets, known)
        results: list[bool | None] = [None] * len(targets)  # None: handed back, not polled
        held: Sequence[int] = (
            range(len(targets))  # one instance holds every target
            if held_at_start is None
            else [
                i for i, target in enumerate(targets) if self._held(source, target, held_at_start)
            ]
        )
        if len(held) < len(targets):
            count_handed_back(len(targets) - len(held))
        quiet = self.polls.quiet(
            source, [(targets[i], primed[i]) for i in held], job.interval, job.max_interval
        )
        polls: dict[int, Coroutine[Any, Any, bool | None]] = {}
        faults = self.reports.poll_faults if self.reports.poll_faults else None  # most: none
        at_rest: list[int] = []  # polls to run that were primed from their rests
        for index, done in zip(held, quiet, strict=True):
            first = primed[index]
            if done:
                if faults is not None:
                    faults.succeeded(source.name, targets[index])
                results[index] = True
                # Read and found at rest: kept for the next sweep.
                if rests is not None and first is not None and first.state is not None:
                    rests.put(start + index, first.rest or "")  # none kept if not at rest
                continue
            if rests is not None:
                rests.drop(start + index)
            if first is not None and first.unread:
                at_rest.append(index)
            else:
                polls[index] = self._poll(source, targets[index], job, first)
        if at_rest:
            restored = await first_calls.restored(
                source,
                [targets[i] for i in at_rest],
                [cast(Primed, primed[i]) for i in at_rest],
            )
            for index, first in zip(at_rest, restored, strict=True):
                polls[index] = self._poll(source, targets[index], job, first)
        for index, ok in zip(polls, await run_eagerly(list(polls.values())), strict=True):
            results[index] = ok
        return results

    def _held(self, source: Source[Any], target: str, held_at_start: frozenset[int] | None) -> bool:
        """Whether ``target``'s shard is still this instance's (it may have been handed back or
        lost since the sweep began). While the store holds the very shards the sweep started
        with, every target of the sweep is still held: no need to hash each one to its shard
        (``holds``)."""
        unchanged = held_at_start is not None and self.store.shards_held() is held_at_start
        return unchanged or self.store.holds(source.name, target)

    async def _poll(
        self, source: Source[Any], target: str, job: Job, primed: Primed | None = None
    ) -> bool | None:
        """Whether the poll succeeded; None when the database failed it."""
        # ``database_work`` written out: its context manager per poll was a measurable share
        # of a sweep's CPU.
        commits = self.store.commits
        try:
            ok = await self.polls.poll(source, target, job.interval, job.max_interval, primed)
        except StateError as exc:
            self._database_failed(exc, f"poll {source.name}")
            return None
        except Exception as exc:  # a bug or an unreadable state: this target's failure only
            detail = self.reports.poll_faults.failed(source.name, target, exc)
            self.reports.last_errors.failed(source.name, detail)
            self.reports.metrics.poll_raised(source.name)
            ok = False
        else:
            if ok:
                self.reports.poll_faults.succeeded(source.name, target)
        if self.store.commits != commits:  # only a write shows the database works again
            self.reports.state_health.succeeded(self.clock())
        return ok

    async def _unless_handed_back(
        self, source: Source[Any], target: str, job: Job, held_at_start: frozenset[int] | None
    ) -> bool | None:
        """``_poll`` of a target still held; None (not polled) for one handed back."""
        if not self._held(source, target, held_at_start):
            count_handed_back(1)
            return None
        return await self._poll(source, target, job)

    @contextlib.contextmanager
    def database_work(self, operation: str) -> Iterator[None]:
        """A database error ends only this work (one poll): its transaction rolled back, so
        the cursor did not move without its outbox rows, and the next round redoes the step."""
        commits = self.store.commits
        try:
            yield
        except StateError as exc:
            self._database_failed(exc, operation)
        else:
            if self.store.commits != commits:  # only a write shows the database works again
                self.reports.state_health.succeeded(self.clock())

    def _database_failed(self, exc: StateError, operation: str) -> None:
        if isinstance(exc, LeaseLost):
            # Not the database failing: another instance owns the shard now (the write rolled
            # back; its new owner polls the target).
            log.info("shard lost; its write rolled back", shard=exc.shard, during=operation)
        else:
            self.reports.state_health.failed(exc.during(operation), self.clock())
