"""State in SQLite: per-target state documents, the alert history and the delivery outbox.

One connection, used only from the thread that opened it (the engine's own thread, or the
caller's for the synchronous facade); every method is one short transaction. A step's new
state, its alerts and their deliveries are committed together (``commit_step``), so a crash
either loses the whole step (the cursor did not move: the step is redone) or nothing (the
deliveries wait in the outbox).

Apprise URLs hold tokens and passwords: the store only ever sees their ``url_id``.

``SqliteStore`` is the synchronous facade over the file (what the tests, the benchmarks and the
commands outside the event loop call); ``AsyncSqliteStore`` is the SQLite engine of the
asynchronous ``Store`` protocol (``watcher.state.interface``: what the daemon is typed against),
each of its coroutines one call of a ``SqliteStore`` on the engine's thread (the reads of what
is true now on a second thread, with a read-only connection). Each concern is a repository of its
own module: target state (``watcher.state.targets``), the delivery outbox
(``watcher.state.deliveries``), silences (``watcher.state.silence_rows``), the alert history
(``watcher.state.history``), its retention (``watcher.state.retention``), the sources' last
rounds (``watcher.state.source_rounds``) and what is true now (``watcher.state.snapshot``).
The values they read and write are pure code's (``watcher.delivery.outbox``,
``watcher.alerting``). ``with SqliteStore(path) as store:`` closes the file at the end, as
``async with AsyncSqliteStore.open(path) as store:`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

from sqlite_utils import Database

from watcher.core.errors import StateError
from watcher.core.events import NewSilence, Silence, TargetState, WatchSince
from watcher.core.outbox_rows import (
    AlertRecord,
    DeliveryRow,
    GroupSends,
)
from watcher.state.closing import AsyncClosing, Closing
from watcher.state.database import (
    StateUnusable,
    migrate,
    open_database,
    open_readonly,
    require_schema,
    schema_version,
    state_errors,
    transaction,
)
from watcher.state.deliveries import Deliveries
from watcher.state.history import History
from watcher.state.interface import GiveUp, LeaseRound, StepToCommit, store_members
from watcher.state.retention import BATCH_ROWS, Pruned, Retention, WatchedTarget
from watcher.state.silence_rows import Silences
from watcher.state.snapshot import Awaiting, Snapshots, StateSummary, StoreStatus
from watcher.state.source_rounds import SourceRound, record_round
from watcher.state.sqlite_errors import state_error
from watcher.state.staging import MISS, HeldStates
from watcher.state.targets import REGISTER_CHUNK, STAGED_LIMIT, TargetStates

_T = TypeVar("_T")


class SqliteStore(TargetStates, Deliveries, Silences, History, Retention, Snapshots, Closing):
    """The watcher's SQLite state. Synchronous and fast; call it from one thread only."""

    def __init__(self, path: Path | str, *, readonly: bool = False, upgrade: bool = True) -> None:
        """``readonly``: open an existing database for reading only (``open_readonly``).
        ``upgrade=False``: a command writing beside a running daemon (``silence add``) uses
        an existing database as it is, its schema must be this watcher's; only a new one is
        set up. Otherwise (``watcher run``) create and upgrade it."""
        self.path = Path(path)
        if readonly:
            self._db = open_readonly(self.path)
        else:
            with state_errors(self.path):
                self._db = open_database(self.path)
                version = schema_version(self._db)
                if upgrade or version == 0:
                    migrate(self._db)
            if not upgrade and version != 0:
                try:
                    require_schema(self.path, version)
                except StateUnusable:
                    self._db.close()
                    raise
        self.commits = 0
        self._states = HeldStates(STAGED_LIMIT)

    @property
    def db(self) -> Database:
        return self._db

    def close(self) -> None:
        # A staged state that cannot be written now is a poll not done: the next run redoes it.
        with contextlib.suppress(StateError):
            self.flush_states()
        self._db.close()

    def transaction(self) -> AbstractContextManager[None]:
        return transaction(self._db)

    def record_round(self, round_: SourceRound) -> None:
        record_round(self._db, round_)


