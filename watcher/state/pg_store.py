"""The PostgreSQL engine of the ``Store`` protocol: several instances sharing one database.

Each call borrows a connection of an async pool (``watcher.state.pg_pool``: a few per instance,
autocommit, with statement and idle-in-transaction timeouts) for one short transaction: none is
ever held across an RPC call or a send. Driver errors are mapped at this boundary (each call
``@mapped``, ``watcher.state.pg_errors``): callers see the store's transient and permanent
errors, and ``LeaseLost``.

What differs from the SQLite engine, one process owning everything:

- Targets are leased by shard (``watcher.state.shards``, ``watcher.state.pg_leases``; the
  shards held and their epochs in ``watcher.state.leased_shards``):
  ``maintain_leases`` (every few seconds, from the daemon's lease loop) renews what this
  instance holds, takes free or lapsed shards up to its balanced share of the live instances,
  and hands back its surplus. ``shards_held`` is what a sweep polls; it is empty once the
  leases may have lapsed (no renewal for ``lease_ttl``: a paused or cut-off instance polls
  nothing when it resumes).
- Every write of a target's rows is fenced: ``commit_step`` and ``flush_states`` check, in their
  transaction, that this instance still holds the shard at the epoch it took it with
  (``FOR SHARE`` on the lease row); a stale owner's write rolls back (``LeaseLost``) and the
  shard is dropped. ``flush_states`` writes the staged states of the shards still held and drops
  the others' (a new owner polls them again). The staged and prefetched states are held as on
  SQLite (``watcher.state.staging``), flushed in larger batches.
- Deliveries are claimed under this process's token (``watcher.state.pg_deliveries``), never
  requeued at start-up (``requeue_interrupted`` does nothing): a claim whose sender died expires
  and is taken by any instance. The claims this process holds are extended with each lease
  round, so a long queue to a slow URL keeps its claim while its sender lives; a late ack of a
  claim taken over changes nothing (the ids come back as not changed).
- ``close`` flushes, hands every shard back at once (a graceful stop: another instance takes
  them within its next lease round) and closes the pool.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType

import psycopg
import structlog

from watcher.config.settings import LEASE_TTL_SECONDS
from watcher.core.errors import LeaseLost, StateError, StateUnusable
from watcher.core.events import AlertMessage, Silence, TargetState
from watcher.core.fastjson import decode_json
from watcher.core.outbox_rows import AlertRecord, DeliveryRow, Destination, GroupSends
from watcher.core.retry import RetryPauses
from watcher.state import pg_deliveries, pg_leases, pg_rows, pg_summary
from watcher.state.alerts import to_json
from watcher.state.interface import LeaseRound
from watcher.state.leased_shards import LeasedShards
from watcher.state.pg_errors import mapped, pg_state_error
from watcher.state.pg_pool import DEFAULT_LIMITS, Connection, PoolLimits, open_pool
from watcher.state.postgresql_schema import migrate, migrations, schema_version
from watcher.state.retention import BATCH_ROWS, Pruned, WatchedTarget
from watcher.state.shards import balanced_share, plan, rank_of, shard_of
from watcher.state.snapshot import StateSummary, StoreStatus
from watcher.state.source_rounds import SourceRound
from watcher.state.staging import MISS, HeldStates, StagedRow
from watcher.state.targets import STAGED_LIMIT

log = structlog.get_logger(__name__)

# Instances whose heartbeat is older than this many lease times are deleted (status stays short).
DEAD_INSTANCE_TTLS = 20
# Quiet states staged before a flush writes them: a flush costs the same few statements however
# many rows it carries (SQLite's engine flushes at ``STAGED_LIMIT``).
PG_STAGED_LIMIT = 4 * STAGED_LIMIT


class PostgresStore:
    """The ``Store`` on PostgreSQL (see the module's docstring). Built without I/O; ``start``
    opens the pool, migrates (once, under an advisory lock) and registers this instance."""

    def __init__(
        self,
        url: str,
        *,
        instance: str,
        lease_ttl: float = LEASE_TTL_SECONDS,
        limits: PoolLimits = DEFAULT_LIMITS,
        monotonic: Callable[[], float] = time.monotonic,
        command: bool = False,
    ) -> None:
        """``command``: a command's store (``alerts``, ``silence``, ``status``), not an
        instance: it neither migrates nor registers, holds no shard, and refuses a database
        whose schema is not this watcher's."""
        if lease_ttl <= 0:
            raise ValueError(f"lease_ttl must be positive, got {lease_ttl}")
        self.instance = instance
        self._url = url
        self.lease_ttl = lease_ttl
        self.claim_ttl = lease_ttl
        # One token per process: a restarted instance's old claims expire like a dead one's.
        self.token = f"{instance}/{uuid.uuid4().hex[:12]}"
        self._monotonic = monotonic
        self._pool = open_pool(url, limits)
        self.commits = 0
        self._states = HeldStates(PG_STAGED_LIMIT)  # staged and prefetched (watcher.state.staging)
        self._flush_idle = asyncio.Event()  # set: no flush under way
        self._flush_idle.set()
        self._shards = LeasedShards(instance)  # held, their epochs (watcher.state.leased_shards)
        self._claimed: set[int] = set()  # deliveries claimed under self.token, not yet marked
        self._started = False
        self._command = command

    # -- life ---------------------------------------------------------------------------------

    @mapped("open the state database")
    async def start(self) -> None:
        if self._started:
            return
        await self._pool.open(wait=True, timeout=self._pool.timeout)
        self._started = True
        async with self._pool.connection() as conn:
            if self._command:
                version, latest = await schema_version(conn), len(migrations())
                if version != latest:
                    raise StateUnusable(
                        f"the state database's schema is version {version}, this watcher's "
                        f"is {latest}: `watcher run` creates and upgrades it"
                    )
                return
            await migrate(conn)
            await pg_leases.register_instance(
                conn, self.instance, host=socket.gethostname(), pid=os.getpid()
            )

    async def __aenter__(self) -> PostgresStore:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Flushes what it can, hands every shard back (takeable at once) and closes."""
        if self._started and not self._command:
            try:
                await self.flush_states()
                async with self._pool.connection() as conn:
                    released = await pg_leases.retire(conn, self.instance)
                    if self._claimed:
                        await pg_deliveries.release(conn, sorted(self._claimed), self.token)
                log.info("shards handed back", instance=self.instance, shards=len(released))
            except (StateError, psycopg.Error) as exc:  # the leases lapse by themselves
                log.warning("could not hand the shards back", error=str(exc))
        self._shards.clear()
        await self._pool.close()

    # -- leases -------------------------------------------------------------------------------

    def shards_held(self) -> frozenset[int] | None:
        """The shards this instance may poll now; empty once its leases may have lapsed."""
        return self._shards.view(self._monotonic())

    def holds(self, source: str, target: str) -> bool:
        return self._shards.holds(shard_of(source, target), self._monotonic())

    @mapped("renew the leases")
    async def maintain_leases(self) -> LeaseRound:
        """One round of the lease loop: heartbeat, renew, then take up to or hand back down to
        this instance's balanced share of the live instances; the claims held are extended."""
        started = self._monotonic()
        taken: dict[int, int] = {}
        released: set[int] = set()
        async with self._pool.connection() as conn:
            if not await pg_leases.renew_instance(conn, self.instance):
                await pg_leases.register_instance(
                    conn, self.instance, host=socket.gethostname(), pid=os.getpid()
                )
            held = self._shards.shards
            kept = await pg_leases.renew(conn, self.instance, held, self.lease_ttl)
            lost = self._shards.renewed(kept, started, self.lease_ttl)
            live = [i.instance_id for i in await pg_leases.live_instances(conn, self.lease_ttl)]
            count = len(set(live) | {self.instance})
            share = balanced_share(count, rank_of(self.instance, live))
            if len(self._shards) > share:
                # What this instance learnt of those targets is written before they go.
                await self._flush(conn)
                surplus = plan(self._shards.shards, [], share).release
                released = await pg_leases.release(conn, self.instance, surplus)
                for shard in released:
                    self._shards.drop(shard)
            elif len(self._shards) < share:
                takeable = await pg_leases.takeable_shards(conn)
                wanted = plan(self._shards.shards, takeable, share).take
                taken = await pg_leases.acquire(
                    conn, self.instance, len(wanted), self.lease_ttl, among=wanted
                )
                self._shards.taken(taken)
            if self._claimed:
                lapsed = await pg_deliveries.extend_claim(
                    conn, sorted(self._claimed), self.token, self.claim_ttl
                )
                self._claimed.difference_update(lapsed)
            await pg_leases.prune_instances(conn, self.lease_ttl * DEAD_INSTANCE_TTLS)
        if lost:
            log.warning("shards lost", instance=self.instance, shards=len(lost))
        return LeaseRound(
            held=len(self._shards),
            taken=len(taken),
            released=len(released),
            lost=len(lost),
            live_instances=count,
            seconds=self._monotonic() - started,
        )

    # -- target state -------------------------------------------------------------------------

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
            return await self._flush(conn)

    async def _flush(self, conn: Connection) -> int:
        # Taken out first: polls go on staging meanwhile (they are flushed next time) and load
        # what is being written (``HeldStates``); a failed flush stages them again.
        staged = self._states.take()
        self._flush_idle.clear()
        try:
            by_shard: dict[int, list[StagedRow]] = {}
            for row in staged:
                by_shard.setdefault(shard_of(row[0], row[1]), []).append(row)
            claimed = self._shards.epochs(by_shard)
            async with conn.transaction():
                fenced = await pg_leases.fence_in(conn, self.instance, claimed)
                rows = [row for shard in fenced for row in by_shard[shard]]
                if rows:
                    await pg_rows.upsert_states(conn, rows)  # a savepoint in this transaction
        except BaseException:
            self._states.failed()
            self._flush_idle.set()
            raise
        self._states.flushed()
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

    @mapped("commit a step")
    async def commit_step(
        self,
        source: str,
        target: str,
        state: TargetState,
        alerts: Sequence[AlertMessage],
        destinations: Callable[[AlertMessage], Sequence[Destination]],
        now: float,
    ) -> list[int]:
        if self._states.flushing(source, target):
            await self._flush_idle.wait()  # else the flush could write its older state last
        shard = shard_of(source, target)
        epoch = self._shards.epoch(shard, self._monotonic())
        try:
            async with (
                self._pool.connection() as conn,
                pg_leases.fenced(conn, shard, self.instance, epoch),
            ):
                await pg_rows.upsert_state_in(conn, source, target, to_json(state), now)
                new_ids = await pg_deliveries.insert_alerts(conn, alerts, destinations, now)
        except LeaseLost:
            self._shards.drop(shard)
            raise
        self._states.written(source, target)
        self.commits += 1
        return new_ids

    # -- the delivery outbox ------------------------------------------------------------------

    @mapped("claim deliveries")
    async def claim_due(
        self, now: float, limit: int = 100, group_limit: int = 0, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        async with self._pool.connection() as conn:
            rows = await pg_deliveries.claim_due(
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
    async def mark_dead(
        self,
        delivery_ids: int | Sequence[int],
        error: str,
        now: float,
        reports: Mapping[int, AlertMessage] | None = None,
        destinations: Callable[[AlertMessage], Sequence[Destination]] | None = None,
    ) -> list[int]:
        async with self._pool.connection() as conn:
            unchanged = await pg_deliveries.mark_dead(
                conn, delivery_ids, self.token, error, now, reports, destinations
            )
        self._unclaim(delivery_ids)
        return unchanged

    async def watch_outbox(self, wake: Callable[[], None]) -> None:
        """Listens on a connection of its own (``pg_deliveries.listen_outbox``): a commit that
        queued deliveries, in any instance, wakes this one's sender at once. A lost connection
        is opened again after a pause; meanwhile the sender's own polling takes over."""
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

    def _unclaim(self, delivery_ids: int | Sequence[int]) -> None:
        if isinstance(delivery_ids, int):
            self._claimed.discard(delivery_ids)
        else:
            self._claimed.difference_update(delivery_ids)

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

    # -- silences -----------------------------------------------------------------------------

    @mapped("add a silence")
    async def add_silence(
        self,
        rule: str,
        subject: str | None,
        starts_at: float,
        ends_at: float,
        comment: str,
        created_by: str | None,
        now: float,
    ) -> Silence:
        async with self._pool.connection() as conn:
            return await pg_rows.add_silence(
                conn, rule, subject, starts_at, ends_at, comment, created_by, now
            )

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
            )

    # -- history, rounds, retention -----------------------------------------------------------

    @mapped("read the history")
    async def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        async with self._pool.connection() as conn:
            return await pg_rows.history(conn, limit, rule)

    @mapped("record the round")
    async def record_round(self, round_: SourceRound) -> None:
        async with self._pool.connection() as conn:
            await pg_rows.record_round(conn, round_, self.instance)

    async def prune_batches(
        self, watched: WatchedTarget, now: float, retention: float, limit: int = BATCH_ROWS
    ) -> AsyncIterator[Pruned]:
        try:
            async with self._pool.connection() as conn:
                async for done in pg_rows.prune_batches(conn, watched, now, retention, limit):
                    yield done
        except psycopg.Error as exc:
            raise pg_state_error(exc, "prune the history") from exc
