"""The leased shards of the PostgreSQL engine (``PgLeaseRounds``, held by ``PostgresStore``):
what this instance may poll (``shards_held``, ``holds``) and the lease loop's round
(``maintain_leases``), over the SQL of ``watcher.state.pg_leases`` and the bookkeeping of
``watcher.state.leased_shards`` (the shards held and their epochs).

A round (every few seconds, from the daemon's lease loop) renews what this instance holds, takes
free or lapsed shards up to its balanced share of the live instances, and hands back its
surplus, after writing what it learnt of their targets (the staged states' flush). It extends
the claims of the deliveries this process holds too (``PgOutbox``). ``shards_held`` is what a
sweep polls; it is empty once the leases may have lapsed (no renewal for ``lease_ttl``: a paused
or cut-off instance polls nothing when it resumes)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

import structlog
from psycopg_pool import AsyncConnectionPool

from watcher.state import pg_leases
from watcher.state.interface import LeaseRound
from watcher.state.leased_shards import LeasedShards
from watcher.state.pg_errors import mapped
from watcher.state.pg_outbox import PgOutbox
from watcher.state.pg_pool import Connection
from watcher.state.pg_targets import PgTargets
from watcher.state.shards import balanced_share, plan, rank_of, shard_of

log = structlog.get_logger(__name__)

# Instances whose heartbeat is older than this many lease times are deleted (status stays short).
DEAD_INSTANCE_TTLS = 20


class PgLeaseRounds:
    """The ``LeaseStore`` role on PostgreSQL (see the module). A round flushes ``targets``'
    staged states before it hands shards back, and extends ``outbox``'s claims."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Connection],
        shards: LeasedShards,
        *,
        lease_ttl: float,
        monotonic: Callable[[], float],
        targets: PgTargets,
        outbox: PgOutbox,
    ) -> None:
        self._pool = pool
        self._shards = shards
        self.instance = shards.owner
        self.lease_ttl = lease_ttl
        self._monotonic = monotonic
        self._targets = targets
        self._outbox = outbox

    def shards_held(self) -> frozenset[int] | None:
        """The shards this instance may poll now; empty once its leases may have lapsed."""
        return self._shards.view(self._monotonic())

    def holds(self, source: str, target: str) -> bool:
        return self._shards.holds(shard_of(source, target), self._monotonic())

    async def register(self, conn: Connection) -> None:
        await pg_leases.register_instance(
            conn, self.instance, host=socket.gethostname(), pid=os.getpid()
        )

    @mapped("renew the leases")
    async def maintain_leases(self) -> LeaseRound:
        """One round of the lease loop: heartbeat, renew, then take up to or hand back down to
        this instance's balanced share of the live instances; the claims held are extended."""
        started = self._monotonic()
        taken: dict[int, int] = {}
        released: set[int] = set()
        async with self._pool.connection() as conn:
            if not await pg_leases.renew_instance(conn, self.instance):
                await self.register(conn)
            held = self._shards.shards
            kept = await pg_leases.renew(conn, self.instance, held, self.lease_ttl)
            lost = self._shards.renewed(kept, started, self.lease_ttl)
            live = [i.instance_id for i in await pg_leases.live_instances(conn, self.lease_ttl)]
            count = len(set(live) | {self.instance})
            share = balanced_share(count, rank_of(self.instance, live))
            if len(self._shards) > share:
                # What this instance learnt of those targets is written before they go.
                await self._targets.flush(conn)
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
            await self._outbox.extend_claims(conn)
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
