"""The target states of the PostgreSQL engine (``PgTargets``, held by ``PostgresStore``):
loaded, prefetched, staged and flushed as on SQLite (``watcher.state.targets.HeldStates`` holds
the copies in memory), and every write fenced by the shard's lease
(``watcher.state.pg_leases.fenced``).

``commit_step`` writes a step's state with its alerts in one transaction that first checks that
this instance still holds the shard at the epoch it took it with (``FOR SHARE`` on the lease
row): a stale owner's write rolls back (``LeaseLost``) and the shard is dropped.
``flush_states`` writes the staged states of the shards still held, in one fenced transaction,
and drops the others' (their new owner polls them again)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import structlog
from psycopg_pool import AsyncConnectionPool

from watcher.core.errors import LeaseLost
from watcher.core.events import WATCH_SINCE_KEY, TargetState, WatchSince
from watcher.core.fastjson import decode_json
from watcher.state import pg_deliveries, pg_leases, pg_rows
from watcher.state.alerts import to_json
from watcher.state.interface import StepToCommit
from watcher.state.leased_shards import LeasedShards
from watcher.state.pg_errors import mapped
from watcher.state.pg_pool import Connection
from watcher.state.shards import shard_of
from watcher.state.targets import MISS, REGISTER_CHUNK, STAGED_LIMIT, HeldStates, StagedRow

log = structlog.get_logger(__name__)

# Quiet states staged before a flush writes them: a flush costs the same few statements however
# many rows it carries (SQLite's engine flushes at ``STAGED_LIMIT``).
PG_STAGED_LIMIT = 4 * STAGED_LIMIT


class PgTargets:
    """The ``TargetStateStore`` role on PostgreSQL (see the module): the states this instance
    holds in memory, written under the leases of ``shards``."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Connection],
        shards: LeasedShards,
        monotonic: Callable[[], float],
    ) -> None:
        self._pool = pool
        self._shards = shards  # held, their epochs (watcher.state.leased_shards)
        self._monotonic = monotonic
        self._states = HeldStates(PG_STAGED_LIMIT)  # staged and prefetched
        self._flush_idle = asyncio.Event()  # set: no flush under way
        self._flush_idle.set()
        # Steps and flushes committed: a caller sees whether its work wrote anything.
        self.commits = 0

    @mapped("read target states")
    async def prefetch_states(self, source: str, targets: Sequence[str]) -> None:
        async with self._pool.connection() as conn:
            self._states.prefetched(source, await pg_rows.load_states(conn, source, targets))

    def stage_state(self, source: str, target: str, state: TargetState, now: float) -> bool:
        return self._states.stage(source, target, state, now)

    @mapped("flush states")
    async def flush_states(self) -> int:
        """Writes the staged states of the shards still held, in one fenced transaction; the
        others' are dropped (their new owner polls them again)."""
        if not self._states.staged:
            return 0
        async with self._pool.connection() as conn:
            return await self.flush(conn)

    async def flush(self, conn: Connection) -> int:
        """``flush_states`` on ``conn`` (a lease round's, before it hands shards back)."""
        # Taken out first: polls go on staging meanwhile (they are flushed next time) and load
        # what is being written (``HeldStates``); a failed flush stages them again.
        self._flush_idle.clear()
        try:
            with self._states.flush() as staged:
                by_shard: dict[int, list[StagedRow]] = {}
                for row in staged:
                    by_shard.setdefault(shard_of(row[0], row[1]), []).append(row)
                claimed = self._shards.epochs(by_shard)
                async with conn.transaction():
                    fenced = await pg_leases.fence_in(conn, self._shards.owner, claimed)
                    rows = [row for shard in fenced for row in by_shard[shard]]
                    if rows:
                        await pg_rows.upsert_states(conn, rows)  # a savepoint in it
        finally:
            self._flush_idle.set()
        dropped = set(by_shard) - fenced
        for shard in dropped:
            self._shards.drop(shard)
        if dropped:
            log.info("staged states of lost shards dropped", shards=len(dropped))
        self.commits += 1
        return len(rows)

    @mapped("read a target state")
    async def load_state(self, source: str, target: str) -> TargetState | None:
        held = self._states.load(source, target)
        if held is not MISS:
            return held
        async with self._pool.connection() as conn:
            text = await pg_rows.load_state_text(conn, source, target)
        state: TargetState | None = None if text is None else decode_json(text)
        return state

    @mapped("read target states")
    async def load_states(self, source: str, targets: Sequence[str]) -> list[TargetState | None]:
        found, missed = self._states.load_all(source, targets)
        read: dict[str, str | None] = {}
        if missed:
            async with self._pool.connection() as conn:
                read = await pg_rows.load_states(conn, source, missed)
        return self._states.filled(found, targets, read)

    @mapped("record when watches began")
    async def register_watch(self, source: str, targets: Sequence[str], since: WatchSince) -> int:
        # Not fenced: it only adds rows nobody has written, and the watch began for every
        # instance at once (the first one's moment is kept).
        state = to_json({"v": 1, WATCH_SINCE_KEY: since.to_json()})
        new = 0
        async with self._pool.connection() as conn:
            for start in range(0, len(targets), REGISTER_CHUNK):
                chunk = targets[start : start + REGISTER_CHUNK]
                async with conn.transaction():
                    new += await pg_rows.register_watch(conn, source, chunk, state, since.at)
        return new

    @mapped("commit a step")
    async def commit_step(self, step: StepToCommit) -> list[int]:
        source, target = step.source, step.target
        if self._states.flushing(source, target):
            await self._flush_idle.wait()  # else the flush could write its older state last
        shard = shard_of(source, target)
        epoch = self._shards.epoch(shard, self._monotonic())
        try:
            async with (
                self._pool.connection() as conn,
                pg_leases.fenced(conn, shard, self._shards.owner, epoch),
            ):
                await pg_rows.upsert_state_in(conn, source, target, to_json(step.state), step.now)
                new_ids = await pg_deliveries.insert_alerts(
                    conn, step.alerts, step.destinations, step.now
                )
        except LeaseLost:
            self._shards.drop(shard)
            raise
        self._states.written(source, target)
        self.commits += 1
        return new_ids
