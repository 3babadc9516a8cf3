"""Claims of the delivery outbox on PostgreSQL, shared by several instances: which due
deliveries a sender takes (``claim_due``) and how long it holds them (``extend_claim``: every
lease round of ``PostgresStore`` extends the claims it holds). The acks that end a claim, and
the queuing and waking, are ``watcher.state.pg_deliveries``'. Every function takes a
``psycopg.AsyncConnection`` outside any transaction and runs its own short one; driver errors
pass through as they are (``PostgresStore`` maps them, ``watcher.state.pg_errors``).

Claims
------
``claim_due`` takes due deliveries in ONE short transaction: ``SELECT ... FOR UPDATE OF d SKIP
LOCKED`` (rows another claimer is taking at this moment are skipped, never waited for), then
sets them ``sending`` with the caller's ``token`` and ``claim_expires_at`` = the database's
clock (``extract(epoch from clock_timestamp())``) + ``claim_ttl``. Due means ``pending`` with
``next_attempt_at <= now`` (the caller's clock, as on SQLite), or ``sending`` under a claim that
has expired by the database's clock: a sender that died or stalled loses its rows to the next
claim, whoever makes it. That is the whole recovery; nothing is requeued at start-up (which
would re-send a live instance's in-flight messages).

One URL is held by one claimer at a time: a claim leaves out every URL with an unexpired claim
under another token, and takes a transaction-level advisory lock per URL it claims for
(``pg_try_advisory_xact_lock``; a URL locked by a concurrent claim is left out too), re-reading
the live claims after taking it. So a URL's deliveries still go in the order they were queued,
and a digest group (``group_key`` and URL) is paced by one sender at a time: its pacing read
(``group_sends``), its send and its ``mark_sent`` follow each other with no other instance
sending to that URL meanwhile, while the claim holds. ``busy_urls``: this instance's own URLs
whose worker is still sending (not claimed again), as ``skip_urls`` on SQLite.

What remains for digests across instances: a claim that expires during a send (no lease round,
which extends every claim held with ``extend_claim``, for ``claim_ttl``: a stalled instance)
lets another instance send the same rows again (a duplicate, at-least-once) and its digest's
message may exceed ``max_per_hour`` by one; the group's pacing read is not inside the claim's
transaction but runs under the URL's claim, which is what keeps it consistent. A claim first
groups the due rows by URL (a scan of every due row: cheap for the outbox's usual backlog, to be
measured for a large one); a claim racing another may come back short (see ``claim_due``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from watcher.core.outbox_rows import DeliveryRow
from watcher.state.deliveries import CLAIM_CEILING, DELIVERY_COLUMNS, delivery_row
from watcher.state.pg_leases import NOW

Connection = AsyncConnection[TupleRow]

# The advisory locks of a claim, one per URL: (this class, hashtext(url_id)). The two-key space
# does not overlap the one-key space of the migrations' lock.
URL_LOCK_CLASS = 0x7764  # "wd"

# Another claimer's live claim on the URL of ``d`` (``ids``: the rows being claimed, some of
# them expired claims taken over).
_LIVE_CLAIM = """SELECT 1 FROM deliveries o
    WHERE o.url_id = d.url_id AND o.status = 'sending' AND o.claim_token <> %(token)s
        AND o.claim_expires_at >= %(started)s AND o.id <> ALL(%(ids)s)"""

# Due: pending and its time has come (the caller's clock), or an expired claim (the database's).
_DUE = """((d.status = 'pending' AND d.next_attempt_at <= %(due_at)s)
    OR (d.status = 'sending' AND d.claim_expires_at < %(started)s))"""

_CLAIMED = f"""status = 'sending', claim_token = %(token)s,
    claim_expires_at = {NOW} + %(ttl)s"""


async def db_now(conn: Connection) -> float:
    """The database's clock, seconds since the epoch (what claims expire by)."""
    row = await (await conn.execute(f"SELECT {NOW}")).fetchone()
    assert row is not None
    return float(row[0])


