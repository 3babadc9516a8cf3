"""The records beside the targets' states on SQLite: each source's last round, the silences,
and the alert history with each alert's deliveries (``watcher alerts``, ``watcher status``).

A source's last round is one row per source and instance, written at the end of each sweep in
its own short transaction, read by ``Store.status``. Instances sharing a PostgreSQL database
each sweep their own shards: each has its own last round of a source. The SQLite engine is one
instance, named ``""``. Silences are added, listed, read before each commit and expired.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields, replace
from typing import Any

from sqlite_utils import Database

from watcher.core.events import AlertMessage, NewSilence, Silence
from watcher.core.outbox_rows import AlertRecord, DeliveryStatus
from watcher.state.alerts import marks
from watcher.state.database import transaction


@dataclass(frozen=True)
class SourceRound:
    source: str
    finished_at: float
    targets: int
    failed: int  # polls of the round that failed (not evidence)
    duration: float
    last_success_at: float | None  # None: kept from the row before (this round all failed)
    # The instance that ran it: the store that records a round writes its own ("" on SQLite).
    instance: str = ""


# The settings' and rules' last load (the start or a reload), kept as a round of this
# pseudo-source, one row per instance beside the sources': ``watcher status --health`` reads the
# store only, and must see a refused reload. The parentheses keep it apart from every source.
CONFIG_SOURCE = "(config)"


def config_round(ok: bool, at: float) -> SourceRound:
    """The load at ``at``, put in force (``ok``) or refused (one target, failed): a refused one
    keeps the instance's last successful load as ``last_success_at``."""
    return SourceRound(CONFIG_SOURCE, at, 1, 0 if ok else 1, 0.0, at if ok else None)


# The columns of a ``SourceRound``, in its fields' order (both engines read them so).
ROUND_COLUMNS = "source, finished_at, targets, failed, duration, last_success_at, instance"


def upsert_round(mark: str) -> str:
    """The upsert of a source's last round, one ``mark`` per column (``?``: SQLite, ``%s``:
    PostgreSQL) and the values of ``round_values``; a round that all failed keeps the
    instance's last success."""
    marks = ", ".join([mark] * len(fields(SourceRound)))
    return f"""INSERT INTO sources ({ROUND_COLUMNS}) VALUES ({marks})
            ON CONFLICT (source, instance) DO UPDATE SET finished_at = excluded.finished_at,
                targets = excluded.targets, failed = excluded.failed,
                duration = excluded.duration,
                last_success_at = COALESCE(excluded.last_success_at, sources.last_success_at)"""


def round_values(round_: SourceRound, instance: str) -> tuple[object, ...]:
    """``round_``'s values for ``upsert_round``, as run by ``instance``."""
    return astuple(replace(round_, instance=instance))


_UPSERT_ROUND = upsert_round("?")


def record_round(db: Database, round_: SourceRound) -> None:
    with transaction(db):
        db.execute(_UPSERT_ROUND, round_values(round_, ""))


def last_rounds(conn: sqlite3.Connection) -> list[SourceRound]:
    """Each source's last round of each instance."""
    rows = conn.execute(f"SELECT {ROUND_COLUMNS} FROM sources ORDER BY source, instance")
    return [SourceRound(*row) for row in rows.fetchall()]


SILENCE_COLUMNS = (
    "id, rule, subject, starts_at, ends_at, comment, created_by, created_at, expired_at"
)


class Silences:
    """The silences table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def add_silence(self, new: NewSilence, now: float) -> Silence:
        with transaction(self._db):
            row = self._db.execute(
                """INSERT INTO silences
                (rule, subject, starts_at, ends_at, comment, created_by, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id""",
                [*astuple(new), now],
            ).fetchone()
        return new.added(int(row[0]), now)

    def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        """Silences not ended yet (or every one with ``include_expired``), newest first."""
        where = "" if include_expired else "WHERE expired_at IS NULL AND ends_at > ?"
        rows = self._db.execute(
            f"SELECT {SILENCE_COLUMNS} FROM silences {where} ORDER BY id DESC",
            [] if include_expired else [now],
        ).fetchall()
        return [Silence(*r) for r in rows]

    def active_silences(self, now: float) -> list[Silence]:
        """The silences muting alerts at ``now`` (what the daemon reads before each commit)."""
        rows = self._db.execute(
            f"""SELECT {SILENCE_COLUMNS} FROM silences
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
