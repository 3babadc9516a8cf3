"""State in SQLite: per-target state documents, the alert history and the delivery outbox.

One connection, used only from the thread that opened it (the event loop's); every method is
one short transaction. A step's new state, its alerts and their deliveries are committed
together (``commit_step``), so a crash either loses the whole step (the cursor did not move:
the step is redone) or nothing (the deliveries wait in the outbox).

Apprise URLs hold tokens and passwords: the store only ever sees their ``url_id``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from watcher.alerting.events import AlertMessage, Grouping, TargetState
from watcher.alerting.silences import Silence
from watcher.delivery.outbox import (
    AlertRecord,
    DeliveryRow,
    DeliveryStatus,
    Destination,
    GroupSends,
)
from watcher.state.database import migrate, open_database, state_errors, transaction

# -- the store ----------------------------------------------------------------------------------

_DELIVERY_COLUMNS = """
    d.id, d.alert_id, d.channel, d.url_id, d.status, d.attempts, d.next_attempt_at,
    d.created_at, a.rule, a.severity, a.reason, a.title, a.body, a.subject, a.dedup_key,
    a.facts, a.group_key, a.grouping
"""
# max_per_hour looks back one rolling hour (watcher.delivery.digest); the newest send is always
# kept.
_GROUP_SENDS_KEPT_SECONDS = 3600.0
# How many rows one pass may claim in all, beyond its batch, to complete digest groups: keeps
# every "IN (...)" list far below SQLite's limit on parameters.
_CLAIM_CEILING = 5000

_SILENCE_COLUMNS = (
    "id, rule, subject, starts_at, ends_at, comment, created_by, created_at, expired_at"
)

# An alert's status follows from its deliveries (see ALERT_STATUSES).
_REFRESH_ALERT_STATUS = """
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


def _delivery_row(row: sqlite3.Row | tuple[Any, ...]) -> DeliveryRow:
    *plain, facts, group_key, grouping = row
    return replace(
        DeliveryRow(*plain),
        facts=json.loads(facts),
        group_key=group_key,
        grouping=None if grouping is None else Grouping(**json.loads(grouping)),
    )


