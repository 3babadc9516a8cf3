"""The delivery outbox of the PostgreSQL engine (``PgOutbox``, held by ``PostgresStore``): the
``OutboxStore`` calls over ``watcher.state.pg_claims`` and ``watcher.state.pg_deliveries``.

Deliveries are claimed under this process's token, never requeued at start-up
(``requeue_interrupted`` does nothing): a claim whose sender died expires and is taken by any
instance. The claims this process holds (``_claimed``) are extended with each lease round
(``watcher.state.pg_lease_rounds``), so a long queue to a slow URL keeps its claim while its
sender lives; a late ack of a claim taken over changes nothing (the ids come back as not
changed)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import psycopg
import structlog
from psycopg_pool import AsyncConnectionPool

from watcher.core.errors import RetryPauses
from watcher.core.outbox_rows import DeliveryRow, GroupSends
from watcher.state import pg_claims, pg_deliveries, pg_rows
from watcher.state.interface import GiveUp
from watcher.state.pg_errors import mapped
from watcher.state.pg_pool import Connection

log = structlog.get_logger(__name__)


class PgOutbox:
    """The ``OutboxStore`` role on PostgreSQL (see the module)."""

    def __init__(
        self, pool: AsyncConnectionPool[Connection], url: str, *, token: str, claim_ttl: float
    ) -> None:
        """``token``: this process's claims' (one per process: a restart's old claims expire);
        ``url``: the database's, for the connection ``watch_outbox`` listens on."""
        self._pool = pool
        self._url = url
        self.token = token
        self.claim_ttl = claim_ttl
        self._claimed: set[int] = set()  # claimed under the token, not yet marked

    @mapped("claim deliveries")
    async def claim_due(
        self, now: float, limit: int = 100, group_limit: int = 0, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        async with self._pool.connection() as conn:
            rows = await pg_claims.claim_due(
                conn,
                token=self.token,
                claim_ttl=self.claim_ttl,
                now=now,
                limit=limit,
                group_limit=group_limit,
                busy_urls=skip_urls,
            )
        self._claimed.update(row.id for row in rows)
        return rows

    @mapped("read the next due delivery")
    async def next_due(self, skip_urls: Sequence[str] = ()) -> float | None:
        async with self._pool.connection() as conn:
            return await pg_deliveries.next_due(conn, self.token, skip_urls)

    @mapped("read a digest group")
    async def group_sends(self, group_key: str, url_id: str) -> GroupSends:
        async with self._pool.connection() as conn:
            return await pg_deliveries.group_sends(conn, group_key, url_id)

    @mapped("release deliveries")
    async def release(self, delivery_ids: Sequence[int], not_before: float | None = None) -> None:
        async with self._pool.connection() as conn:
            await pg_deliveries.release(conn, delivery_ids, self.token, not_before)
        self._claimed.difference_update(delivery_ids)

    async def requeue_interrupted(self) -> int:
        return 0  # shared outbox: an interrupted send's claim expires and is taken again

    @mapped("mark deliveries sent")
    async def mark_sent(
        self, delivery_ids: int | Sequence[int], now: float, group: tuple[str, str] | None = None
    ) -> list[int]:
        async with self._pool.connection() as conn:
            unchanged = await pg_deliveries.mark_sent(conn, delivery_ids, self.token, now, group)
        self._unclaim(delivery_ids)
        return unchanged

    @mapped("reschedule deliveries")
    async def mark_retry(
        self, delivery_ids: int | Sequence[int], error: str, next_attempt_at: float
    ) -> list[int]:
        async with self._pool.connection() as conn:
            unchanged = await pg_deliveries.mark_retry(
                conn, delivery_ids, self.token, error, next_attempt_at
            )
        self._unclaim(delivery_ids)
        return unchanged

    @mapped("give deliveries up")
    async def mark_dead(self, give_up: GiveUp) -> list[int]:
        async with self._pool.connection() as conn:
            unchanged = await pg_deliveries.mark_dead(conn, give_up, self.token)
        self._unclaim(give_up.delivery_ids)
        return unchanged

    def _unclaim(self, delivery_ids: int | Sequence[int]) -> None:
        if isinstance(delivery_ids, int):
            self._claimed.discard(delivery_ids)
        else:
            self._claimed.difference_update(delivery_ids)

    async def extend_claims(self, conn: Connection) -> None:
        """The claims this process holds run ``claim_ttl`` from now (each lease round); those
        taken over meanwhile are forgotten."""
        if self._claimed:
            lapsed = await pg_claims.extend_claim(
                conn, sorted(self._claimed), self.token, self.claim_ttl
            )
            self._claimed.difference_update(lapsed)

    async def hand_claims_back(self, conn: Connection) -> None:
        """Every claim held back to pending (a graceful stop: another instance takes them)."""
        if self._claimed:
            await pg_deliveries.release(conn, sorted(self._claimed), self.token)

    async def watch_outbox(self, wake: Callable[[], None]) -> None:
        """Listens on a connection of its own (``pg_deliveries.listen_outbox``): a commit that
        queued deliveries, in any instance, wakes this one's sender at once. A lost connection
        is opened again after a pause; meanwhile the sender finds new rows at the end of its
        idle wait."""
        pauses = RetryPauses(1.0, 30.0)
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, connect_timeout=5
                ) as conn:
                    pauses.reset()
                    async for notified in pg_deliveries.listen_outbox(conn, poll_timeout=30.0):
                        if notified:
                            wake()
            except psycopg.Error as exc:
                log.info("outbox notifications interrupted; listening again", error=str(exc))
            await pauses.sleep()

    @mapped("read the standing alerts")
    async def standing_alerts(
        self, url_ids: Sequence[str], resolved_since: float
    ) -> list[DeliveryRow]:
        async with self._pool.connection() as conn:
            return await pg_deliveries.standing_alerts(conn, url_ids, resolved_since)

    @mapped("count pending deliveries")
    async def pending_count(self) -> int:
        async with self._pool.connection() as conn:
            return await pg_rows.pending_count(conn)
