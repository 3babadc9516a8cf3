"""Silences: added, listed, read before each commit, expired."""

from __future__ import annotations

from dataclasses import astuple

from sqlite_utils import Database

from watcher.core.events import NewSilence, Silence
from watcher.state.database import transaction

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
