"""Leased shards and fenced writes on PostgreSQL, for several instances sharing one database:
the operations on the ``shard_leases`` and ``instances`` tables
(``sql/postgresql/0002_shard_leases.sql``), async on psycopg 3.
``watcher.state.shards`` says which shard a target falls in and plans what to take and hand
back.

Time is the database's: every expiry and heartbeat is ``extract(epoch from clock_timestamp())``
on the server, evaluated where the row is checked; a caller passes durations (``ttl``), never
instants, so instances whose clocks disagree still agree on who holds what.

Each operation is ONE short transaction of its own, committed when it returns (rolled back when
it raises): the connection must not be in a transaction already (``RuntimeError``; autocommit
connections, as a pool hands out, are the intended kind). Driver errors (``psycopg.Error``)
pass through as they are: ``PostgresStore`` maps them to the store's transient and permanent
errors at its boundary (``watcher.state.pg_errors``).

The lease rows' guarantees:

- ``acquire(owner, k, ttl)`` takes up to ``k`` shards that are free (``owner`` NULL) or whose
  lease lapsed, lowest-numbered first, with ``FOR UPDATE SKIP LOCKED``: instances acquiring at
  once never get the same shard and never wait for each other. Every take raises the shard's
  ``epoch`` by one, so a former owner's epoch never comes back. It never waits for a fenced
  write either: a shard whose row a fenced transaction holds ``FOR SHARE`` is skipped (SKIP
  LOCKED skips a row it cannot lock at once, and ``FOR UPDATE`` conflicts with ``FOR SHARE``),
  and taken by a later ``acquire`` once that transaction ended. So a takeover always comes
  after the old owner's open write, never during it; and a paused instance holding a fenced
  transaction open (SIGSTOP mid-write) stalls no other instance's lease loop, only that one
  shard, until the server ends its transaction (``idle_in_transaction_session_timeout``).
- ``renew(owner, held, ttl)`` extends the leases of ``held`` that ``owner`` still holds
  unexpired and returns those; one whose lease lapsed is lost (taken by ``acquire`` later, at a
  new epoch), not renewed. An UPDATE waits for ``FOR SHARE`` locks: a renewal waits for the
  owner's own open fenced writes to end (short: no transaction is held across an RPC call or a
  send), and re-checks the expiry after the wait.
- ``release(owner, shards)`` hands shards back voluntarily: ``owner`` NULL and ``expires_at``
  now, so another instance takes them at once. ``retire`` releases all of an instance's shards
  and deletes its heartbeat (a graceful stop).
- ``fenced(conn, shard, owner, epoch)`` opens the transaction of a write to ``shard``'s rows;
  its first statement checks that ``owner`` holds the shard at ``epoch``, unexpired, and locks
  the lease row ``FOR SHARE`` until the commit. A lease lost raises ``LeaseLost`` before
  anything is written, and the transaction rolls back. While the write's transaction is open,
  no takeover of the shard can commit (``acquire`` skips the locked row; a takeover already
  committed changed the epoch, which the check sees), so every fenced write commits before the
  next owner's first action on the shard, and none after it. The lease may lapse during an open
  fenced write: that write still commits (nobody took the shard meanwhile); the next one raises.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from watcher.core.errors import LeaseLost

__all__ = [
    "NOW",
    "Instance",
    "LeaseLost",
    "acquire",
    "fenced",
    "held_shards",
    "live_instances",
    "prune_instances",
    "register_instance",
    "release",
    "renew",
    "renew_instance",
    "retire",
    "takeable_shards",
]

Connection = AsyncConnection[TupleRow]

# The database's clock, in seconds since the epoch (extract gives numeric: cast for the
# double precision columns). clock_timestamp() moves during a transaction, unlike now().
NOW = "extract(epoch from clock_timestamp())::double precision"


@dataclass(frozen=True)
class Instance:
    """A heartbeat row."""

    instance_id: str
    host: str
    pid: int
    started_at: float
    renewed_at: float


@asynccontextmanager
async def _transaction(conn: Connection) -> AsyncIterator[None]:
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise RuntimeError(
            "a lease operation is a transaction of its own: the connection is in one already"
        )
    async with conn.transaction():
        yield


# -- instances ------------------------------------------------------------------------------------


async def register_instance(conn: Connection, instance_id: str, *, host: str, pid: int) -> None:
    """Write (or refresh) ``instance_id``'s heartbeat row, started and renewed now."""
    async with _transaction(conn):
        await conn.execute(
            f"""INSERT INTO instances (instance_id, host, pid, started_at, renewed_at)
            VALUES (%s, %s, %s, {NOW}, {NOW})
            ON CONFLICT (instance_id) DO UPDATE SET
                host = EXCLUDED.host, pid = EXCLUDED.pid, renewed_at = EXCLUDED.renewed_at""",
            [instance_id, host, pid],
        )