def _mapped(operation: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` raising ``StateError`` (``state_error``: transient or permanent) where the
    driver raised ``sqlite3.Error``; the driver's error is its ``__cause__``."""
    if inspect.isgeneratorfunction(method):  # prune_batches: errors come while iterating

        @functools.wraps(method)
        def batches(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(*args, **kwargs)
            except sqlite3.Error as exc:
                raise state_error(exc, operation) from exc

        return batches

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            raise state_error(exc, operation) from exc

    return call


# Every call of the protocol maps the driver's errors at the engine's boundary: callers catch
# the store's errors, never sqlite3's (what a second engine needs: it raises the same ones).
# (The async engine's own members, start and the leases, have no synchronous counterpart.)
_ENGINE_ONLY = frozenset({"start", "shards_held", "holds", "maintain_leases", "watch_outbox"})
for _name, _member in store_members().items():
    if not _name.startswith("_") and _name not in _ENGINE_ONLY and inspect.isfunction(_member):
        setattr(SqliteStore, _name, _mapped(_name.replace("_", " "), getattr(SqliteStore, _name)))
# What the engine calls on its thread, named as the protocol's calls they serve.
for _name, _operation in {
    "read_states": "prefetch states",
    "read_state": "load state",
    "write_states": "flush states",
    "write_step": "commit step",
}.items():
    setattr(SqliteStore, _name, _mapped(_operation, getattr(SqliteStore, _name)))


class AsyncSqliteStore(AsyncClosing):
    """The SQLite engine of the ``Store`` protocol: each coroutine runs its ``SqliteStore``
    call on the store's own thread, one at a time in the order called, so that the event loop
    never waits on the file: a flush of a thousand states or a commit that checkpoints the WAL
    holds the loop for tens of milliseconds, and a scrape of ``/metrics`` or a sweep's timer
    would wait as long. The states held in memory (``HeldStates``) are kept by the loop's
    thread; only the reads and writes of the file run on the store's. ``sqlite`` is that
    store, for whoever reads it synchronously beside the daemon (tests, benchmarks)."""

    def __init__(self, sqlite: SqliteStore) -> None:
        self.sqlite = sqlite
        # One thread: SQLite has one writer, and calls run in the order they were made (a
        # step's commit never overtakes the flush that holds its older state).
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        # What is true now (a scrape's, ``watcher status``'s) is read on a second thread with
        # a read-only connection of its own: WAL lets it read beside the writer, so a scrape
        # does not queue behind a sweep's flush.
        self._reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-reads")
        self._reader: SqliteStore | None = None  # opened on that thread, at its first read
        self._closed = False

    async def _call(self, method: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, method, *args)

    async def _read(self, method: Callable[[SqliteStore], _T]) -> _T:
        def read() -> _T:
            if self._reader is None:
                self._reader = SqliteStore(self.sqlite.path, readonly=True)
            return method(self._reader)

        return await asyncio.get_running_loop().run_in_executor(self._reads, read)

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()

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
        await self._call(self.sqlite.close)
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
        found = await self._call(self.sqlite.read_states, source, targets)
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
            await self._call(self.sqlite.write_states, rows)
        return len(rows)

    async def load_state(self, source: str, target: str) -> TargetState | None:
        copy = self.sqlite.held.load(source, target)
        if copy is not MISS:
            return copy
        return await self._call(self.sqlite.read_state, source, target)

    async def register_watch(self, source: str, targets: Sequence[str], since: WatchSince) -> int:
        # In chunks: a million targets are one transaction each 10,000, and the store's other
        # calls (a scrape's, a commit's) are served between them.
        new = 0
        for start in range(0, len(targets), REGISTER_CHUNK):
            chunk = targets[start : start + REGISTER_CHUNK]
            new += await self._call(self.sqlite.register_watch, source, chunk, since)
        return new

    async def commit_step(self, step: StepToCommit) -> list[int]:
        new_ids = await self._call(self.sqlite.write_step, step)
        self.sqlite.held.written(step.source, step.target)  # this write is newer
        return new_ids

    # -- the delivery outbox ------------------------------------------------------------------

    async def claim_due(
        self, now: float, limit: int = 100, group_limit: int = 0, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        return await self._call(self.sqlite.claim_due, now, limit, group_limit, skip_urls)

    async def group_sends(self, group_key: str, url_id: str) -> GroupSends:
        return await self._call(self.sqlite.group_sends, group_key, url_id)

    async def release(self, delivery_ids: Sequence[int], not_before: float | None = None) -> None:
        await self._call(self.sqlite.release, delivery_ids, not_before)

    async def requeue_interrupted(self) -> int:
        return await self._call(self.sqlite.requeue_interrupted)

    async def mark_sent(
        self, delivery_ids: int | Sequence[int], now: float, group: tuple[str, str] | None = None
    ) -> list[int]:
        return await self._call(self.sqlite.mark_sent, delivery_ids, now, group)

    async def mark_retry(
        self, delivery_ids: int | Sequence[int], error: str, next_attempt_at: float
    ) -> list[int]:
        return await self._call(self.sqlite.mark_retry, delivery_ids, error, next_attempt_at)

    async def mark_dead(self, give_up: GiveUp) -> list[int]:
        return await self._call(self.sqlite.mark_dead, give_up)

    async def pending_count(self) -> int:
        return await self._call(self.sqlite.pending_count)

    async def standing_alerts(
        self, url_ids: Sequence[str], resolved_since: float
    ) -> list[DeliveryRow]:
        return await self._call(self.sqlite.standing_alerts, url_ids, resolved_since)

    async def watch_outbox(self, wake: Callable[[], None]) -> None:
        return None  # one process: its own commits wake its sender

    # -- silences -----------------------------------------------------------------------------

    async def add_silence(self, new: NewSilence, now: float) -> Silence:
        return await self._call(self.sqlite.add_silence, new, now)

    async def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        return await self._call(self.sqlite.list_silences, now, include_expired)

    async def active_silences(self, now: float) -> list[Silence]:
        return await self._call(self.sqlite.active_silences, now)

    async def expire_silence(self, silence_id: int, now: float) -> bool:
        return await self._call(self.sqlite.expire_silence, silence_id, now)

    # -- what is true now ---------------------------------------------------------------------

    async def summary(self) -> StateSummary:
        return await self._read(SqliteStore.summary)

    async def awaiting_first_poll(self) -> list[Awaiting]:
        return await self._read(SqliteStore.awaiting_first_poll)

    async def status(self, cadence_key: str) -> StoreStatus:
        return await self._read(lambda reader: reader.status(cadence_key))

    # -- history, rounds, retention -----------------------------------------------------------

    async def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        return await self._call(self.sqlite.history, limit, rule)

    async def record_round(self, round_: SourceRound) -> None:
        await self._call(self.sqlite.record_round, round_)

    async def prune_batches(
        self, watched: WatchedTarget, now: float, retention: float, limit: int = BATCH_ROWS
    ) -> AsyncIterator[Pruned]:
        batches = self.sqlite.prune_batches(watched, now, retention, limit)
        while (done := await self._call(next, batches, None)) is not None:
            yield done
