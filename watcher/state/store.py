"""State in SQLite: per-target state documents, the alert history and the delivery outbox.

Apprise URLs hold tokens and passwords: the store only ever sees their ``url_id``.

Each concern is a repository over the one ``sqlite_utils.Database`` it is given: the target
states (``watcher.state.targets``), the delivery outbox (``watcher.state.deliveries``), silences
(``watcher.state.records``), the alert history and the sources' last rounds
(``watcher.state.records``), retention (``watcher.state.retention``) and what is true now
(``watcher.state.snapshot``). Every write is one short transaction. A step's new state, its
alerts and their deliveries are committed together (``commit_step``), so a crash either loses
the whole step (the cursor did not move: the step is redone) or nothing (the deliveries wait in
the outbox).

``SqliteStore`` opens the file and holds the repositories; its methods are the protocol's
calls, synchronous, for one thread (the tests, the benchmarks, the one-shot commands).
``AsyncSqliteStore`` is the SQLite engine of the asynchronous ``Store`` protocol
(``watcher.state.interface``): it runs the calls of a ``SqliteStore`` on one thread of its
own (those of its target states' repository directly, the states held in memory staying on the
loop's thread), one at a time in the order called, and reads what is true now on a second
thread with a read-only connection. Both map the driver's errors to the store's
(``watcher.state.database.mapped``). ``with SqliteStore(path) as store:`` closes the file at the
end, as ``async with AsyncSqliteStore.open(path) as store:`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

from sqlite_utils import Database

from watcher.core.errors import StateError
from watcher.core.events import NewSilence, Silence, TargetState, WatchSince
from watcher.core.outbox_rows import AlertRecord, DeliveryRow, GroupSends
from watcher.state.closing import AsyncClosing, Closing
from watcher.state.database import (
    StateUnusable,
    mapped,
    mapped_batches,
    migrate,
    open_database,
    open_readonly,
    require_schema,
    schema_version,
    state_errors,
    transaction,
)
from watcher.state.deliveries import Deliveries
from watcher.state.interface import GiveUp, LeaseRound, StepToCommit
from watcher.state.records import History, Silences, SourceRound
from watcher.state.retention import BATCH_ROWS, Pruned, Retention, WatchedTarget
from watcher.state.snapshot import Awaiting, Snapshots, StateSummary, StoreStatus
from watcher.state.targets import MISS, REGISTER_CHUNK, STAGED_LIMIT, HeldStates, TargetRows

_T = TypeVar("_T")


class SqliteStore(Closing):
    """The watcher's SQLite state, synchronous: call it from one thread only. Every call of the
    protocol raises the store's errors, never ``sqlite3``'s."""

    def __init__(self, path: Path | str, *, readonly: bool = False, upgrade: bool = True) -> None:
        """``readonly``: open an existing database for reading only (``open_readonly``).
        ``upgrade=False``: a command writing beside a running daemon (``silence add``) uses
        an existing database as it is, its schema must be this watcher's; only a new one is
        set up. Otherwise (``watcher run``) create and upgrade it."""
        self.path = Path(path)
        self._db = open_readonly(self.path) if readonly else _open_writable(self.path, upgrade)
        self.targets = TargetRows(self._db)
        self.outbox = Deliveries(self._db)
        self.silences = Silences(self._db)
        self.alerts = History(self._db)
        self.retention = Retention(self._db)
        self.snapshots = Snapshots(self._db)
        # The staged and prefetched states (``watcher.state.targets.HeldStates``).
        self.held = HeldStates(STAGED_LIMIT)

    @property
    def db(self) -> Database:
        return self._db

    @property
    def commits(self) -> int:
        return self.targets.commits

    def close(self) -> None:
        # A staged state that cannot be written now is a poll not done: the next run redoes it.
        with contextlib.suppress(StateError):
            self.flush_states()
        with mapped("close"):
            self._db.close()

    def transaction(self) -> AbstractContextManager[None]:
        return transaction(self._db)

    # -- target state -------------------------------------------------------------------------

    def prefetch_states(self, source: str, targets: Sequence[str]) -> None:
        with mapped("prefetch states"):
            self.held.prefetched(source, self.targets.read_states(source, targets))

    def stage_state(self, source: str, target: str, state: TargetState, now: float) -> bool:
        return self.held.stage(source, target, state, now)

    def flush_states(self) -> int:
        if not self.held.staged:
            return 0
        with self.held.flush() as rows, mapped("flush states"):  # staged again if it fails
            self.targets.write_states(rows)
        return len(rows)

    def load_state(self, source: str, target: str) -> TargetState | None:
        held = self.held.load(source, target)
        if held is not MISS:
            return held
        with mapped("load state"):
            return self.targets.read_state(source, target)

    def register_watch(self, source: str, targets: Sequence[str], since: WatchSince) -> int:
        with mapped("register watch"):
            return self.targets.register_watch(source, targets, since)

    def commit_step(self, step: StepToCommit) -> list[int]:
        with mapped("commit step"):
            new_ids = self.targets.write_step(step)
        self.held.written(step.source, step.target)  # this write is newer
        return new_ids

    # -- the delivery outbox ------------------------------------------------------------------

    def due_deliveries(
        self, now: float, limit: int = 100, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        with mapped("due deliveries"):
            return self.outbox.due_deliveries(now, limit, skip_urls)

    def claim_due(
        self, now: float, limit: int = 100, group_limit: int = 0, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        with mapped("claim due"):
            return self.outbox.claim_due(now, limit, group_limit, skip_urls)

    def next_due(self, skip_urls: Sequence[str] = ()) -> float | None:
        with mapped("next due"):
            return self.outbox.next_due(skip_urls)

    def group_sends(self, group_key: str, url_id: str) -> GroupSends:
        with mapped("group sends"):
            return self.outbox.group_sends(group_key, url_id)

    def release(self, delivery_ids: Sequence[int], not_before: float | None = None) -> None:
        with mapped("release"):
            self.outbox.release(delivery_ids, not_before)

    def requeue_interrupted(self) -> int:
        with mapped("requeue interrupted"):
            return self.outbox.requeue_interrupted()

    def mark_sent(
        self, delivery_ids: int | Sequence[int], now: float, group: tuple[str, str] | None = None
    ) -> list[int]:
        with mapped("mark sent"):
            return self.outbox.mark_sent(delivery_ids, now, group)

    def mark_retry(
        self, delivery_ids: int | Sequence[int], error: str, next_attempt_at: float
    ) -> list[int]:
        with mapped("mark retry"):
            return self.outbox.mark_retry(delivery_ids, error, next_attempt_at)

    def mark_dead(self, give_up: GiveUp) -> list[int]:
        with mapped("mark dead"):
            return self.outbox.mark_dead(give_up)

    def pending_count(self) -> int:
        with mapped("pending count"):
            return self.outbox.pending_count()

    def standing_alerts(self, url_ids: Sequence[str], resolved_since: float) -> list[DeliveryRow]:
        with mapped("standing alerts"):
            return self.outbox.standing_alerts(url_ids, resolved_since)

    # -- silences -----------------------------------------------------------------------------

    def add_silence(self, new: NewSilence, now: float) -> Silence:
        with mapped("add silence"):
            return self.silences.add_silence(new, now)

    def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        with mapped("list silences"):
            return self.silences.list_silences(now, include_expired)

    def active_silences(self, now: float) -> list[Silence]:
        with mapped("active silences"):
            return self.silences.active_silences(now)

    def expire_silence(self, silence_id: int, now: float) -> bool:
        with mapped("expire silence"):
            return self.silences.expire_silence(silence_id, now)

    # -- what is true now, history, rounds, retention -----------------------------------------

    def summary(self) -> StateSummary:
        with mapped("summary"):
            return self.snapshots.summary()

    def awaiting_first_poll(self) -> list[Awaiting]:
        with mapped("awaiting first poll"):
            return self.snapshots.awaiting_first_poll()

    def status(self, cadence_key: str) -> StoreStatus:
        with mapped("status"):
            return self.snapshots.status(cadence_key)

    def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        with mapped("history"):
            return self.alerts.history(limit, rule)

    def record_round(self, round_: SourceRound) -> None:
        with mapped("record round"):
            self.alerts.record_round(round_)

    def prune_batches(
        self, watched: WatchedTarget, now: float, retention: float, limit: int = BATCH_ROWS
    ) -> Iterator[Pruned]:
        """A whole pass, one batch (one transaction) per step (``Retention.prune_batches``)."""
        batches = self.retention.prune_batches(watched, now, retention, limit)
        return mapped_batches("prune batches", batches)

    def prune(
        self, watched: WatchedTarget, now: float, retention: float, limit: int = BATCH_ROWS
    ) -> Pruned:
        """A whole pass at once (``watcher prune``, tests)."""
        total = Pruned()
        for done in self.prune_batches(watched, now, retention, limit):
            total.add(done)
        return total


def _open_writable(path: Path, upgrade: bool) -> Database:
    """The database at ``path``, created if new; upgraded with ``upgrade``, else refused unless
    its schema is this watcher's."""
    with state_errors(path):
        db = open_database(path)
        version = schema_version(db)
        if upgrade or version == 0:
            migrate(db)
    if not upgrade and version != 0:
        try:
            require_schema(path, version)
        except StateUnusable:
            db.close()
            raise
    return db


