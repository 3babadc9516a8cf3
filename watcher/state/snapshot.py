"""What the state says right now, for ``/metrics``, ``/healthz`` and ``watcher status``: the
firing alerts, the outbox (pending, oldest pending, dead), each source's last round and the
intervals of the adaptive targets. The values both engines answer (``Store.summary``,
``Store.status``) and the SQLite engine's reads of them (``Snapshots``, a repository of
``SqliteStore``: plain queries, no clock); the PostgreSQL engine's are in
``watcher.state.pg_summary``."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from sqlite_utils import Database

from watcher.state.records import SourceRound, last_rounds

# The latest state transition of each (rule, subject) that is not a resolution, kept as such
# by the store (``firing_alerts``): read without looking at the rest of the history.
_FIRING = """
SELECT a.rule, a.subject, a.severity, a.title, a.created_at
FROM firing_alerts f JOIN alerts a ON a.id = f.alert_id
ORDER BY a.created_at DESC
"""
_PENDING = "SELECT COUNT(*), MIN(created_at) FROM deliveries WHERE status IN ('pending', 'sending')"
_DEAD = "SELECT COUNT(*) FROM deliveries WHERE status = 'dead'"
# One scan of the states, parsing only those that hold a cadence (the key as a parameter:
# ``$.<key>.interval`` and ``"<key>"``).
_INTERVALS = "SELECT json_extract(state, ?) FROM targets WHERE instr(state, ?) > 0"
# The targets whose watch began and whose first poll has not come (the partial index
# ``targets_awaiting``: as cheap as there are such targets, none once every one was polled),
# but those retention found named by no rule (a reload took them out before their first poll:
# nobody will poll them).
AWAITING = """SELECT t.source, COUNT(*), MIN(t.awaiting_since) FROM targets t
WHERE t.awaiting_since IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM unwatched_targets u WHERE u.source = t.source AND u.target = t.target
) GROUP BY t.source ORDER BY t.source"""


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


@dataclass(frozen=True)
class Awaiting:
    """The targets of one source whose watch began (``WatchSince``) and whose first poll has
    not come yet: how many, and when the oldest of them was asked for."""

    source: str
    targets: int
    oldest_since: float


# ``Store.summary``: what ``/metrics`` and ``/healthz`` show.
StateSummary = tuple[list[Firing], Outbox]


@dataclass(frozen=True)
class InstanceShards:
    """One live instance of ``watcher status``: its heartbeat and the shards it holds."""

    instance_id: str
    host: str
    pid: int
    started_at: float
    renewed_at: float
    shards: int


@dataclass(frozen=True)
class StoreStatus:
    """``Store.status``: what ``watcher status`` shows, read in one go."""

    firing: list[Firing]
    outbox: Outbox
    rounds: list[SourceRound]  # each source's last round of each instance
    # Several instances sharing the store (PostgreSQL): each live one with its shards, and how
    # many shards nobody holds. None: one process owns the store (SQLite).
    instances: list[InstanceShards] | None = None
    unheld_shards: int = 0
    # The current interval of each adaptive target, as stored in its state (None: not read).
    intervals: list[float] | None = None
    # The targets awaiting their first poll, per source (none: every one polled).
    awaiting: list[Awaiting] = field(default_factory=list)


class Snapshots:
    """What is true now in a SQLite file: ``summary``, ``status``, ``awaiting_first_poll``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def summary(self) -> StateSummary:
        return firing(self._db.conn), outbox(self._db.conn)

    def status(self, cadence_key: str) -> StoreStatus:
        conn = self._db.conn
        return StoreStatus(
            firing(conn),
            outbox(conn),
            last_rounds(conn),
            intervals=intervals(conn, cadence_key),
            awaiting=awaiting(conn),
        )

    def awaiting_first_poll(self) -> list[Awaiting]:
        return awaiting(self._db.conn)


def awaiting(conn: sqlite3.Connection) -> list[Awaiting]:
    return [Awaiting(str(s), int(n), float(t)) for s, n, t in conn.execute(AWAITING).fetchall()]


def intervals(conn: sqlite3.Connection, cadence_key: str) -> list[float]:
    """The positive intervals stored under ``cadence_key`` in the targets' states."""
    found = conn.execute(_INTERVALS, [f"$.{cadence_key}.interval", f'"{cadence_key}"'])
    return [float(value) for (value,) in found if isinstance(value, int | float) and value > 0]


def firing(conn: sqlite3.Connection) -> list[Firing]:
    return [Firing(*row) for row in conn.execute(_FIRING).fetchall()]


def outbox(conn: sqlite3.Connection) -> Outbox:
    # Two index range counts (deliveries by status), not a scan of every delivery kept.
    pending, oldest = conn.execute(_PENDING).fetchone()
    dead = conn.execute(_DEAD).fetchone()[0]
    return Outbox(int(pending or 0), oldest, int(dead or 0))
