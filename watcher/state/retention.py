"""Retention: the history older than ``retention`` is deleted, in bounded batches.

What goes, once it is older than the cutoff (now - retention):

- an alert with its deliveries, once every delivery is finished (sent or dead) and finished
  before the cutoff; an alert that is still firing (``firing_alerts``: the latest transition
  of its rule and subject, not a resolution) stays, and so does one with a delivery pending or
  being sent.
  Deliveries go only with their alert: an alert kept keeps every delivery it had;
- the digest groups' send times (``group_sends``) and silences that ended;
- the state of a target that no rule names any more, once unwatched for longer than
  retention: the daemon notes when it first found it unwatched (``unwatched_targets``), and one
  named again before then keeps its state (its cursor: changes meanwhile still alert).
  After that, it is a new target again: its first poll learns a baseline silently.

Each batch is one short transaction of at most ``limit`` rows, so a writer never waits long.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

from sqlite_utils import Database

from watcher.state.database import transaction

# Rows one transaction reads or deletes at most.
BATCH_ROWS = 1000

WatchedTarget = Callable[[str, str], bool]  # (source, target) -> named by a rule now


@dataclass
class Pruned:
    """What one pass deleted (and ``unwatched``: targets newly found named by no rule)."""

    alerts: int = 0
    deliveries: int = 0
    targets: int = 0
    unwatched: int = 0
    group_sends: int = 0
    silences: int = 0

    def add(self, other: Pruned) -> None:
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


# Alerts of one batch (keyset: created_at, id) that may go: every delivery finished before the
# cutoff, and not the latest transition of a rule and subject that is firing (the PostgreSQL
# engine's: ``watcher.state.pg_rows``).
_ALERTS_TO_DELETE = """
SELECT a.id FROM alerts a
WHERE a.created_at < :cutoff
    AND (a.created_at, a.id) > (:after_at, :after_id)
    AND (a.created_at, a.id) <= (:last_at, :last_id)
    AND NOT EXISTS (
        SELECT 1 FROM deliveries d
        WHERE d.alert_id = a.id AND NOT (
            (d.status = 'sent' AND d.sent_at < :cutoff)
            OR (d.status = 'dead' AND d.next_attempt_at < :cutoff)
        )
    )
    AND NOT EXISTS (
        SELECT 1 FROM firing_alerts f
        WHERE f.rule = a.rule AND f.subject = a.subject AND f.alert_id = a.id
    )