async def renew_instance(conn: Connection, instance_id: str) -> bool:
    """The heartbeat: ``renewed_at`` now. False when the row is gone (pruned as dead while
    this instance was paused): register again."""
    async with _transaction(conn):
        cursor = await conn.execute(
            f"UPDATE instances SET renewed_at = {NOW} WHERE instance_id = %s RETURNING 1",
            [instance_id],
        )
        return await cursor.fetchone() is not None


async def live_instances(conn: Connection, ttl: float) -> list[Instance]:
    """The instances renewed within the last ``ttl`` seconds, by id (``shards.rank_of``'s
    order). Give it the lease ttl: an instance counts as gone when its leases would have
    lapsed, so the others' shares grow as its shards become takeable."""
    async with _transaction(conn):
        cursor = await conn.execute(
            f"""SELECT instance_id, host, pid, started_at, renewed_at FROM instances
            WHERE renewed_at > {NOW} - %s ORDER BY instance_id""",
            [ttl],
        )
        return [Instance(*row) for row in await cursor.fetchall()]


async def prune_instances(conn: Connection, dead_for: float) -> int:
    """Delete the heartbeats not renewed for ``dead_for`` seconds, and the last rounds of the
    instances without one (gone, or stopped); how many heartbeats."""
    async with _transaction(conn):
        cursor = await conn.execute(
            f"DELETE FROM instances WHERE renewed_at <= {NOW} - %s", [dead_for]
        )
        await conn.execute(
            "DELETE FROM sources WHERE instance NOT IN (SELECT instance_id FROM instances)"
        )
        return cursor.rowcount


async def retire(conn: Connection, instance_id: str) -> list[int]:
    """A graceful stop: hand back every shard ``instance_id`` holds (takeable at once) and
    delete its heartbeat, in one transaction; the shards released."""
    async with _transaction(conn):
        cursor = await conn.execute(
            f"""UPDATE shard_leases SET owner = NULL, expires_at = {NOW}
            WHERE owner = %s RETURNING shard""",
            [instance_id],
        )
        released = sorted(row[0] for row in await cursor.fetchall())
        await conn.execute("DELETE FROM instances WHERE instance_id = %s", [instance_id])
        return released


# -- leases ---------------------------------------------------------------------------------------


async def renew(conn: Connection, owner: str, held: Collection[int], ttl: float) -> set[int]:
    """Extend by ``ttl`` seconds the leases of ``held`` that ``owner`` still holds unexpired;
    the shards still held. The others are lost: drop them (``acquire`` may take them again,
    at a new epoch)."""
    if not held:
        return set()
    async with _transaction(conn):
        cursor = await conn.execute(
            f"""UPDATE shard_leases SET expires_at = {NOW} + %s
            WHERE owner = %s AND shard = ANY(%s::bigint[]) AND expires_at > {NOW}
            RETURNING shard""",
            [ttl, owner, list(held)],
        )
        return {row[0] for row in await cursor.fetchall()}


async def acquire(
    conn: Connection,
    owner: str,
    k: int,
    ttl: float,
    *,
    among: Collection[int] | None = None,
) -> dict[int, int]:
    """Take up to ``k`` free or lapsed shards (only from ``among`` when given: a plan's
    ``take``), lowest-numbered first, for ``ttl`` seconds; shard -> its new epoch. Skips the
    rows another transaction holds locked (another acquirer, a fenced write): never waits."""
    if k <= 0 or (among is not None and not among):
        return {}
    async with _transaction(conn):
        cursor = await conn.execute(
            f"""WITH picked AS (
                SELECT shard FROM shard_leases
                WHERE (owner IS NULL OR expires_at <= {NOW})
                    AND (%(among)s::bigint[] IS NULL OR shard = ANY(%(among)s::bigint[]))
                ORDER BY shard
                LIMIT %(k)s
                FOR UPDATE SKIP LOCKED
            )
            UPDATE shard_leases l
            SET owner = %(owner)s, epoch = l.epoch + 1, expires_at = {NOW} + %(ttl)s
            FROM picked WHERE l.shard = picked.shard
            RETURNING l.shard, l.epoch""",
            {
                "among": None if among is None else list(among),
                "k": k,
                "owner": owner,
                "ttl": ttl,
            },
        )
        return dict(sorted((shard, epoch) for shard, epoch in await cursor.fetchall()))


