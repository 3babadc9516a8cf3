"""The alert history, each alert with the fate of its deliveries (``watcher alerts``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlite_utils import Database

from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import AlertRecord, DeliveryStatus
from watcher.state.alerts import marks
from watcher.state.source_rounds import SourceRound, record_round

# What both engines read for the history: an alert's row (``history_record``'s order) and each
# of its deliveries' (``alert_id`` first, then ``DeliveryStatus``'s fields).
HISTORY_ALERT_COLUMNS = (
    "id, created_at, rule, severity, subject, reason, dedup_key, title, body, facts, status"
)
HISTORY_DELIVERY_COLUMNS = "alert_id, channel, url_id, status, attempts, last_error, sent_at"


def history_record(
    alert: Sequence[Any], deliveries: Mapping[int, list[DeliveryStatus]]
) -> AlertRecord:
    """An alert's row (``HISTORY_ALERT_COLUMNS``) with its deliveries, as the history shows it."""
    return AlertRecord(
        id=alert[0],
        created_at=alert[1],
        alert=AlertMessage(
            rule=alert[2],
            severity=alert[3],
            subject=alert[4],
            reason=alert[5],
            dedup_key=alert[6],
            title=alert[7],
            body=alert[8],
            channels=(),
            facts=json.loads(alert[9]),
        ),
        status=alert[10],
        deliveries=tuple(deliveries[alert[0]]),
    )


class History:
    """The alerts as they were queued and delivered, and each source's last round."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        """The most recent alerts, newest first, each with its deliveries."""
        where, params = ("WHERE rule = ?", [rule]) if rule is not None else ("", [])
        alerts = self._db.execute(
            f"""SELECT {HISTORY_ALERT_COLUMNS}
            FROM alerts {where} ORDER BY created_at DESC, id DESC LIMIT ?""",
            [*params, limit],
        ).fetchall()
        by_alert: dict[int, list[DeliveryStatus]] = {a[0]: [] for a in alerts}
        if by_alert:
            for d in self._db.execute(
                f"""SELECT {HISTORY_DELIVERY_COLUMNS}
                FROM deliveries WHERE alert_id IN ({marks(by_alert)}) ORDER BY id""",
                list(by_alert),
            ).fetchall():
                by_alert[d[0]].append(DeliveryStatus(*d[1:]))
        return [history_record(a, by_alert) for a in alerts]

    def record_round(self, round_: SourceRound) -> None:
        """Upserts this instance's last round of a source, in its own transaction."""
        record_round(self._db, round_)
