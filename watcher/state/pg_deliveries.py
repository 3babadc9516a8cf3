"""The delivery outbox on PostgreSQL, shared by several instances: deliveries claimed under a
token (``watcher.state.pg_claims``: which rows a claim takes, how long it holds them), never
requeued; here what ends a claim, and the queuing and waking. The outbox of the PostgreSQL
engine (``watcher.state.pg_outbox``): every function takes a
``psycopg.AsyncConnection`` and runs its own short transaction (``conn.transaction()``; pass a
connection outside any transaction, e.g. an autocommit one or a pool's). Driver errors pass
through as they are; ``PostgresStore`` maps them (``watcher.state.pg_errors``).

Acks
----
``mark_sent`` / ``mark_retry`` / ``mark_dead`` / ``release`` (and ``pg_claims.extend_claim``)
change only the rows still ``sending`` under ``token`` (an expired claim that nobody took yet
still counts: its send happened) and return the ids they did NOT change: taken over by another
claimer after the claim expired, or deleted. The caller logs and skips those, as it does the
ids no longer in the table on SQLite. Each is one transaction with the alerts' status, so a
stale ack changes nothing at all; ``mark_sent`` records a digest's send (``group_sends``) in
it, and only when one of its rows was still this claim's; ``mark_dead`` queues its dead letters
in it, for the rows it changed only.

Waking senders
--------------
No trigger: the transaction that inserts deliveries calls ``notify_outbox`` (``pg_notify``)
itself, as ``insert_alerts`` does. PostgreSQL delivers a notification at commit only (never
for a rollback) and folds identical ones of one transaction into one. ``listen_outbox`` waits on
a dedicated autocommit connection and wakes at most ``poll_timeout`` later anyway: a lost
notification (a reconnect) delays a send, never loses it. Between wakes, a sender sleeps until
its ``next_due`` delivery falls due (a retry), for a bounded time: what no notification tells
(rows another instance committed while this one was not listening, a claim that expired) is
found at its next claim.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import DeliveryRow, GroupSends, ResolvedDestinations
from watcher.state.alerts import alert_values, fires_now
from watcher.state.deliveries import DELIVERY_COLUMNS, GROUP_SENDS_KEPT_SECONDS, delivery_row
from watcher.state.interface import GiveUp
from watcher.state.pg_claims import not_changed, update_claimed
from watcher.state.pg_leases import NOW

Connection = AsyncConnection[TupleRow]

OUTBOX_CHANNEL = "watcher_outbox"

# An alert's status follows from its deliveries (watcher.state.alerts.REFRESH_ALERT_STATUS,
# in PostgreSQL's words). Run it after locking the alerts (``_refresh_alerts``): its snapshot
# then sees every other mark of the same alerts.
_REFRESH_ALERT_STATUS = """
UPDATE alerts SET status = (
    SELECT CASE
        WHEN COUNT(*) = 0 THEN 'silenced'
        WHEN COUNT(*) FILTER (WHERE d.status = 'sent') = COUNT(*) THEN 'sent'
        WHEN COUNT(*) FILTER (WHERE d.status = 'sent') > 0 THEN 'partial'
        WHEN COUNT(*) FILTER (WHERE d.status = 'dead') = COUNT(*) THEN 'dead'
        ELSE 'queued'
    END
    FROM deliveries d WHERE d.alert_id = alerts.id
)
WHERE id = ANY(%s)
"""


# What ends a claim (an ack, a release): no token, no expiry.
_UNCLAIMED = "claim_token = NULL, claim_expires_at = NULL"


def _ids(delivery_ids: int | Sequence[int]) -> list[int]:
    return [delivery_ids] if isinstance(delivery_ids, int) else list(delivery_ids)


async def _finish(
    conn: Connection, ids: list[int], token: str, assignments: str, params: Mapping[str, Any]
) -> tuple[list[int], list[int]]:
    """End the claim of the rows still claimed under ``token`` with ``assignments`` and update
    their alerts' status, inside the caller's transaction; returns (changed, not changed) ids,
    each sorted."""
    changed = await update_claimed(conn, ids, token, f"{assignments}, {_UNCLAIMED}", params)
    await _refresh_alerts(conn, set(changed.values()))
    return sorted(changed), not_changed(ids, changed)


async def _refresh_alerts(conn: Connection, alert_ids: set[int]) -> None:
    if not alert_ids:
        return
    ordered = sorted(alert_ids)
    # Lock first, in id order (no deadlock between two marks), then refresh in a statement of
    # its own: its snapshot sees the deliveries another mark of the same alert committed.
    await conn.execute("SELECT id FROM alerts WHERE id = ANY(%s) ORDER BY id FOR UPDATE", [ordered])
    await conn.execute(_REFRESH_ALERT_STATUS, [ordered])


async def mark_sent(
    conn: Connection,
    delivery_ids: int | Sequence[int],
    token: str,
    at: float,
    group: tuple[str, str] | None = None,
) -> list[int]:
    """Delivered (in one message), for the rows still claimed under ``token``; ``group``
    (group_key, url_id): that message was a digest's, recorded for its pacing in the same
    transaction when at least one of its rows was still this claim's. Returns the ids not
    changed (taken over or deleted: the caller logs and skips them)."""
    ids = _ids(delivery_ids)
    async with conn.transaction():
        changed, unchanged = await _finish(
            conn,
            ids,
            token,
            "status = 'sent', attempts = attempts + 1, sent_at = %(at)s, last_error = NULL",
            {"at": at},
        )
        if group is not None and changed:
            await conn.execute(
                "INSERT INTO group_sends (group_key, url_id, sent_at, alerts) "
                "VALUES (%s, %s, %s, %s)",
                [*group, at, len(changed)],
            )
            await conn.execute(
                "DELETE FROM group_sends WHERE group_key = %s AND url_id = %s AND sent_at < %s",
                [*group, at - GROUP_SENDS_KEPT_SECONDS],
            )
    return unchanged


async def _failed(
    conn: Connection,
    delivery_ids: int | Sequence[int],
    token: str,
    status: str,
    error: str,
    at: float,
) -> tuple[list[int], list[int]]:
    """An attempt that did not deliver, inside the caller's transaction: ``status`` pending
    (tried again at ``at``) or dead (given up at ``at``), the error kept; as ``_finish``."""
    return await _finish(
        conn,
        _ids(delivery_ids),
        token,
        "status = %(status)s, attempts = attempts + 1, last_error = %(error)s, "
        "next_attempt_at = %(at)s",
        {"status": status, "error": error, "at": at},
    )


async def mark_retry(
    conn: Connection,
    delivery_ids: int | Sequence[int],
    token: str,
    error: str,
    next_attempt_at: float,
) -> list[int]:
    """Back to pending until ``next_attempt_at``, one attempt more; the ids not changed."""
    async with conn.transaction():
        _, unchanged = await _failed(conn, delivery_ids, token, "pending", error, next_attempt_at)
    return unchanged


async def mark_dead(conn: Connection, give_up: GiveUp, token: str) -> list[int]:
    """Given up; the dead letters of its ``reports`` are queued in the same transaction for
    the rows changed only, so each is reported once. The ids not changed."""
    at, reports = give_up.now, give_up.reports
    async with conn.transaction():
        _, unchanged = await _failed(conn, give_up.delivery_ids, token, "dead", give_up.error, at)
        if reports is not None and (letters := reports.letters_except(unchanged)):
            await insert_alerts(conn, letters, reports.destinations, at)
    return unchanged


async def release(
    conn: Connection,
    delivery_ids: Sequence[int],
    token: str,
    not_before: float | None = None,
) -> list[int]:
    """Claimed rows back to pending, unattempted (``not_before``: not earlier than that); the
    ids not changed. Without ``not_before`` (a graceful stop hands them over) the listeners
    are notified at the commit."""
    ids = list(delivery_ids)
    if not ids:
        return []
    async with conn.transaction():
        changed = await update_claimed(
            conn,
            ids,
            token,
            f"""status = 'pending', {_UNCLAIMED}, next_attempt_at = GREATEST(next_attempt_at,
                COALESCE(%(not_before)s, next_attempt_at))""",
            {"not_before": not_before},
        )
        if changed and not_before is None:
            await notify_outbox(conn)  # due now (a graceful stop): another instance takes them
    return not_changed(ids, changed)


async def group_sends(conn: Connection, group_key: str, url_id: str) -> GroupSends:
    """The state of one digest group for one URL (as SQLite's ``group_sends``)."""
    scheduled = await (
        await conn.execute(
            """SELECT MIN(d.next_attempt_at)
            FROM deliveries d JOIN alerts a ON a.id = d.alert_id
            WHERE d.status = 'pending' AND a.group_key = %s AND d.url_id = %s""",
            [group_key, url_id],
        )
    ).fetchone()
    sent = await (
        await conn.execute(
            "SELECT sent_at FROM group_sends WHERE group_key = %s AND url_id = %s ORDER BY sent_at",
            [group_key, url_id],
        )
    ).fetchall()
    return GroupSends(
        None if scheduled is None or scheduled[0] is None else float(scheduled[0]),
        tuple(float(row[0]) for row in sent),
    )


# -- queuing and waking -----------------------------------------------------------------------


async def next_due(conn: Connection, token: str, busy_urls: Sequence[str] = ()) -> float | None:
    """The earliest ``next_attempt_at`` of the pending deliveries a claim under ``token`` could
    take: leaving out those to ``busy_urls`` and to a URL another claimer holds under a live
    claim (that claimer sends them; should it die, its claim expires and they are anyone's).
    None when there is none."""
    row = await (
        await conn.execute(
            f"""SELECT d.next_attempt_at FROM deliveries d
            WHERE d.status = 'pending' AND d.url_id <> ALL(%(busy)s)
                AND NOT EXISTS (SELECT 1 FROM deliveries o
                    WHERE o.url_id = d.url_id AND o.status = 'sending'
                        AND o.claim_token <> %(token)s AND o.claim_expires_at >= (SELECT {NOW}))
            ORDER BY d.next_attempt_at LIMIT 1""",
            {"busy": list(busy_urls), "token": token},
        )
    ).fetchone()
    return None if row is None else float(row[0])


async def notify_outbox(conn: Connection) -> None:
    """Wake the listeners (``listen_outbox``) when the current transaction commits: call it in
    the transaction that inserts deliveries. Nothing is sent if it rolls back."""
    await conn.execute("SELECT pg_notify(%s, '')", [OUTBOX_CHANNEL])


async def insert_alerts(
    conn: Connection,
    alerts: Sequence[AlertMessage],
    destinations: ResolvedDestinations,
    now: float,
) -> list[int]:
    """Queue alerts with their deliveries inside the caller's transaction (``AlertRows`` on
    SQLite: an alert whose ``dedup_key`` is recorded already is skipped), and notify the
    senders at its commit; the ids of the alerts inserted."""
    new_ids: list[int] = []
    queued = False
    for alert in alerts:
        row = await (
            await conn.execute(
                """INSERT INTO alerts
                (created_at, rule, severity, subject, reason, dedup_key, title, body, facts,
                 group_key, grouping, status)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'queued')
                ON CONFLICT (dedup_key) DO NOTHING
                RETURNING id""",
                alert_values(alert, now),
            )
        ).fetchone()
        if row is None:
            continue
        alert_id = int(row[0])
        new_ids.append(alert_id)
        if fires_now(alert):
            await conn.execute(
                """INSERT INTO firing_alerts (rule, subject, alert_id) VALUES (%s, %s, %s)
                ON CONFLICT (rule, subject) DO UPDATE
                SET alert_id = GREATEST(firing_alerts.alert_id, excluded.alert_id)""",
                [alert.rule, alert.subject, alert_id],
            )
        elif alert.reason == "resolved":
            await conn.execute(
                "DELETE FROM firing_alerts WHERE rule = %s AND subject = %s AND alert_id < %s",
                [alert.rule, alert.subject, alert_id],
            )
        for destination in destinations.for_alert(alert):
            await conn.execute(
                """INSERT INTO deliveries
                (alert_id, channel, url_id, status, attempts, next_attempt_at, created_at)
                VALUES (%s, %s, %s, 'pending', 0, %s, %s)
                ON CONFLICT (alert_id, url_id) DO NOTHING""",
                [alert_id, destination.channel, destination.url_id, now, now],
            )
            queued = True
        await conn.execute(_REFRESH_ALERT_STATUS, [[alert_id]])
    if queued:
        await notify_outbox(conn)
    return new_ids


async def listen_outbox(conn: Connection, poll_timeout: float) -> AsyncGenerator[bool, None]:
    """Yields each time the senders should look at the outbox: True when notified (one or
    more ``notify_outbox`` committed), False when ``poll_timeout`` passed without one (the
    polling fallback: retries fall due without a notification). Notifications that arrive
    while the caller works are kept by the driver and wake the next wait at once.

    ``conn`` must be an autocommit connection of its own (a LISTEN waits for no transaction;
    psycopg's ``notifies`` holds the connection meanwhile); closing it stops listening."""
    if not conn.autocommit:
        raise ValueError("listen_outbox needs an autocommit connection of its own")
    if poll_timeout <= 0:
        raise ValueError(f"poll_timeout must be positive, got {poll_timeout}")
    await conn.execute(f"LISTEN {OUTBOX_CHANNEL}")
    while True:
        notified = False
        async for _ in conn.notifies(timeout=poll_timeout, stop_after=1):
            notified = True
        yield notified


async def standing_alerts(
    conn: Connection, url_ids: Sequence[str], resolved_since: float
) -> list[DeliveryRow]:
    """The alerts firing now and the recent resolutions, with their deliveries to ``url_ids``
    (``Store.standing_alerts``)."""
    if not url_ids:
        return []
    rows = await (
        await conn.execute(
            f"""SELECT {DELIVERY_COLUMNS}
            FROM alerts a JOIN deliveries d ON d.alert_id = a.id
            WHERE a.id IN (
                SELECT alert_id FROM firing_alerts
                UNION ALL SELECT id FROM alerts WHERE created_at >= %s AND reason = 'resolved'
            ) AND d.url_id = ANY(%s)
            ORDER BY a.id, d.id""",
            [resolved_since, list(url_ids)],
        )
    ).fetchall()
    return [delivery_row(row) for row in rows]