async def claim_due(
    conn: Connection,
    *,
    token: str,
    claim_ttl: float,
    now: float | None = None,
    limit: int = 100,
    group_limit: int = 0,
    busy_urls: Sequence[str] = (),
) -> list[DeliveryRow]:
    """Due deliveries claimed under ``token`` until the database's clock + ``claim_ttl``, in
    id order, as ``DeliveryRow`` values with status ``sending`` (what SQLite's ``claim_due``
    returns). ``now``: the caller's clock for ``next_attempt_at`` (default: the database's).
    With ``group_limit``, each digest group (``group_key`` and URL) claimed is completed with
    its other due rows, up to ``group_limit`` each. While another claim runs at the same
    moment, it may return fewer than ``limit`` rows, even none, though more are due (a URL the
    other claim holds locked that moment is left out, even one this token holds): the caller
    claims again at its next wake-up (a worker done, a notification, the poll). See the
    module's docstring."""
    if claim_ttl <= 0:
        raise ValueError(f"claim_ttl must be positive, got {claim_ttl}")
    async with conn.transaction():
        started = await db_now(conn)
        params: dict[str, Any] = {
            "due_at": started if now is None else now,
            "started": started,
            "busy": list(busy_urls),
            "limit": limit,
            "token": token,
            "ttl": claim_ttl,
            "ids": [],
        }
        # The URLs with due rows and no other claimer's live claim, oldest due row first, with
        # how many each has (URLs, not rows: a burst to one URL that another claimer is taking
        # does not fill this claim's window with rows it cannot have).
        urls = await (
            await conn.execute(
                f"""SELECT d.url_id, COUNT(*) FROM deliveries d
                WHERE {_DUE} AND d.url_id <> ALL(%(busy)s) AND NOT EXISTS ({_LIVE_CLAIM})
                GROUP BY d.url_id ORDER BY MIN(d.id) LIMIT %(limit)s""",
                params,
            )
        ).fetchall()
        if not urls:
            return []
        found = [(str(url), int(count)) for url, count in urls]
        locked = await _lock_urls(conn, found, limit, token, started)
        params["urls"] = locked
        candidates = await (
            await conn.execute(
                f"""SELECT d.id FROM deliveries d
                WHERE {_DUE} AND d.url_id = ANY(%(urls)s) AND NOT EXISTS ({_LIVE_CLAIM})
                ORDER BY d.id LIMIT %(limit)s
                FOR UPDATE OF d SKIP LOCKED""",
                params,
            )
        ).fetchall()
        params["ids"] = [row[0] for row in candidates]
        claimed = {
            row.id: row
            for row in map(
                delivery_row,
                await (
                    await conn.execute(
                        f"""UPDATE deliveries d SET {_CLAIMED}
                        FROM alerts a
                        WHERE a.id = d.alert_id AND d.id = ANY(%(ids)s)
                        RETURNING {DELIVERY_COLUMNS}""",
                        params,
                    )
                ).fetchall(),
            )
        }
        if group_limit > 0:
            await _complete_groups(conn, claimed, params["due_at"], group_limit, token, claim_ttl)
    return sorted(claimed.values(), key=lambda row: row.id)


async def _lock_urls(
    conn: Connection,
    urls: list[tuple[str, int]],
    limit: int,
    token: str,
    started: float,
) -> list[str]:
    """Lock URLs for this claim, in order, as many as its ``limit`` of rows needs: one URL per
    claimer (``pg_try_advisory_xact_lock``, held to commit; a URL another claim holds, or took
    meanwhile, is left out and the next one tried). Usually two statements."""
    locked: list[str] = []
    wanted, start = limit, 0
    while wanted > 0 and start < len(urls):
        batch, rows = [], 0
        for url, count in urls[start:]:
            batch.append((url, count))
            rows += count
            if rows >= wanted:
                break
        start += len(batch)
        got = [
            row[0]
            for row in await (
                await conn.execute(
                    "SELECT u FROM unnest(%s::text[]) u "
                    "WHERE pg_try_advisory_xact_lock(%s, hashtext(u))",
                    [[url for url, _ in batch], URL_LOCK_CLASS],
                )
            ).fetchall()
        ]
        if got:
            # Read the live claims again, in a statement of its own (a new snapshot): another
            # claim of one of these URLs, committed since the first read, is seen now.
            got = [
                row[0]
                for row in await (
                    await conn.execute(
                        """SELECT u FROM unnest(%(urls)s::text[]) u WHERE NOT EXISTS (
                            SELECT 1 FROM deliveries o
                            WHERE o.url_id = u AND o.status = 'sending'
                                AND o.claim_token <> %(token)s
                                AND o.claim_expires_at >= %(started)s)""",
                        {"urls": got, "token": token, "started": started},
                    )
                ).fetchall()
            ]
        usable = set(got)
        for url, count in batch:
            if url in usable:
                locked.append(url)
                wanted -= count
    return locked


