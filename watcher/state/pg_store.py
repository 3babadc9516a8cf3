"""The PostgreSQL engine of the ``Store`` protocol: several instances sharing one database.

``PostgresStore`` holds its parts, one per role of the protocol (``watcher.state.interface``),
each over the one connection pool it is given: the leased shards
(``watcher.state.pg_lease_rounds``), the target states (``watcher.state.pg_targets``), the outbox
(``watcher.state.pg_outbox``), silences, the history and retention (``watcher.state.pg_records``).
Each call of the protocol is one call of a part. The engine is built without I/O; its life:
``start`` opens the pool, migrates (once, under an advisory lock) and registers this instance;
``close`` flushes, hands every shard back at once (a graceful stop: another instance takes them
within its next lease round) and closes the pool.

Each call borrows a connection of an async pool (``watcher.state.pg_pool``: a few per instance,
autocommit, with statement and idle-in-transaction timeouts) for one short transaction: none is
ever held across an RPC call or a send. Driver errors are mapped at the parts' boundary (each
call ``@mapped``, ``watcher.state.pg_errors``): callers see the store's transient and permanent
errors, and ``LeaseLost``.

What differs from the SQLite engine, one process owning everything:

- Targets are leased by shard (``watcher.state.shards``, ``watcher.state.pg_leases``; the
  shards held and their epochs in ``watcher.state.leased_shards``), and every write of a
  target's rows is fenced by its shard's lease (``pg_targets``). The staged and prefetched
  states are held as on SQLite (``watcher.state.targets.HeldStates``), flushed in larger batches.
- Deliveries are claimed under this process's token, never requeued at start-up; the claims
  held are extended with each lease round (``pg_outbox``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence

import psycopg
import structlog

from watcher.config.settings import LEASE_TTL_SECONDS
from watcher.core.errors import StateError, StateUnusable
from watcher.core.events import NewSilence, Silence, TargetState, WatchSince
from watcher.core.outbox_rows import AlertRecord, DeliveryRow, GroupSends
from watcher.state import pg_leases
from watcher.state.closing import AsyncClosing
from watcher.state.interface import GiveUp, LeaseRound, StepToCommit
from watcher.state.leased_shards import LeasedShards
from watcher.state.pg_errors import mapped
from watcher.state.pg_lease_rounds import PgLeaseRounds
from watcher.state.pg_outbox import PgOutbox
from watcher.state.pg_pool import DEFAULT_LIMITS, PoolLimits, open_pool
from watcher.state.pg_records import PgHistory, PgRetention, PgSilences
from watcher.state.pg_targets import PgTargets
from watcher.state.postgresql_schema import migrate, migrations, schema_version
from watcher.state.records import SourceRound
from watcher.state.retention import BATCH_ROWS, Pruned, WatchedTarget
from watcher.state.snapshot import Awaiting, StateSummary, StoreStatus

log = structlog.get_logger(__name__)


class PostgresStore(AsyncClosing):
    """The ``Store`` on PostgreSQL (see the module's docstring)."""

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
        self._pool = open_pool(url, limits)
        self._shards = LeasedShards(instance)  # shared by the target states and the leases
        self.targets = PgTargets(self._pool, self._shards, monotonic)
        # One token per process: a restarted instance's old claims expire like a dead one's.
        token = f"{instance}/{uuid.uuid4().hex[:12]}"
        self.outbox = PgOutbox(self._pool, url, token=token, claim_ttl=lease_ttl)
        self.leases = PgLeaseRounds(
            self._pool,
            self._shards,
            lease_ttl=lease_ttl,
            monotonic=monotonic,
            targets=self.targets,
            outbox=self.outbox,
        )
        self.silences = PgSilences(self._pool)
        self.alerts = PgHistory(self._pool, instance=instance, lease_ttl=lease_ttl)
        self.retention = PgRetention(self._pool)
        self._started = False
        self._command = command

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
            await self.leases.register(conn)

    async def close(self) -> None:
        """Flushes what it can, hands every shard back (takeable at once) and closes."""
        if self._started and not self._command:
            try:
                await self.flush_states()
                async with self._pool.connection() as conn:
                    released = await pg_leases.retire(conn, self.instance)
                    await self.outbox.hand_claims_back(conn)
                log.info("shards handed back", instance=self.instance, shards=len(released))
            except (StateError, psycopg.Error) as exc:  # the leases lapse by themselves
                log.warning("could not hand the shards back", error=str(exc))
        self._shards.clear()
        await self._pool.close()

    # -- leased shards ------------------------------------------------------------------------

    def shards_held(self) -> frozenset[int] | None:
        return self.leases.shards_held()

    def holds(self, source: str, target: str) -> bool:
        return self.leases.holds(source, target)

    async def maintain_leases(self) -> LeaseRound:
        return await self.leases.maintain_leases()

    # -- target state -------------------------------------------------------------------------

    @property
    def commits(self) -> int:
        return self.targets.commits

    async def prefetch_states(self, source: str, targets: Sequence[str]) -> None:
        await self.targets.prefetch_states(source, targets)

    def stage_state(self, source: str, target: str, state: TargetState, now: float) -> bool:
        return self.targets.stage_state(source, target, state, now)

    async def flush_states(self) -> int:
        return await self.targets.flush_states()

    async def load_state(self, source: str, target: str) -> TargetState | None:
        return await self.targets.load_state(source, target)

    async def load_states(self, source: str, targets: Sequence[str]) -> list[TargetState | None]:
        return await self.targets.load_states(source, targets)

    async def register_watch(self, source: str, targets: Sequence[str], since: WatchSince) -> int:
        return await self.targets.register_watch(source, targets, since)

    async def commit_step(self, step: StepToCommit) -> list[int]:
        return await self.targets.commit_step(step)

    # -- the delivery outbox ------------------------------------------------------------------

    async def claim_due(
        self, now: float, limit: int = 100, group_limit: int = 0, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        return await self.outbox.claim_due(now, limit, group_limit, skip_urls)

    async def next_due(self, skip_urls: Sequence[str] = ()) -> float | None:
        return await self.outbox.next_due(skip_urls)

    async def group_sends(self, group_key: str, url_id: str) -> GroupSends:
        return await self.outbox.group_sends(group_key, url_id)

    async def release(self, delivery_ids: Sequence[int], not_before: float | None = None) -> None:
        await self.outbox.release(delivery_ids, not_before)

    async def requeue_interrupted(self) -> int:
        return await self.outbox.requeue_interrupted()

    async def mark_sent(
        self, delivery_ids: int | Sequence[int], now: float, group: tuple[str, str] | None = None
    ) -> list[int]:
        return await self.outbox.mark_sent(delivery_ids, now, group)

    async def mark_retry(
        self, delivery_ids: int | Sequence[int], error: str, next_attempt_at: float
    ) -> list[int]:
        return await self.outbox.mark_retry(delivery_ids, error, next_attempt_at)

    async def mark_dead(self, give_up: GiveUp) -> list[int]:
        return await self.outbox.mark_dead(give_up)

    async def pending_count(self) -> int:
        return await self.outbox.pending_count()

    async def standing_alerts(
        self, url_ids: Sequence[str], resolved_since: float
    ) -> list[DeliveryRow]:
        return await self.outbox.standing_alerts(url_ids, resolved_since)

    async def watch_outbox(self, wake: Callable[[], None]) -> None:
        await self.outbox.watch_outbox(wake)

    # -- silences -----------------------------------------------------------------------------

    async def add_silence(self, new: NewSilence, now: float) -> Silence:
        return await self.silences.add_silence(new, now)

    async def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        return await self.silences.list_silences(now, include_expired)

    async def active_silences(self, now: float) -> list[Silence]:
        return await self.silences.active_silences(now)

    async def expire_silence(self, silence_id: int, now: float) -> bool:
        return await self.silences.expire_silence(silence_id, now)

    # -- what is true now, history, rounds, retention -----------------------------------------

    async def summary(self) -> StateSummary:
        return await self.alerts.summary()

    async def awaiting_first_poll(self) -> list[Awaiting]:
        return await self.alerts.awaiting_first_poll()

    async def status(self, cadence_key: str) -> StoreStatus:
        return await self.alerts.status(cadence_key)

    async def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        return await self.alerts.history(limit, rule)

    async def record_round(self, round_: SourceRound) -> None:
        await self.alerts.record_round(round_)

    async def prune_batches(
        self, watched: WatchedTarget, now: float, retention: float, limit: int = BATCH_ROWS
    ) -> AsyncIterator[Pruned]:
        async for done in self.retention.prune_batches(watched, now, retention, limit):
            yield done