class Store:
    """The watcher's SQLite state. Synchronous and fast; call it from one thread only."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        with state_errors(self.path):
            self._db = open_database(self.path)
            migrate(self._db)
        # Steps committed: a caller sees whether its work wrote anything (a health signal).
        self.commits = 0

    @property
    def db(self) -> Database:
        return self._db

    def close(self) -> None:
        self._db.close()

    def transaction(self) -> AbstractContextManager[None]:
        return transaction(self._db)

    # -- target state ---------------------------------------------------------------------
    def load_state(self, source: str, target: str) -> TargetState | None:
        row = self._db.execute(
            "SELECT state FROM targets WHERE source = ? AND target = ?", [source, target]
        ).fetchone()
        if row is None:
            return None
        state: TargetState = json.loads(row[0])
        return state

    def commit_step(
        self,
        source: str,
        target: str,
        state: TargetState,
        alerts: Sequence[AlertMessage],
        destinations: Callable[[AlertMessage], Sequence[Destination]],
        now: float,
    ) -> list[int]:
        """Save the target's new state, its alerts and their deliveries in ONE transaction.

        An alert whose ``dedup_key`` is already recorded is skipped with its deliveries (a
        step re-run after a crash repeats nothing). A URL listed twice for one alert (the same
        URL in two channels) gets one delivery. Returns the ids of the alerts inserted.
        """
        with transaction(self._db):
            self._db.execute(
                """INSERT INTO targets (source, target, state, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (source, target)
                DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at""",
                [source, target, _to_json(state), now],
            )
            new_ids = self._insert_alerts(alerts, destinations, now)
        self.commits += 1
        return new_ids

    def _insert_alerts(
        self,
        alerts: Sequence[AlertMessage],
        destinations: Callable[[AlertMessage], Sequence[Destination]],
        now: float,
    ) -> list[int]:
        new_ids: list[int] = []
        for alert in alerts:
            alert_id = self._insert_alert(alert, now)
            if alert_id is None:
                continue
            new_ids.append(alert_id)
            for destination in destinations(alert):
                self._db.execute(
                    """INSERT INTO deliveries
                    (alert_id, channel, url_id, status, attempts, next_attempt_at, created_at)
                    VALUES (?, ?, ?, 'pending', 0, ?, ?)
                    ON CONFLICT (alert_id, url_id) DO NOTHING""",
                    [alert_id, destination.channel, destination.url_id, now, now],
                )
            self._db.execute(_REFRESH_ALERT_STATUS, [alert_id])
        return new_ids

    def _insert_alert(self, alert: AlertMessage, now: float) -> int | None:
        row = self._db.execute(
            """INSERT INTO alerts
            (created_at, rule, severity, subject, reason, dedup_key, title, body, facts, status,
             group_key, grouping)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)
            ON CONFLICT (dedup_key) DO NOTHING
            RETURNING id""",
            [
                now,
                alert.rule,
                alert.severity,
                alert.subject,
                alert.reason,
                alert.dedup_key,
                alert.title,
                alert.body,
                _to_json(alert.facts),
                alert.group_key,
                None if alert.grouping is None else _to_json(asdict(alert.grouping)),
            ],
        ).fetchone()
        return None if row is None else int(row[0])

    # -- outbox ---------------------------------------------------------------------------
    def due_deliveries(
        self, now: float, limit: int = 100, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        """Pending deliveries whose time has come, oldest first (in the order they were queued),
        leaving out those to ``skip_urls`` (URLs whose worker is busy)."""
        rows = self._db.execute(
            f"""SELECT {_DELIVERY_COLUMNS}
            FROM deliveries d JOIN alerts a ON a.id = d.alert_id
            WHERE d.status = 'pending' AND d.next_attempt_at <= ?
                AND d.url_id NOT IN ({_marks(skip_urls)})
            ORDER BY d.id LIMIT ?""",
            [now, *skip_urls, limit],
        ).fetchall()
        return [_delivery_row(r) for r in rows]

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
                    f"UPDATE deliveries SET status = 'sending' WHERE id IN ({_marks(rows)})",
                    [r.id for r in rows],
                )
        return [replace(r, status="sending") for r in rows]

    def _complete_groups(
        self, rows: list[DeliveryRow], now: float, group_limit: int
    ) -> list[DeliveryRow]:
        claimed = {row.id: row for row in rows}
        groups = dict.fromkeys((r.group_key, r.url_id) for r in rows if r.group_key is not None)
        for group_key, url_id in groups:
            if len(claimed) >= _CLAIM_CEILING:
                break
            for found in self._db.execute(
                f"""SELECT {_DELIVERY_COLUMNS}
                FROM deliveries d JOIN alerts a ON a.id = d.alert_id
                WHERE d.status = 'pending' AND d.next_attempt_at <= ?
                    AND a.group_key = ? AND d.url_id = ?
                ORDER BY d.id LIMIT ?""",
                [now, group_key, url_id, group_limit],
            ).fetchall():
                row = _delivery_row(found)
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
                WHERE status = 'sending' AND id IN ({_marks(delivery_ids)})""",
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
    ) -> None:
        """Delivered (in one message). ``group`` (group_key, url_id): that message was of a
        digest group, remembered for its pacing."""
        with transaction(self._db):
            self._finish(
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
                    [*group, now - _GROUP_SENDS_KEPT_SECONDS],
                )

    def mark_retry(
        self, delivery_ids: int | Sequence[int], error: str, next_attempt_at: float
    ) -> None:
        with transaction(self._db):
            self._finish(
                delivery_ids,
                "status = 'pending', attempts = attempts + 1, last_error = ?, "
                "next_attempt_at = ?",
                [error, next_attempt_at],
            )

    def mark_dead(
        self,
        delivery_ids: int | Sequence[int],
        error: str,
        now: float,
        reports: Sequence[AlertMessage] = (),
        destinations: Callable[[AlertMessage], Sequence[Destination]] | None = None,
    ) -> None:
        """Given up; ``reports`` (alerts saying so, to ``destinations``) are queued in the same
        transaction, so a dead letter is reported exactly once."""
        with transaction(self._db):
            self._finish(
                delivery_ids,
                "status = 'dead', attempts = attempts + 1, last_error = ?, next_attempt_at = ?",
                [error, now],
            )
            if reports and destinations is not None:
                self._insert_alerts(reports, destinations, now)

    def _finish(
        self, delivery_ids: int | Sequence[int], assignments: str, params: list[Any]
    ) -> None:
        ids = [delivery_ids] if isinstance(delivery_ids, int) else list(delivery_ids)
        rows = self._db.execute(
            f"UPDATE deliveries SET {assignments} WHERE id IN ({_marks(ids)}) RETURNING alert_id",
            [*params, *ids],
        ).fetchall()
        if len(rows) != len(set(ids)):
            raise KeyError(f"no delivery among {ids}")
        for alert_id in sorted({row[0] for row in rows}):
            self._db.execute(_REFRESH_ALERT_STATUS, [alert_id])

    def pending_count(self) -> int:
        """Deliveries not yet sent nor given up (pending or being sent)."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM deliveries WHERE status IN ('pending', 'sending')"
        ).fetchone()
        return int(row[0])

    # -- silences -------------------------------------------------------------------------
    def add_silence(
        self,
        rule: str,
        subject: str | None,
        starts_at: float,
        ends_at: float,
        comment: str,
        created_by: str | None,
        now: float,
    ) -> Silence:
        with transaction(self._db):
            row = self._db.execute(
                """INSERT INTO silences
                (rule, subject, starts_at, ends_at, comment, created_by, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id""",
                [rule, subject, starts_at, ends_at, comment, created_by, now],
            ).fetchone()
        return Silence(int(row[0]), rule, subject, starts_at, ends_at, comment, created_by, now)

    def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        """Silences not ended yet (or every one with ``include_expired``), newest first."""
        where = "" if include_expired else "WHERE expired_at IS NULL AND ends_at > ?"
        rows = self._db.execute(
            f"SELECT {_SILENCE_COLUMNS} FROM silences {where} ORDER BY id DESC",
            [] if include_expired else [now],
        ).fetchall()
        return [Silence(*r) for r in rows]

    def active_silences(self, now: float) -> list[Silence]:
        """The silences muting alerts at ``now`` (what the daemon reads before each commit)."""
        rows = self._db.execute(
            f"""SELECT {_SILENCE_COLUMNS} FROM silences
            WHERE ends_at > ? AND starts_at <= ? AND expired_at IS NULL ORDER BY id""",
            [now, now],
        ).fetchall()
        return [Silence(*r) for r in rows]

    def expire_silence(self, silence_id: int, now: float) -> bool:
        """End a silence now; ``False`` when there is no such silence still running."""
        with transaction(self._db):
            cursor = self._db.execute(
                """UPDATE silences SET expired_at = ?
                WHERE id = ? AND expired_at IS NULL AND ends_at > ?""",
                [now, silence_id, now],
            )
        return int(cursor.rowcount) == 1

    # -- history --------------------------------------------------------------------------
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
                FROM deliveries WHERE alert_id IN ({_marks(by_alert)}) ORDER BY id""",
                list(by_alert),
            ).fetchall():
                by_alert[d[0]].append(DeliveryStatus(*d[1:]))
        return [
            AlertRecord(
                id=a[0],
                created_at=a[1],
                rule=a[2],
                severity=a[3],
                subject=a[4],
                reason=a[5],
                dedup_key=a[6],
                title=a[7],
                body=a[8],
                facts=json.loads(a[9]),
                status=a[10],
                deliveries=tuple(by_alert[a[0]]),
            )
            for a in alerts
        ]


def _marks(items: Sequence[Any] | dict[Any, Any]) -> str:
    return ", ".join("?" for _ in items)


def _to_json(value: Any) -> str:
    # Compact and key-sorted: the same state always serialises to the same bytes.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
