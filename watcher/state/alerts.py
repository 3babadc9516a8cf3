"""Alerts and their deliveries as rows: what every repository that queues alerts shares (a step's
alerts, dead-letter reports), and the small SQL helpers of the store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sqlite_utils import Database

from watcher.core.events import SILENCE_FACT, AlertMessage
from watcher.core.fastjson import encode_stored
from watcher.core.outbox_rows import ResolvedDestinations

# An alert's status follows from its deliveries (see ``watcher.core.outbox_rows.ALERT_STATUSES``).
REFRESH_ALERT_STATUS = """
UPDATE alerts SET status = (
    SELECT CASE
        WHEN COUNT(*) = 0 THEN 'silenced'
        WHEN SUM(status = 'sent') = COUNT(*) THEN 'sent'
        WHEN SUM(status = 'sent') > 0 THEN 'partial'
        WHEN SUM(status = 'dead') = COUNT(*) THEN 'dead'
        ELSE 'queued'
    END
    FROM deliveries WHERE deliveries.alert_id = alerts.id
)
WHERE id = ?
"""

_FIRING_NOW = """INSERT INTO firing_alerts (rule, subject, alert_id) VALUES (?, ?, ?)
    ON CONFLICT (rule, subject) DO UPDATE SET alert_id = MAX(alert_id, excluded.alert_id)"""
_RESOLVED_NOW = "DELETE FROM firing_alerts WHERE rule = ? AND subject = ? AND alert_id < ?"


class AlertRows:
    """Queues alerts with their deliveries, inside the caller's transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def insert_alerts(
        self,
        alerts: Sequence[AlertMessage],
        destinations: ResolvedDestinations,
        now: float,
    ) -> list[int]:
        new_ids: list[int] = []
        for alert in alerts:
            alert_id = self._insert_alert(alert, now)
            if alert_id is None:
                continue
            new_ids.append(alert_id)
            for destination in destinations.for_alert(alert):
                self._db.execute(
                    """INSERT INTO deliveries
                    (alert_id, channel, url_id, status, attempts, next_attempt_at, created_at)
                    VALUES (?, ?, ?, 'pending', 0, ?, ?)
                    ON CONFLICT (alert_id, url_id) DO NOTHING""",
                    [alert_id, destination.channel, destination.url_id, now, now],
                )
            self._db.execute(REFRESH_ALERT_STATUS, [alert_id])
        return new_ids

    def _insert_alert(self, alert: AlertMessage, now: float) -> int | None:
        row = self._db.execute(
            """INSERT INTO alerts
            (created_at, rule, severity, subject, reason, dedup_key, title, body, facts, status,
             group_key, grouping)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)
            ON CONFLICT (dedup_key) DO NOTHING
            RETURNING id""",
            alert_values(alert, now),
        ).fetchone()
        if row is None:
            return None
        alert_id = int(row[0])
        # What fires now (read at every /metrics scrape): the newest transition wins.
        if fires_now(alert):
            self._db.execute(_FIRING_NOW, [alert.rule, alert.subject, alert_id])
        elif alert.reason == "resolved":
            self._db.execute(_RESOLVED_NOW, [alert.rule, alert.subject, alert_id])
        return alert_id


def fires_now(alert: AlertMessage) -> bool:
    """Whether the alert becomes what fires now for its rule and subject (``firing_alerts``): a
    firing, or a repeat but one a silence muted. A muted repeat has no delivery: the firing it
    reminds of stays the one the Alertmanager re-posts read (its deliveries name the URLs), so
    that they resume when the silence ends."""
    return alert.reason == "firing" or (
        alert.reason == "repeat" and SILENCE_FACT not in alert.facts
    )


def alert_values(alert: AlertMessage, now: float) -> list[Any]:
    """An alert's row as stored, in the order of the columns ``created_at, rule, severity,
    subject, reason, dedup_key, title, body, facts, status, group_key, grouping`` without
    ``status`` (pure: both engines insert it)."""
    return [
        now,
        alert.rule,
        alert.severity,
        alert.subject,
        alert.reason,
        alert.dedup_key,
        alert.title,
        alert.body,
        to_json(alert.facts),
        alert.group_key,
        None if alert.grouping is None else to_json(asdict(alert.grouping)),
    ]


def marks(items: Sequence[Any] | dict[Any, Any]) -> str:
    return ", ".join("?" for _ in items)


def to_json(value: Any) -> str:
    # Compact and key-sorted: the same state always serialises to the same text.
    return encode_stored(value)


def same_state(new: Any, stored: Any) -> bool:
    """Whether a step's new state would store the same bytes as the stored one (a tuple and a
    list of the same items are the same JSON)."""
    # Equal values are the same JSON: the common case (a quiet poll) costs no serialising.
    return bool(new == stored) or to_json(new) == to_json(stored)
