"""The delivery outbox: claiming due deliveries, digest groups, and each delivery's fate."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlite_utils import Database

from watcher.core.events import AlertMessage, Grouping
from watcher.core.outbox_rows import DeliveryRow, GroupSends
from watcher.state.alerts import REFRESH_ALERT_STATUS, AlertRows, marks
from watcher.state.database import transaction
from watcher.state.interface import GiveUp

# What a claim reads, in the order ``delivery_row`` takes it: plain SQL both engines run (the
# PostgreSQL engine's claim returns it, watcher.state.pg_deliveries).
DELIVERY_COLUMNS = """
    d.id, d.alert_id, d.channel, d.url_id, d.status, d.attempts, d.next_attempt_at,
    d.created_at, a.rule, a.severity, a.reason, a.title, a.body, a.subject, a.dedup_key,
    a.facts, a.group_key, a.grouping
"""
# max_per_hour looks back one rolling hour (watcher.delivery.digest); the newest send is always
# kept.
GROUP_SENDS_KEPT_SECONDS = 3600.0
# How many rows one pass may claim in all, beyond its batch, to complete digest groups: keeps
# every "IN (...)" list far below SQLite's limit on parameters.
CLAIM_CEILING = 5000


def delivery_row(row: sqlite3.Row | tuple[Any, ...]) -> DeliveryRow:
    """One row of ``DELIVERY_COLUMNS`` as a value (pure: either engine's row)."""
    delivery, alert = row[:8], row[8:]  # the columns of DELIVERY_COLUMNS, in their order
    rule, severity, reason, title, body, subject, dedup_key, facts, group_key, grouping = alert
    stored = AlertMessage(
        rule=rule,
        severity=severity,
        subject=subject,
        reason=reason,
        dedup_key=dedup_key,
        title=title,
        body=body,
        channels=(),
        facts=json.loads(facts),
        grouping=None if grouping is None else Grouping(**json.loads(grouping)),
    )
    id_, alert_id, channel, url_id, status, attempts, next_attempt_at, created_at = delivery
    return DeliveryRow(
        id_,
        alert_id,
        channel,
        url_id,
        status,
        attempts,
        next_attempt_at,
        created_at,
        stored,
        group_key,
    )


class Deliveries:
    """The outbox's rows: claimed, sent, retried, given up."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._alerts = AlertRows(db)  # the dead letters ``mark_dead`` queues

    def due_deliveries(
        self, now: float, limit: int = 100, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        """Pending deliveries whose time has come, oldest first (in the order they were queued),
        leaving out those to ``skip_urls`` (URLs whose worker is busy)."""
        rows = self._db.execute(
            f"""SELECT {DELIVERY_COLUMNS}
            FROM deliveries d JOIN alerts a ON a.id = d.alert_id
            WHERE d.status = 'pending' AND d.next_attempt_at <= ?
                AND d.url_id NOT IN ({marks(skip_urls)})
            ORDER BY d.id LIMIT ?""",
            [now, *skip_urls, limit],
        ).fetchall()
        return [delivery_row(r) for r in rows]

    def next_due(self, skip_urls: Sequence[str] = ()) -> float | None:
        """The earliest ``next_attempt_at`` of the pending deliveries, leaving out those to
        ``skip_urls``; None when none is pending (one read of the ``deliveries_due`` index)."""
        row = self._db.execute(
            f"""SELECT next_attempt_at FROM deliveries
            WHERE status = 'pending' AND url_id NOT IN ({marks(skip_urls)})
            ORDER BY next_attempt_at LIMIT 1""",
            list(skip_urls),
        ).fetchone()
        return None if row is None else float(row[0])

    def claim_due(
        self, now: float, limit: int = 100, group_limit: int = 0, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        """``due_deliveries`` marked ``sending``, so that no other pass picks them up.

        With ``group_limit``, each digest group (``group_key`` and URL) among them is completed
        with its other due rows, up to ``group_limit`` each, so that it goes out as one message.
        """
        if not self.due_deliveries(now, 1, skip_urls):
            return []  # a read (WAL: never waits for a writer); no write lock when idle
        with transaction(self._db):
            rows = self.due_deliveries(now, limit, skip_urls)
            if group_limit > 0:
                rows = self._complete_groups(rows, now, group_limit)
            if rows:
                self._db.execute(
                    f"UPDATE deliveries SET status = 'sending' WHERE id IN ({marks(rows)})",
                    [r.id for r in rows],
                )
        return [replace(r, status="sending") for r in rows]

    def _complete_groups(
        self, rows: list[DeliveryRow], now: float, group_limit: int
    ) -> list[DeliveryRow]:
        claimed = {row.id: row for row in rows}
        groups = dict.fromkeys((r.group_key, r.url_id) for r in rows if r.group_key is not None)
        for group_key, url_id in groups:
            if len(claimed) >= CLAIM_CEILING:
                break
            for found in self._db.execute(
                f"""SELECT {DELIVERY_COLUMNS}
                FROM deliveries d JOIN alerts a ON a.id = d.alert_id
                WHERE d.status = 'pending' AND d.next_attempt_at <= ?
                    AND a.group_key = ? AND d.url_id = ?
                ORDER BY d.id LIMIT ?""",
                [now, group_key, url_id, group_limit],
            ).fetchall():
                row = delivery_row(found)
                claimed.setdefault(row.id, row)
        return sorted(claimed.values(), key=lambda row: row.id)

    def group_sends(self, group_key: str, url_id: str) -> GroupSends:
        """The state of one digest group for one URL (see ``GroupSends``)."""
        scheduled = self._db.execute(
            """SELECT MIN(d.next_attempt_at)
            FROM deliveries d JOIN alerts a ON a.id = d.alert_id
            WHERE d.status = 'pending' AND a.group_key = ? AND d.url_id = ?""",
            [group_key, url_id],
        ).fetchone()[0]
        sent = self._db.execute(
            """SELECT sent_at FROM group_sends WHERE group_key = ? AND url_id = ?
            ORDER BY sent_at""",
            [group_key, url_id],
        ).fetchall()
        return GroupSends(scheduled, tuple(float(row[0]) for row in sent))

    def release(self, delivery_ids: Sequence[int], not_before: float | None = None) -> None:
        """Put claimed deliveries back to pending, unattempted (e.g. at shutdown).

        ``not_before`` keeps them behind an earlier delivery to the same URL that must go
        first.
        """
        if not delivery_ids:
            return
        with transaction(self._db):
            self._db.execute(
                f"""UPDATE deliveries SET status = 'pending',
                    next_attempt_at = MAX(next_attempt_at, COALESCE(?, next_attempt_at))
                WHERE status = 'sending' AND id IN ({marks(delivery_ids)})""",
                [not_before, *delivery_ids],
            )

    def requeue_interrupted(self) -> int:
        """Deliveries left ``sending`` by a process that stopped mid-send go back to pending.

        At-least-once: such a message may have gone out; sending it again is the lesser evil.
        Only the process that sends may call this (not a reader such as ``watcher alerts``).
        """
        with transaction(self._db):
            cursor = self._db.execute(
                "UPDATE deliveries SET status = 'pending' WHERE status = 'sending'"
            )
        return int(cursor.rowcount)

    def mark_sent(
        self, delivery_ids: int | Sequence[int], now: float, group: tuple[str, str] | None = None
    ) -> list[int]:
        """Delivered (in one message). ``group`` (group_key, url_id): that message was of a
        digest group, remembered for its pacing. Returns the ids no longer in the table (each
        ``mark_*`` does: the others are marked all the same)."""
        with transaction(self._db):
            missing = self._finish(
                delivery_ids,
                "status = 'sent', attempts = attempts + 1, sent_at = ?, last_error = NULL",
                [now],
            )
            if group is not None:
                self._db.execute(
                    "INSERT INTO group_sends (group_key, url_id, sent_at, alerts) "
                    "VALUES (?, ?, ?, ?)",
                    [*group, now, 1 if isinstance(delivery_ids, int) else len(delivery_ids)],
                )
                self._db.execute(
                    "DELETE FROM group_sends WHERE group_key = ? AND url_id = ? AND sent_at < ?",
                    [*group, now - GROUP_SENDS_KEPT_SECONDS],
                )
        return missing

    def mark_retry(
        self, delivery_ids: int | Sequence[int], error: str, next_attempt_at: float
    ) -> list[int]:
        with transaction(self._db):
            return self._finish(
                delivery_ids,
                "status = 'pending', attempts = attempts + 1, last_error = ?, next_attempt_at = ?",
                [error, next_attempt_at],
            )

    def mark_dead(self, give_up: GiveUp) -> list[int]:
        """Given up; the dead letters of its ``reports`` are queued in the same transaction, so
        a dead letter is reported exactly once; none for a delivery no longer in the table."""
        now, reports = give_up.now, give_up.reports
        with transaction(self._db):
            missing = self._finish(
                give_up.delivery_ids,
                "status = 'dead', attempts = attempts + 1, last_error = ?, next_attempt_at = ?",
                [give_up.error, now],
            )
            if reports is not None and (letters := reports.letters_except(missing)):
                self._alerts.insert_alerts(letters, reports.destinations, now)
        return missing

    def _finish(
        self, delivery_ids: int | Sequence[int], assignments: str, params: list[Any]
    ) -> list[int]:
        """Update the deliveries and their alerts' status; returns the ids not found (a row
        deleted meanwhile, e.g. by hand: the caller logs it, nothing else depends on it)."""
        ids = [delivery_ids] if isinstance(delivery_ids, int) else list(delivery_ids)
        rows = self._db.execute(
            f"UPDATE deliveries SET {assignments} WHERE id IN ({marks(ids)}) "
            "RETURNING id, alert_id",
            [*params, *ids],
        ).fetchall()
        for alert_id in sorted({row[1] for row in rows}):
            self._db.execute(REFRESH_ALERT_STATUS, [alert_id])
        found = {row[0] for row in rows}
        return sorted({id_ for id_ in ids if id_ not in found})

    def standing_alerts(self, url_ids: Sequence[str], resolved_since: float) -> list[DeliveryRow]:
        """The alerts firing now and the resolutions queued since ``resolved_since``, one row
        per delivery of each to one of ``url_ids`` (whatever its status)."""
        if not url_ids:
            return []
        rows = self._db.execute(
            f"""SELECT {DELIVERY_COLUMNS}
            FROM alerts a JOIN deliveries d ON d.alert_id = a.id
            WHERE a.id IN (
                SELECT alert_id FROM firing_alerts
                UNION ALL SELECT id FROM alerts WHERE created_at >= ? AND reason = 'resolved'
            ) AND d.url_id IN ({marks(url_ids)})
            ORDER BY a.id, d.id""",
            [resolved_since, *url_ids],
        ).fetchall()
        return [delivery_row(r) for r in rows]

    def pending_count(self) -> int:
        """Deliveries not yet sent nor given up (pending or being sent)."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM deliveries WHERE status IN ('pending', 'sending')"
        ).fetchone()
        return int(row[0])