async def _complete_groups(
    conn: Connection,
    claimed: dict[int, DeliveryRow],
    due_at: float,
    group_limit: int,
    token: str,
    claim_ttl: float,
) -> None:
    groups = dict.fromkeys(
        (r.group_key, r.url_id) for r in sorted(claimed.values(), key=lambda r: r.id) if r.group_key
    )
    for group_key, url_id in groups:  # each URL is this claim's (locked above)
        if len(claimed) >= CLAIM_CEILING:
            break
        rows = await (
            await conn.execute(
                f"""UPDATE deliveries d SET {_CLAIMED}
                FROM alerts a
                WHERE a.id = d.alert_id AND d.id IN (
                    SELECT g.id FROM deliveries g JOIN alerts ga ON ga.id = g.alert_id
                    WHERE g.status = 'pending' AND g.next_attempt_at <= %(due_at)s
                        AND ga.group_key = %(group_key)s AND g.url_id = %(url_id)s
                    ORDER BY g.id LIMIT %(group_limit)s
                    FOR UPDATE OF g SKIP LOCKED)
                RETURNING {DELIVERY_COLUMNS}""",
                {
                    "token": token,
                    "ttl": claim_ttl,
                    "due_at": due_at,
                    "group_key": group_key,
                    "url_id": url_id,
                    "group_limit": group_limit,
                },
            )
        ).fetchall()
        for found in map(delivery_row, rows):
            claimed.setdefault(found.id, found)


async def extend_claim(
    conn: Connection, delivery_ids: Sequence[int], token: str, claim_ttl: float
) -> list[int]:
    """The claim of rows still held under ``token`` runs ``claim_ttl`` from the database's
    clock now (a long send: call it before the claim runs out); the ids not extended."""
    if claim_ttl <= 0:
        raise ValueError(f"claim_ttl must be positive, got {claim_ttl}")
    ids = list(delivery_ids)
    if not ids:
        return []
    async with conn.transaction():
        changed = await update_claimed(
            conn, ids, token, f"claim_expires_at = {NOW} + %(ttl)s", {"ttl": claim_ttl}
        )
    return not_changed(ids, changed)


async def update_claimed(
    conn: Connection, ids: list[int], token: str, assignments: str, params: Mapping[str, Any]
) -> dict[int, int]:
    """Sets ``assignments`` (SQL, with ``params``) on those of ``ids`` still claimed under
    ``token`` (an expired claim that nobody took yet still counts), inside the caller's
    transaction: what every ack and extension of a claim changes. The rows changed: delivery
    id -> alert id."""
    rows = await (
        await conn.execute(
            f"""UPDATE deliveries SET {assignments}
            WHERE id = ANY(%(ids)s) AND status = 'sending' AND claim_token = %(token)s
            RETURNING id, alert_id""",
            {**params, "ids": ids, "token": token},
        )
    ).fetchall()
    return {int(row[0]): int(row[1]) for row in rows}


def not_changed(ids: Sequence[int], changed: Mapping[int, int]) -> list[int]:
    """The ids of ``ids`` not changed, sorted (taken over by another claimer, or deleted)."""
    return sorted({id_ for id_ in ids if id_ not in changed})
