"""What the state database says right now, for ``/metrics``, ``/healthz`` and ``watcher status``:
the firing alerts, the outbox (pending, oldest pending, dead) and each source's last poll. Plain
read-only queries on a given connection; no clock (callers pass ``now``)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

# The latest state transition of each (rule, subject) that is not a resolution, kept as such
# by the store (``firing_alerts``): read without looking at the rest of the history.
_FIRING = """
SELECT a.rule, a.subject, a.severity, a.title, a.created_at
FROM firing_alerts f JOIN alerts a ON a.id = f.alert_id
ORDER BY a.created_at DESC
"""
# The same from the history, for a database the daemon has not upgraded yet.
_FIRING_FROM_HISTORY = """
SELECT a.rule, a.subject, a.severity, a.title, a.created_at
FROM alerts a JOIN (
    SELECT MAX(id) AS id FROM alerts WHERE reason IN ('firing', 'repeat', 'resolved')
    GROUP BY rule, subject
) latest ON latest.id = a.id
WHERE a.reason != 'resolved'
ORDER BY a.created_at DESC
"""

_PENDING = "SELECT COUNT(*), MIN(created_at) FROM deliveries WHERE status IN ('pending', 'sending')"
_DEAD = "SELECT COUNT(*) FROM deliveries WHERE status = 'dead'"


@dataclass(frozen=True)
class Firing:
    rule: str
    subject: str
    severity: str
    title: str
    since: float


@dataclass(frozen=True)
class Outbox:
    pending: int  # pending or being sent
    oldest_pending_at: float | None
    dead: int


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection that never creates nor migrates the database."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def firing(conn: sqlite3.Connection) -> list[Firing]:
    try:
        rows = conn.execute(_FIRING).fetchall()
    except sqlite3.OperationalError:  # no such table: written by an older watcher
        rows = conn.execute(_FIRING_FROM_HISTORY).fetchall()
    return [Firing(*row) for row in rows]


def outbox(conn: sqlite3.Connection) -> Outbox:
    # Two index range counts (deliveries by status), not a scan of every delivery kept.
    pending, oldest = conn.execute(_PENDING).fetchone()
    dead = conn.execute(_DEAD).fetchone()[0]
    return Outbox(int(pending or 0), oldest, int(dead or 0))


def read(path: Path) -> tuple[list[Firing], Outbox]:
    with closing(connect_readonly(path)) as conn:
        return firing(conn), outbox(conn)
