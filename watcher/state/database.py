"""The SQLite file itself: opening it (WAL, foreign keys), real transactions, the schema with
its append-only migrations (the SQL files of ``sql/sqlite/``), and SQLite's errors mapped to the
store's (``watcher.core.errors``, as ``watcher.state.pg_errors`` maps PostgreSQL's). The
repositories of each concern (``targets``, ``deliveries``, ``records``: rounds, silences and
history, ``retention``, ``snapshot``) hold the queries on top of it; ``watcher.state.store``
holds one of each over the database it opens."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from sqlite_utils import Database

from watcher.core.errors import (
    PermanentStateError,
    StateError,
    StateUnusable,
    TransientStateError,
)
from watcher.state.migrations import (
    SchemaTooNewError,
    SqlFile,
    pending,
    sql_files,
    sqlite_statements,
    too_new,
)

__all__ = [
    "MIGRATIONS",
    "SchemaTooNewError",
    "StateUnusable",
    "migrate",
    "open_database",
    "open_readonly",
]

_T = TypeVar("_T")


# -- errors -------------------------------------------------------------------------------------
# Transient: locked or busy past the busy timeout, disk full, I/O error, out of memory,
# interrupted; anything else is permanent. Driver messages (sqlite3 gives no error code before
# Python 3.11's ``sqlite_errorname``) and SQLite result codes that clear by themselves: another
# process releases its lock, space is freed, a disk or NFS hiccup passes.
_TRANSIENT_CODES = frozenset(
    {
        "SQLITE_BUSY",
        "SQLITE_LOCKED",
        "SQLITE_FULL",
        "SQLITE_IOERR",
        "SQLITE_NOMEM",
        "SQLITE_INTERRUPT",
        "SQLITE_PROTOCOL",
    }
)
_TRANSIENT_TEXTS = (
    "locked",
    "busy",
    "disk is full",
    "disk i/o error",
    "out of memory",
    "interrupted",
    "unable to open database file",
)


def state_error(exc: sqlite3.Error, operation: str) -> StateError:
    """Classify a driver error: transient (retry with backoff) or permanent (stop)."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    text = str(exc).lower()
    transient = any(name.startswith(code) for code in _TRANSIENT_CODES) or (
        not name
        and isinstance(exc, sqlite3.OperationalError)
        and any(t in text for t in _TRANSIENT_TEXTS)
    )
    kind = TransientStateError if transient else PermanentStateError
    return kind(f"{type(exc).__name__}: {exc}", operation=operation)


@contextmanager
def mapped(operation: str) -> Iterator[None]:
    """Raises ``StateError`` (``state_error``) where the block raised ``sqlite3.Error``; the
    driver's error is its ``__cause__``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise state_error(exc, operation) from exc


def mapped_batches(operation: str, batches: Iterator[_T]) -> Iterator[_T]:
    """``batches`` with the errors met while iterating mapped as ``mapped`` does."""
    with mapped(operation):
        yield from batches


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
        return too_new(version, len(MIGRATIONS), "state_path")
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


# -- schema -------------------------------------------------------------------------------------
# The migrations are the SQL files of ``sql/sqlite/`` (``watcher.state.migrations``): append-only,
# each run in its own transaction together with the bump of the recorded version.


@dataclass(frozen=True)
class SqliteMigration:
    """One SQL file of ``sql/sqlite/``, run statement by statement on a database."""

    file: SqlFile

    def __call__(self, db: Database) -> None:
        for statement in sqlite_statements(self.file.sql):
            db.execute(statement)


Migration = Callable[[Database], None]
MIGRATIONS: tuple[Migration, ...] = tuple(SqliteMigration(f) for f in sql_files("sqlite"))


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
        conn = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
        )
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
        if not pending(current, migrations, "state_path"):
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
