"""Silences, the alert history, the sources' rounds, what is true now and retention on
PostgreSQL: the ``SilenceStore``, ``HistoryStore`` and ``RetentionStore`` roles, held by
``PostgresStore``, each call one connection of the pool over ``watcher.state.pg_rows`` and
``watcher.state.pg_summary``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
from psycopg_pool import AsyncConnectionPool

from watcher.core.events import NewSilence, Silence
from watcher.core.outbox_rows import AlertRecord
from watcher.state import pg_rows, pg_summary
from watcher.state.pg_errors import mapped, pg_state_error
from watcher.state.pg_pool import Connection
from watcher.state.records import SourceRound
from watcher.state.retention import BATCH_ROWS, Pruned, WatchedTarget
from watcher.state.snapshot import Awaiting, StateSummary, StoreStatus


class PgSilences:
    """The ``SilenceStore`` role on PostgreSQL."""

    def __init__(self, pool: AsyncConnectionPool[Connection]) -> None:
        self._pool = pool

    @mapped("add a silence")
    async def add_silence(self, new: NewSilence, now: float) -> Silence:
        async with self._pool.connection() as conn:
            return await pg_rows.add_silence(conn, new, now)

    @mapped("list silences")
    async def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        async with self._pool.connection() as conn:
            return await pg_rows.list_silences(conn, now, include_expired)

    @mapped("read silences")
    async def active_silences(self, now: float) -> list[Silence]:
        async with self._pool.connection() as conn:
            return await pg_rows.active_silences(conn, now)

    @mapped("expire a silence")
    async def expire_silence(self, silence_id: int, now: float) -> bool:
        async with self._pool.connection() as conn:
            return await pg_rows.expire_silence(conn, silence_id, now)


class PgHistory:
    """The ``HistoryStore`` role on PostgreSQL: each instance records its own rounds."""

    def __init__(
        self, pool: AsyncConnectionPool[Connection], *, instance: str, lease_ttl: float
    ) -> None:
        """``lease_ttl``: how long a silent instance still counts as live in ``status``."""
        self._pool = pool
        self.instance = instance
        self.lease_ttl = lease_ttl

    @mapped("read the firing alerts and the outbox")
    async def summary(self) -> StateSummary:
        """What ``/metrics`` and ``/healthz`` show of the shared state."""
        async with self._pool.connection() as conn:
            return await pg_summary.firing(conn), await pg_summary.outbox(conn)

    @mapped("read the status")
    async def status(self, cadence_key: str) -> StoreStatus:
        """``watcher status`` of the shared state: what fires, the outbox, each source's last
        round of each instance, the instances and the shards each holds (not the intervals)."""
        async with self._pool.connection() as conn:
            return StoreStatus(
                await pg_summary.firing(conn),
                await pg_summary.outbox(conn),
                await pg_rows.last_rounds(conn),
                await pg_summary.instances(conn, self.lease_ttl),
                await pg_summary.unheld_shards(conn),
                awaiting=await pg_summary.awaiting(conn),
            )

    @mapped("read the targets awaiting their first poll")
    async def awaiting_first_poll(self) -> list[Awaiting]:
        async with self._pool.connection() as conn:
            return await pg_summary.awaiting(conn)

    @mapped("read the history")
    async def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        async with self._pool.connection() as conn:
            return await pg_rows.history(conn, limit, rule)

    @mapped("record the round")
    async def record_round(self, round_: SourceRound) -> None:
        async with self._pool.connection() as conn:
            await pg_rows.record_round(conn, round_, self.instance)


class PgRetention:
    """The ``RetentionStore`` role on PostgreSQL: one connection for the whole pass, each batch
    a transaction of its own (``pg_rows.prune_batches``)."""

    def __init__(self, pool: AsyncConnectionPool[Connection]) -> None:
        self._pool = pool

    async def prune_batches(
        self, watched: WatchedTarget, now: float, retention: float, limit: int = BATCH_ROWS
    ) -> AsyncIterator[Pruned]:
        try:
            async with self._pool.connection() as conn:
                async for done in pg_rows.prune_batches(conn, watched, now, retention, limit):
                    yield done
        except psycopg.Error as exc:
            raise pg_state_error(exc, "prune the history") from exc
