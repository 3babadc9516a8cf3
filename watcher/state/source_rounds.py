"""Each source's last round (``watcher status``): one row per source and instance, written at
the end of each sweep in its own short transaction, read by ``Store.status``. Instances
sharing a PostgreSQL database each sweep their own shards: each has its own last round of a
source. The SQLite engine is one instance, named ``""``."""

from __future__ import annotations

import sqlite3
from dataclasses import astuple, dataclass, fields, replace

from sqlite_utils import Database

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
