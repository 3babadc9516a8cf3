"""The SQLite file itself: opening it (WAL, foreign keys), real transactions, and the schema
with its append-only migrations. The repositories of each concern (``targets``, ``deliveries``,
``silence_rows``, ``history``, ``retention``, ``source_rounds``, ``snapshot``) hold the queries
on top of it; ``watcher.state.store`` assembles them."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

from sqlite_utils import Database

from watcher.core.errors import StateUnusable
from watcher.state.shards import SHARDS

__all__ = [
    "MIGRATIONS",
    "SchemaTooNewError",
    "StateUnusable",
    "migrate",
    "open_database",
    "open_readonly",
]


class SchemaTooNewError(StateUnusable):
    """The database was written by a newer watcher: refuse rather than guess."""


@contextmanager
def state_errors(path: Path) -> Iterator[None]:
    """Turn what the file system and SQLite say about ``path`` into a ``StateUnusable``."""
    try:
        yield
    except StateUnusable as exc:
        raise type(exc)(f"{path}: {exc}") from None
    except sqlite3.Error as exc:
        raise StateUnusable(f"{path}: cannot use the state database: {exc}") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise StateUnusable(f"{path}: cannot use the state database: {reason}") from None


def state_path_problem(path: Path) -> str | None:
    """What stops the daemon from using ``path`` as its state database, or None. Creates and
    changes nothing: an existing database is opened read-only."""
    if path.is_dir():
        return "is a folder, expected a database file"
    folder = path.parent
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"cannot create its folder: {folder} is not a folder"
    if not path.exists():
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"cannot create it: the folder {folder} is not writable"
        return None
    if not os.access(path, os.R_OK | os.W_OK) or not os.access(folder, os.W_OK | os.X_OK):
        return "the database or its folder is not writable"
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            version = _recorded_version(conn)
    except sqlite3.Error as exc:
        return f"not a usable state database: {exc}"
    if version > len(MIGRATIONS):
        return _too_new(version, len(MIGRATIONS))
    return None


def _recorded_version(conn: sqlite3.Connection) -> int:
    """The schema version the file records; 0 for a file no watcher has set up."""
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if not has_table:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def _too_new(version: int, known: int) -> str:
    return (
        f"the state database is at schema version {version}, newer than this watcher "
        f"knows ({known}): upgrade the watcher or use another state_path"
    )


# -- schema -------------------------------------------------------------------------------------
# Migrations are plain SQL, append-only: never edit one that has shipped, add the next one.
# Each runs in its own transaction together with the bump of the recorded version.


def _migration_1_initial(db: Database) -> None:
    db.execute(
        """CREATE TABLE targets (
            source TEXT NOT NULL,
            target TEXT NOT NULL,
            state TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (source, target)
        ) STRICT"""
    )
    db.execute(
        """CREATE TABLE alerts (
            id INTEGER PRIMARY KEY,
            created_at REAL NOT NULL,
            rule TEXT NOT NULL,
            severity TEXT NOT NULL,
            subject TEXT NOT NULL,
            reason TEXT NOT NULL,
            dedup_key TEXT NOT NULL UNIQUE,
            title TEXT NOT NULL,
            body TEXT NOT NULL,
            facts TEXT NOT NULL,
            status TEXT NOT NULL
        ) STRICT"""
    )
    db.execute("CREATE INDEX alerts_rule_created ON alerts (rule, created_at)")
    db.execute("CREATE INDEX alerts_created ON alerts (created_at)")
    db.execute(
        """CREATE TABLE deliveries (
            id INTEGER PRIMARY KEY,
            alert_id INTEGER NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
            channel TEXT NOT NULL,
            url_id TEXT NOT NULL,
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL,
            last_error TEXT,
            sent_at REAL,
            created_at REAL NOT NULL,
            UNIQUE (alert_id, url_id)
        ) STRICT"""
    )
    db.execute("CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at)")


def _migration_2_silences(db: Database) -> None:
    db.execute(
        """CREATE TABLE silences (
            id INTEGER PRIMARY KEY,
            rule TEXT NOT NULL,
            subject TEXT,
            starts_at REAL NOT NULL,
            ends_at REAL NOT NULL,
            comment TEXT NOT NULL,
            created_by TEXT,
            created_at REAL NOT NULL,
            expired_at REAL
        ) STRICT"""
    )
    db.execute("CREATE INDEX silences_ends ON silences (ends_at)")


def _migration_3_digests(db: Database) -> None:
    # Event alerts carry their rule's grouping (NULL: sent alone); group_sends remembers when
    # each group last sent to each URL, for group_interval and max_per_hour.
    db.execute("ALTER TABLE alerts ADD COLUMN group_key TEXT")
    db.execute("ALTER TABLE alerts ADD COLUMN grouping TEXT")
    db.execute(
        """CREATE TABLE group_sends (
            group_key TEXT NOT NULL,
            url_id TEXT NOT NULL,
            sent_at REAL NOT NULL,
            alerts INTEGER NOT NULL
        ) STRICT"""
    )
    db.execute("CREATE INDEX group_sends_latest ON group_sends (group_key, url_id, sent_at)")


def _migration_4_sources(db: Database) -> None:
    db.execute(
        """CREATE TABLE sources (
            source TEXT PRIMARY KEY,
            finished_at REAL NOT NULL,
            targets INTEGER NOT NULL,
            failed INTEGER NOT NULL,
            duration REAL NOT NULL,
            last_success_at REAL
        ) STRICT"""
    )


def _migration_5_retention(db: Database) -> None:
    # What fires now: the latest transition of each rule and subject, when it is not a
    # resolution; kept with every alert insert (``AlertRows``). /metrics and /healthz read it
    # at every scrape, and retention keeps these alerts: the cost is the firing alerts', not the
    # history's.
    db.execute(
        """CREATE TABLE firing_alerts (
            rule TEXT NOT NULL,
            subject TEXT NOT NULL,
            alert_id INTEGER NOT NULL,
            PRIMARY KEY (rule, subject)
        ) STRICT"""
    )
    db.execute(
        """INSERT INTO firing_alerts (rule, subject, alert_id)
        SELECT a.rule, a.subject, a.id FROM alerts a JOIN (
            SELECT MAX(id) AS id FROM alerts WHERE reason IN ('firing', 'repeat', 'resolved')
            GROUP BY rule, subject
        ) latest ON latest.id = a.id
        WHERE a.reason != 'resolved'"""
    )
    # The outbox figures of /metrics and /healthz: pending and the oldest of them, dead.
    db.execute("CREATE INDEX deliveries_status_created ON deliveries (status, created_at)")
    # The targets the daemon found named by no rule, since when (a table of its own: the
    # targets table keeps its shape).
    db.execute(
        """CREATE TABLE unwatched_targets (
            source TEXT NOT NULL,
            target TEXT NOT NULL,
            since REAL NOT NULL,
            PRIMARY KEY (source, target)
        ) STRICT"""
    )


def _migration_6_shard_leases(db: Database) -> None:
    # Leased shards and instances' heartbeats, for several instances on one PostgreSQL: the
    # same tables as its 0002_shard_leases.sql. On SQLite one instance owns everything and reads
    # none of it.
    db.execute(
        """CREATE TABLE shard_leases (
            shard INTEGER PRIMARY KEY,
            owner TEXT,
            epoch INTEGER NOT NULL DEFAULT 0,
            expires_at REAL
        ) STRICT"""
    )
    db.execute(
        """WITH RECURSIVE n(shard) AS (SELECT 0 UNION ALL SELECT shard + 1 FROM n WHERE shard < ?)
        INSERT INTO shard_leases (shard) SELECT shard FROM n""",
        [SHARDS - 1],
    )
    db.execute(
        """CREATE TABLE instances (
            instance_id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            started_at REAL NOT NULL,
            renewed_at REAL NOT NULL
        ) STRICT"""
    )


def _migration_7_delivery_claims(db: Database) -> None:
    # Deliveries claimed under a token until an expiry, for several instances sharing a
    # PostgreSQL database (watcher.state.pg_deliveries). The SQLite engine, one process, leaves
    # them NULL: the columns exist so that both engines hold the same rows.
    db.execute("ALTER TABLE deliveries ADD COLUMN claim_token TEXT")
    db.execute("ALTER TABLE deliveries ADD COLUMN claim_expires_at REAL")
    db.execute("CREATE INDEX deliveries_claims ON deliveries (status, claim_expires_at)")


def _migration_8_sources_by_instance(db: Database) -> None:
    # Each instance's last round of each source (its 0004_sources_by_instance.sql): instances
    # sharing a PostgreSQL database each sweep their own shards. The SQLite engine is one
    # instance, "". A table of a new key: made anew.
    db.execute(
        """CREATE TABLE sources_by_instance (
            source TEXT NOT NULL,
            finished_at REAL NOT NULL,
            targets INTEGER NOT NULL,
            failed INTEGER NOT NULL,
            duration REAL NOT NULL,
            last_success_at REAL,
            instance TEXT NOT NULL,
            PRIMARY KEY (source, instance)
        ) STRICT"""
    )
    db.execute("INSERT INTO sources_by_instance SELECT *, '' FROM sources")
    db.execute("DROP TABLE sources")
    db.execute("ALTER TABLE sources_by_instance RENAME TO sources")


Migration = Callable[[Database], None]
MIGRATIONS: tuple[Migration, ...] = (
    _migration_1_initial,
    _migration_2_silences,
    _migration_3_digests,
    _migration_4_sources,
    _migration_5_retention,
    _migration_6_shard_leases,
    _migration_7_delivery_claims,
    _migration_8_sources_by_instance,
)


@contextmanager
def transaction(db: Database) -> Iterator[None]:
    """Group writes: BEGIN IMMEDIATE ... COMMIT, or ROLLBACK of everything on any exception.

    The connection runs with ``isolation_level=None`` (see ``open_database``), so the driver
    opens no implicit transaction of its own: these statements are the only transaction
    control. IMMEDIATE takes the write lock up front, so a concurrent reader (the ``alerts``
    command) cannot make the commit fail half-way. sqlite-utils' own methods nest inside as
    savepoints. Transactions do not nest: a nested call is a bug and raises.
    """
    conn = db.conn
    if conn.in_transaction:
        raise RuntimeError("transaction() does not nest")
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        _rollback(conn)
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def _rollback(conn: sqlite3.Connection) -> None:
    """Undo the open transaction, if any (SQLite ends some itself on a full disk or an I/O
    error). A failing ROLLBACK must not hide the error that caused it: that one propagates."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def open_database(path: Path | str) -> Database:
    """Open (creating its folder) a WAL database with foreign keys enforced."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Opened by one thread, used by another: the daemon's engine runs its calls on a thread
    # of its own (``AsyncSqliteStore``), one at a time.
    db = Database(sqlite3.connect(path, check_same_thread=False))
    db.conn.isolation_level = None
    db.execute("PRAGMA foreign_keys = ON")
    # A reader such as `watcher alerts` may hold the lock for a moment: wait a little rather
    # than fail. Writes are short, so this never waits long.
    db.execute("PRAGMA busy_timeout = 2000")
    db.enable_wal()
    # NORMAL is durable across application crashes in WAL mode; FULL only adds power-loss
    # durability of the last transactions at the cost of an fsync per commit.
    db.execute("PRAGMA synchronous = NORMAL")
    return db


def connect_readonly(path: Path | str) -> sqlite3.Connection:
    """A read-only connection to the state database, for the commands that only read it
    (``watcher alerts``, ``status``, ``silence list``): it never creates, upgrades or writes
    the file. Beside a running daemon it shares the WAL's ``-wal``/``-shm`` files, and makes
    them (empty) when no daemon runs, as any reader of a WAL database does.

    Raises ``StateUnusable`` (one line naming the file) for a missing file or a schema other
    than this watcher's: the reads below are written for exactly this schema, and upgrading
    is for ``watcher run`` alone (a newer command must not change the file under an older
    running daemon)."""
    path = Path(path)
    if not path.exists():  # mode=ro never creates it, but would only say "unable to open"
        raise StateUnusable(f"no state database at {path}: start `watcher run` first")
    with state_errors(path):
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            # The daemon's write or checkpoint may hold a lock for a moment: wait for it.
            conn.execute("PRAGMA busy_timeout = 2000")
            version = _recorded_version(conn)
        except BaseException:
            conn.close()
            raise
    try:
        require_schema(path, version)
    except StateUnusable:
        conn.close()
        raise
    return conn


def open_readonly(path: Path | str) -> Database:
    """``connect_readonly`` with sqlite-utils on top (it takes such a connection as it is)."""
    return Database(connect_readonly(path))


def require_schema(path: Path, version: int) -> None:
    """Refuse, in one line naming ``path``, a schema version other than this watcher's."""
    known = len(MIGRATIONS)
    if version == known:
        return
    if version == 0:
        raise StateUnusable(
            f"state database {path} has no watcher schema yet: start `watcher run` first"
        )
    if version > known:
        raise SchemaTooNewError(
            f"state database {path} was written by a newer watcher (schema {version}; this "
            f"one knows {known}): upgrade watcher"
        )
    raise StateUnusable(
        f"state database {path} has an older schema ({version}; this watcher's is {known}): "
        "restart `watcher run` with this version first, it upgrades the schema"
    )


def schema_version(db: Database) -> int:
    if "schema_migrations" not in db.table_names():
        return 0
    row = db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def migrate(db: Database, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Apply the migrations the database has not seen yet, in order; returns how many ran.

    Each migration runs in its own transaction with the bump of the version, which is read
    again under the write lock: two processes starting together cannot apply one twice.
    """
    applied = 0
    while True:
        current = schema_version(db)
        if current > len(migrations):
            raise SchemaTooNewError(_too_new(current, len(migrations)))
        if current == len(migrations):
            return applied
        with transaction(db):
            db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, applied_at REAL NOT NULL) STRICT"
            )
            if schema_version(db) != current:
                continue  # another process got there first: look again
            migrations[current](db)
            db.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                [current + 1, time.time()],
            )
        applied += 1
