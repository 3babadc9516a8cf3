"""What the shared PostgreSQL state says right now, for ``/metrics``, ``/healthz`` and
``watcher status``: the firing alerts, the outbox, and the instances with the shards each holds.
The same values as the SQLite engine's queries (``watcher.state.snapshot``, where the values
are); plain reads on a given connection, no clock (lease expiry is the database's)."""

from __future__ import annotations

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from watcher.state.pg_leases import NOW
from watcher.state.snapshot import AWAITING, Awaiting, Firing, InstanceShards, Outbox

Connection = AsyncConnection[TupleRow]

_FIRING = """
SELECT a.rule, a.subject, a.severity, a.title, a.created_at
FROM firing_alerts f JOIN alerts a ON a.id = f.alert_id
ORDER BY a.created_at DESC
"""
_OUTBOX = """SELECT
    COUNT(*) FILTER (WHERE status IN ('pending', 'sending')),
    MIN(created_at) FILTER (WHERE status IN ('pending', 'sending')),
    COUNT(*) FILTER (WHERE status = 'dead')
FROM deliveries WHERE status IN ('pending', 'sending', 'dead')"""


async def firing(conn: Connection) -> list[Firing]:
    rows = await (await conn.execute(_FIRING)).fetchall()
    return [Firing(*row) for row in rows]


async def outbox(conn: Connection) -> Outbox:
    row = await (await conn.execute(_OUTBOX)).fetchone()
    assert row is not None
    pending, oldest, dead = row
    return Outbox(int(pending or 0), None if oldest is None else float(oldest), int(dead or 0))


async def instances(conn: Connection, ttl: float) -> list[InstanceShards]:
    """The instances renewed within ``ttl`` seconds, by id, each with its unexpired shards;
    one holding shards whose heartbeat is older is listed too (it may still be writing)."""
    rows = await (
        await conn.execute(
            f"""SELECT i.instance_id, i.host, i.pid, i.started_at, i.renewed_at,
                (SELECT COUNT(*) FROM shard_leases l
                 WHERE l.owner = i.instance_id AND l.expires_at > {NOW}),
                {NOW}
            FROM instances i ORDER BY i.instance_id"""
        )
    ).fetchall()
    return [
        InstanceShards(str(r[0]), str(r[1]), int(r[2]), float(r[3]), float(r[4]), int(r[5]))
        for r in rows
        if float(r[4]) > float(r[6]) - ttl or int(r[5]) > 0
    ]


async def unheld_shards(conn: Connection) -> int:
    """Shards nobody holds now (free or lapsed): their targets are not polled until taken."""
    row = await (
        await conn.execute(
            f"SELECT COUNT(*) FROM shard_leases WHERE owner IS NULL OR expires_at <= {NOW}"
        )
    ).fetchone()
    assert row is not None
    return int(row[0])


async def awaiting(conn: Connection) -> list[Awaiting]:
    """Per source, the targets awaiting their first poll (the partial index)."""
    rows = await (await conn.execute(AWAITING)).fetchall()
    return [Awaiting(str(s), int(n), float(t)) for s, n, t in rows]
