"""The alert history, each alert with the fate of its deliveries (``watcher alerts``)."""

from __future__ import annotations

import json

from sqlite_utils import Database

from watcher.alerting.events import AlertMessage
from watcher.delivery.outbox import AlertRecord, DeliveryStatus
from watcher.state.alerts import marks


class History:
    """Reads the alerts table."""

    _db: Database

    def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        """The most recent alerts, newest first, each with its deliveries."""
        where, params = ("WHERE rule = ?", [rule]) if rule is not None else ("", [])
        alerts = self._db.execute(
            f"""SELECT id, created_at, rule, severity, subject, reason, dedup_key, title, body,
                facts, status
            FROM alerts {where} ORDER BY created_at DESC, id DESC LIMIT ?""",
            [*params, limit],
        ).fetchall()
        by_alert: dict[int, list[DeliveryStatus]] = {a[0]: [] for a in alerts}
        if by_alert:
            for d in self._db.execute(
                f"""SELECT alert_id, channel, url_id, status, attempts, last_error, sent_at
                FROM deliveries WHERE alert_id IN ({marks(by_alert)}) ORDER BY id""",
                list(by_alert),
            ).fetchall():
                by_alert[d[0]].append(DeliveryStatus(*d[1:]))
        return [
            AlertRecord(
                id=a[0],
                created_at=a[1],
                alert=AlertMessage(
                    rule=a[2],
                    severity=a[3],
                    subject=a[4],
                    reason=a[5],
                    dedup_key=a[6],
                    title=a[7],
                    body=a[8],
                    channels=(),
                    facts=json.loads(a[9]),
                ),
                status=a[10],
                deliveries=tuple(by_alert[a[0]]),
            )
            for a in alerts
        ]