"""


def batch_bounds(
    cutoff: float, after: tuple[float, int], last: tuple[float, int]
) -> dict[str, float]:
    """The named parameters of the selection of the alerts that may go, for the batch after
    ``after`` up to ``last`` (both engines' ``prune_alerts``)."""
    return {
        "cutoff": cutoff,
        "after_at": after[0],
        "after_id": after[1],
        "last_at": last[0],
        "last_id": last[1],
    }


TargetKey = tuple[str, str]  # (source, target)


def sort_targets(
    rows: Iterable[Sequence[Any]], watched: WatchedTarget, now: float, cutoff: float
) -> tuple[list[tuple[str, str, float]], list[TargetKey], list[TargetKey]]:
    """What a batch of targets' rows ``(source, target, unwatched since or None, updated_at)``
    asks for (pure: both engines sort them so): the targets newly found unwatched, noted from
    ``now``; those watched again, their note dropped; and those to delete, unwatched and
    unwritten since before ``cutoff``."""
    found: list[tuple[str, str, float]] = []
    back: list[TargetKey] = []
    gone: list[TargetKey] = []
    for source, target, since, updated_at in rows:
        if watched(source, target):
            if since is not None:
                back.append((source, target))
        elif since is None:
            found.append((source, target, now))
        elif since < cutoff and updated_at < cutoff:
            gone.append((source, target))
    return found, back, gone


class Retention:
    """Deletes the history older than a cutoff, one bounded batch a call."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def prune_alerts(
        self, cutoff: float, after: tuple[float, int], limit: int = BATCH_ROWS
    ) -> tuple[Pruned, tuple[float, int] | None]:
        """One batch: of the next ``limit`` alerts created before ``cutoff`` (in order of
        creation, after ``after``), deletes those that may go with their deliveries. Returns
        what it deleted and where the next batch starts (None: no alert left to look at)."""
        conn = self._db.conn
        batch = conn.execute(
            "SELECT created_at, id FROM alerts WHERE created_at < ? AND (created_at, id) > (?, ?)"
            " ORDER BY created_at, id LIMIT ?",
            [cutoff, *after, limit],
        ).fetchall()
        if not batch:
            return Pruned(), None
        last = (float(batch[-1][0]), int(batch[-1][1]))
        with transaction(self._db):
            rows = conn.execute(_ALERTS_TO_DELETE, batch_bounds(cutoff, after, last))
            ids = [(row[0],) for row in rows]
            deliveries = conn.executemany("DELETE FROM deliveries WHERE alert_id = ?", ids)
            delivered = deliveries.rowcount
            alerts = conn.executemany("DELETE FROM alerts WHERE id = ?", ids).rowcount
        return Pruned(alerts=alerts, deliveries=delivered), (last if len(batch) == limit else None)

    def prune_targets(
        self,
        watched: WatchedTarget,
        now: float,
        cutoff: float,
        after: int,
        limit: int = BATCH_ROWS,
    ) -> tuple[Pruned, int | None]:
        """One batch of the next ``limit`` targets' rows (by rowid, after ``after``): a target no
        rule names is noted unwatched (from ``now``), deleted once unwatched and unwritten since
        before ``cutoff``; one named again is watched again. Returns what it did and where the
        next batch starts (None: done)."""
        rows = self._db.conn.execute(
            """SELECT t.rowid, t.source, t.target, u.since, t.updated_at
            FROM targets t LEFT JOIN unwatched_targets u USING (source, target)
            WHERE t.rowid > ? ORDER BY t.rowid LIMIT ?""",
            [after, limit],
        ).fetchall()
        found, back, gone = sort_targets([row[1:] for row in rows], watched, now, cutoff)
        done = Pruned(unwatched=len(found))
        if found or back or gone:
            conn = self._db.conn
            with transaction(self._db):
                conn.executemany(
                    "INSERT INTO unwatched_targets VALUES (?, ?, ?) ON CONFLICT DO NOTHING", found
                )
                for pairs in (back, gone):
                    conn.executemany(
                        "DELETE FROM unwatched_targets WHERE source = ? AND target = ?", pairs
                    )
                done.targets = conn.executemany(
                    "DELETE FROM targets WHERE source = ? AND target = ?", gone
                ).rowcount
        return done, (int(rows[-1][0]) if len(rows) == limit else None)

    def prune_small_tables(self, cutoff: float, limit: int = BATCH_ROWS) -> tuple[Pruned, bool]:
        """One batch of the digest groups' send times and the silences ended before
        ``cutoff``; whether any may be left."""
        conn = self._db.conn
        with transaction(self._db):
            sends = conn.execute(
                "DELETE FROM group_sends WHERE rowid IN "
                "(SELECT rowid FROM group_sends WHERE sent_at < ? LIMIT ?)",
                [cutoff, limit],
            ).rowcount
            silences = conn.execute(
                "DELETE FROM silences WHERE id IN (SELECT id FROM silences "
                "WHERE MIN(ends_at, COALESCE(expired_at, ends_at)) < ? LIMIT ?)",
                [cutoff, limit],
            ).rowcount
        return Pruned(group_sends=sends, silences=silences), max(sends, silences) == limit

    def prune_batches(
        self, watched: WatchedTarget, now: float, retention: float, limit: int = BATCH_ROWS
    ) -> Iterator[Pruned]:
        """A whole pass, one batch (one transaction) per step: yields each batch's counts, so
        that a caller can let other work run between them."""
        cutoff = now - retention
        after: tuple[float, int] | None = (-1.0, -1)
        while after is not None:
            done, after = self.prune_alerts(cutoff, after, limit)
            yield done
        rowid: int | None = 0
        while rowid is not None:
            done, rowid = self.prune_targets(watched, now, cutoff, rowid, limit)
            yield done
        more = True
        while more:
            done, more = self.prune_small_tables(cutoff, limit)
            yield done
