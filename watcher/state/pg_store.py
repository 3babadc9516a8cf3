"""The PostgreSQL engine of the ``Store`` protocol: several instances sharing one database.

``PostgresStore`` wires its parts, one per role of the protocol (``watcher.state.interface``):
the leased shards (``watcher.state.pg_lease_rounds``), the target states
(``watcher.state.pg_targets``), the outbox (``watcher.state.pg_outbox``), silences, the history
and retention (``watcher.state.pg_records``); here are what they share, built without I/O, and
the engine's life: ``start`` opens the pool, migrates (once, under an advisory lock) and
registers this instance; ``close`` flushes, hands every shard back at once (a graceful stop:
another instance takes them within its next lease round) and closes the pool.

Each call borrows a connection of an async pool (``watcher.state.pg_pool``: a few per instance,
autocommit, with statement and idle-in-transaction timeouts) for one short transaction: none is
ever held across an RPC call or a send. Driver errors are mapped at this boundary (each call
``@mapped``, ``watcher.state.pg_errors``): callers see the store's transient and permanent
errors, and ``LeaseLost``.

What differs from the SQLite engine, one process owning everything:

- Targets are leased by shard (``watcher.state.shards``, ``watcher.state.pg_leases``; the
  shards held and their epochs in ``watcher.state.leased_shards``), and every write of a
  target's rows is fenced by its shard's lease (``pg_targets``). The staged and prefetched
  states are held as on SQLite (``watcher.state.staging``), flushed in larger batches.
- Deliveries are claimed under this process's token, never requeued at start-up; the claims
  held are extended with each lease round (``pg_outbox``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import psycopg
import structlog

from watcher.config.settings import LEASE_TTL_SECONDS
from watcher.core.errors import StateError, StateUnusable
from watcher.state import pg_leases
from watcher.state.closing import AsyncClosing
from watcher.state.leased_shards import LeasedShards
from watcher.state.pg_errors import mapped
from watcher.state.pg_lease_rounds import PgLeaseRounds
from watcher.state.pg_outbox import PgOutbox
from watcher.state.pg_pool import DEFAULT_LIMITS, PoolLimits, open_pool
from watcher.state.pg_records import PgHistory, PgRetention, PgSilences
from watcher.state.pg_targets import PG_STAGED_LIMIT, PgTargetStates
from watcher.state.postgresql_schema import migrate, migrations, schema_version
from watcher.state.staging import HeldStates

log = structlog.get_logger(__name__)


class PostgresStore(
    PgTargetStates, PgOutbox, PgLeaseRounds, PgSilences, PgHistory, PgRetention, AsyncClosing
):
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
        self._url = url
        self.lease_ttl = lease_ttl
        self.claim_ttl = lease_ttl
        # One token per process: a restarted instance's old claims expire like a dead one's.
        self.token = f"{instance}/{uuid.uuid4().hex[:12]}"
        self._monotonic = monotonic
        self._pool = open_pool(url, limits)
        self.commits = 0
        self._states = HeldStates(PG_STAGED_LIMIT)
        self._flush_idle = asyncio.Event()
        self._flush_idle.set()
        self._shards = LeasedShards(instance)
        self._claimed: set[int] = set()
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
            await self._register(conn)

    async def close(self) -> None:
        """Flushes what it can, hands every shard back (takeable at once) and closes."""
        if self._started and not self._command:
            try:
                await self.flush_states()
                async with self._pool.connection() as conn:
                    released = await pg_leases.retire(conn, self.instance)
                    await self._hand_claims_back(conn)
                log.info("shards handed back", instance=self.instance, shards=len(released))
            except (StateError, psycopg.Error) as exc:  # the leases lapse by themselves
                log.warning("could not hand the shards back", error=str(exc))
        self._shards.clear()
        await self._pool.close()