async def release(conn: Connection, owner: str, shards: Collection[int]) -> set[int]:
    """Hand ``shards`` back voluntarily (those ``owner`` still holds): free and takeable at
    once; the shards released. Waits for ``owner``'s own open fenced writes to them."""
    if not shards:
        return set()
    async with _transaction(conn):
        cursor = await conn.execute(
            f"""UPDATE shard_leases SET owner = NULL, expires_at = {NOW}
            WHERE owner = %s AND shard = ANY(%s::bigint[]) RETURNING shard""",
            [owner, list(shards)],
        )
        return {row[0] for row in await cursor.fetchall()}


async def takeable_shards(conn: Connection) -> list[int]:
    """The free and lapsed shards, ascending (a plan's ``takeable``)."""
    async with _transaction(conn):
        cursor = await conn.execute(
            f"""SELECT shard FROM shard_leases WHERE owner IS NULL OR expires_at <= {NOW}
            ORDER BY shard"""
        )
        return [row[0] for row in await cursor.fetchall()]


async def held_shards(conn: Connection) -> dict[str, dict[int, int]]:
    """The unexpired leases: owner -> shard -> epoch (``watcher status``, tests)."""
    async with _transaction(conn):
        cursor = await conn.execute(
            f"""SELECT owner, shard, epoch FROM shard_leases
            WHERE owner IS NOT NULL AND expires_at > {NOW} ORDER BY owner, shard"""
        )
        held: dict[str, dict[int, int]] = {}
        for owner, shard, epoch in await cursor.fetchall():
            held.setdefault(owner, {})[shard] = epoch
        return held


# -- fencing --------------------------------------------------------------------------------------

FENCE = f"""SELECT 1 FROM shard_leases
WHERE shard = %s AND owner = %s AND epoch = %s AND expires_at > {NOW}
FOR SHARE"""


@asynccontextmanager
async def fenced(conn: Connection, shard: int, owner: str, epoch: int) -> AsyncIterator[Connection]:
    """``async with fenced(conn, shard, owner, epoch) as conn:`` the transaction of a write to
    ``shard``'s rows, committed at the end of the block (rolled back when it raises). Its first
    statement locks the lease row ``FOR SHARE`` if ``owner`` holds it at ``epoch`` unexpired,
    else raises ``LeaseLost`` with nothing written. No takeover commits while it is open."""
    async with _transaction(conn):
        cursor = await conn.execute(FENCE, [shard, owner, epoch])
        if await cursor.fetchone() is None:
            raise LeaseLost(shard=shard, owner=owner, epoch=epoch)
        yield conn


async def fence_in(conn: Connection, owner: str, epochs: Mapping[int, int]) -> set[int]:
    """Of the shards ``epochs`` names (shard -> the epoch ``owner`` took it at), those it still
    holds at that epoch, unexpired, their lease rows locked ``FOR SHARE`` until the caller's
    transaction ends (``fenced`` for many shards at once: a flush writes only theirs). Runs in
    the caller's transaction (it must be in one)."""
    if conn.info.transaction_status != TransactionStatus.INTRANS:
        raise RuntimeError("fence_in runs inside the caller's transaction")
    cursor = await conn.execute(
        f"""SELECT l.shard FROM shard_leases l
        JOIN unnest(%s::bigint[], %s::bigint[]) AS h(shard, epoch)
            ON h.shard = l.shard AND h.epoch = l.epoch
        WHERE l.owner = %s AND l.expires_at > {NOW}
        ORDER BY l.shard FOR SHARE OF l""",
        # Array literals made here: psycopg dumps a list item by item in Python.
        [_int_array(epochs), _int_array(epochs.values()), owner],
    )
    return {int(row[0]) for row in await cursor.fetchall()}


def _int_array(values: Iterable[int]) -> str:
    """A PostgreSQL array literal of integers: ``{1,2,3}``."""
    return "{" + ",".join(map(str, values)) + "}"