class AsyncSqliteStore(AsyncClosing):
    """The SQLite engine of the ``Store`` protocol. Each coroutine runs its call of ``sqlite``
    (for the target states, of its ``targets`` repository) on the store's own thread, one at a
    time in the order called, so that the event loop never waits on the file: a flush of a
    thousand states or a commit that checkpoints the WAL holds that thread for tens of
    milliseconds, not the loop (a scrape of ``/metrics`` or a sweep's timer would wait as
    long). The states held in memory (``HeldStates``) are kept by the loop's thread; only the
    reads and writes of the file run on the store's. What is true now (``summary``, ``status``,
    ``awaiting_first_poll``) is read on a second thread. ``sqlite`` is that store, for whoever
    reads it synchronously beside the daemon (tests, benchmarks)."""

    def __init__(self, sqlite: SqliteStore) -> None:
        self.sqlite = sqlite
        # One thread: SQLite has one writer, and calls run in the order they were made (a
        # step's commit never overtakes the flush that holds its older state).
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        # What is true now (a scrape's, ``watcher status``'s) is read on a second thread with
        # a read-only connection of its own: WAL lets it read beside the writer, so a scrape
        # does not queue behind a sweep's flush.
        self._reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-reads")
        self._reader: Snapshots | None = None  # opened on that thread, at its first read
        self._reader_db: Database | None = None
        self._closed = False

    async def _call(self, operation: str, method: Callable[..., _T], *args: Any) -> _T:
        """``method(*args)`` on the store's thread, its driver errors mapped."""

        def call() -> _T:
            with mapped(operation):
                return method(*args)

        return await asyncio.get_running_loop().run_in_executor(self._thread, call)

    async def _read(self, operation: str, method: Callable[[Snapshots], _T]) -> _T:
        """``method`` of the read-only snapshots on the reading thread, its errors mapped."""

        def read() -> _T:
            with mapped(operation):
                if self._reader is None:
                    self._reader_db = open_readonly(self.sqlite.path)
                    self._reader = Snapshots(self._reader_db)
                return method(self._reader)

        return await asyncio.get_running_loop().run_in_executor(self._reads, read)

    def _close_reader(self) -> None:
        if self._reader_db is not None:
            self._reader_db.close()

    @classmethod
    def open(cls, path: Path | str) -> AsyncSqliteStore:
        """The engine over ``path``, created or upgraded (``watcher run``'s)."""
        return cls(SqliteStore(path))

    # -- life ---------------------------------------------------------------------------------

    async def start(self) -> None:
        pass  # opened by the constructor: a local file

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._thread, self.sqlite.close)
        self._thread.shutdown()
        await asyncio.get_running_loop().run_in_executor(self._reads, self._close_reader)
        self._reads.shutdown()

    # -- leased shards: one process owns the file and every target ------------------------------

    def shards_held(self) -> frozenset[int] | None:
        return None

    def holds(self, source: str, target: str) -> bool:
        return True

    async def maintain_leases(self) -> LeaseRound | None:
        return None

    @property
    def commits(self) -> int:
        return self.sqlite.commits

    # -- target state -------------------------------------------------------------------------

    async def prefetch_states(self, source: str, targets: Sequence[str]) -> None:
        rows = self.sqlite.targets
        found = await self._call("prefetch states", rows.read_states, source, targets)
        self.sqlite.held.prefetched(source, found)

    def stage_state(self, source: str, target: str, state: TargetState, now: float) -> bool:
        return self.sqlite.held.stage(source, target, state, now)

    async def flush_states(self) -> int:
        held = self.sqlite.held
        if not held.staged:
            return 0
        # Loads get them until the write ends; polls go on staging; a failed write stages them
        # again.
        with held.flush() as rows:
            await self._call("flush states", self.sqlite.targets.write_states, rows)
        return len(rows)

    async def load_state(self, source: str, target: str) -> TargetState | None:
        copy = self.sqlite.held.load(source, target)
        if copy is not MISS:
            return copy
        return await self._call("load state", self.sqlite.targets.read_state, source, target)

    async def load_states(self, source: str, targets: Sequence[str]) -> list[TargetState | None]:
        held = self.sqlite.held
        found, missed = held.load_all(source, targets)
        read = (
            await self._call("load states", self.sqlite.targets.read_states, source, missed)
            if missed
            else {}
        )
        return held.filled(found, targets, read)

    async def register_watch(self, source: str, targets: Sequence[str], since: WatchSince) -> int:
        # In chunks: a million targets are one transaction each 10,000, and the store's other
        # calls (a scrape's, a commit's) are served between them.
        rows, new = self.sqlite.targets, 0
        for start in range(0, len(targets), REGISTER_CHUNK):
            chunk = targets[start : start + REGISTER_CHUNK]
            new += await self._call("register watch", rows.register_watch, source, chunk, since)
        return new

    async def commit_step(self, step: StepToCommit) -> list[int]:
        new_ids = await self._call("commit step", self.sqlite.targets.write_step, step)
        self.sqlite.held.written(step.source, step.target)  # this write is newer
        return new_ids

    # -- the delivery outbox ------------------------------------------------------------------

    async def claim_due(
        self, now: float, limit: int = 100, group_limit: int = 0, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        return await self._call(
            "claim due", self.sqlite.claim_due, now, limit, group_limit, skip_urls
        )

    async def next_due(self, skip_urls: Sequence[str] = ()) -> float | None:
        return await self._call("next due", self.sqlite.next_due, skip_urls)

    async def group_sends(self, group_key: str, url_id: str) -> GroupSends:
        return await self._call("group sends", self.sqlite.group_sends, group_key, url_id)

    async def release(self, delivery_ids: Sequence[int], not_before: float | None = None) -> None:
        await self._call("release", self.sqlite.release, delivery_ids, not_before)

    async def requeue_interrupted(self) -> int:
        return await self._call("requeue interrupted", self.sqlite.requeue_interrupted)

    async def mark_sent(
        self, delivery_ids: int | Sequence[int], now: float, group: tuple[str, str] | None = None
    ) -> list[int]:
        return await self._call("mark sent", self.sqlite.mark_sent, delivery_ids, now, group)

    async def mark_retry(
        self, delivery_ids: int | Sequence[int], error: str, next_attempt_at: float
    ) -> list[int]:
        return await self._call(
            "mark retry", self.sqlite.mark_retry, delivery_ids, error, next_attempt_at
        )

    async def mark_dead(self, give_up: GiveUp) -> list[int]:
        return await self._call("mark dead", self.sqlite.mark_dead, give_up)

    async def pending_count(self) -> int:
        return await self._call("pending count", self.sqlite.pending_count)

    async def standing_alerts(
        self, url_ids: Sequence[str], resolved_since: float
    ) -> list[DeliveryRow]:
        return await self._call(
            "standing alerts", self.sqlite.standing_alerts, url_ids, resolved_since
        )

    async def watch_outbox(self, wake: Callable[[], None]) -> None:
        return None  # one process: its own commits wake its sender

    # -- silences -----------------------------------------------------------------------------

    async def add_silence(self, new: NewSilence, now: float) -> Silence:
        return await self._call("add silence", self.sqlite.add_silence, new, now)

    async def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        return await self._call("list silences", self.sqlite.list_silences, now, include_expired)

    async def active_silences(self, now: float) -> list[Silence]:
        return await self._call("active silences", self.sqlite.active_silences, now)

    async def expire_silence(self, silence_id: int, now: float) -> bool:
        return await self._call("expire silence", self.sqlite.expire_silence, silence_id, now)

    # -- what is true now ---------------------------------------------------------------------

    async def summary(self) -> StateSummary:
        return await self._read("summary", Snapshots.summary)

    async def awaiting_first_poll(self) -> list[Awaiting]:
        return await self._read("awaiting first poll", Snapshots.awaiting_first_poll)

    async def status(self, cadence_key: str) -> StoreStatus:
        return await self._read("status", lambda reader: reader.status(cadence_key))

    # -- history, rounds, retention -----------------------------------------------------------

    async def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        return await self._call("history", self.sqlite.history, limit, rule)

    async def record_round(self, round_: SourceRound) -> None:
        await self._call("record round", self.sqlite.record_round, round_)

    async def prune_batches(
        self, watched: WatchedTarget, now: float, retention: float, limit: int = BATCH_ROWS
    ) -> AsyncIterator[Pruned]:
        batches = self.sqlite.retention.prune_batches(watched, now, retention, limit)
        while (done := await self._call("prune batches", next, batches, None)) is not None:
            yield done
