"""The PostgreSQL engine's schema: plain SQL files (``sql/postgresql/NNNN_name.sql``, shipped
with the package), applied in order at start-up.

``migrate`` runs the files a database has not seen, all in ONE transaction that first takes a
transaction-level advisory lock (``pg_advisory_xact_lock``): instances starting together queue
on the lock, and each one after the first finds the work done. PostgreSQL's DDL is
transactional, so a failed file leaves the database as it was. A database at a version newer
than this watcher knows is refused (``SchemaTooNewError``), as with SQLite.

The files and what the engines share to apply them are ``watcher.state.migrations``'. The
versions are the PostgreSQL engine's own (file 0001 holds what SQLite's migrations 1-5 make);
``schema_migrations`` has the same shape on both engines.
"""

from __future__ import annotations

import time

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from watcher.state.migrations import SqlFile, pending, sql_files

# The advisory lock's key: any constant that no other user of the database takes ("watcher"
# in ASCII, as a 64-bit integer).
MIGRATION_LOCK = 0x77_61_74_63_68_65_72

SCHEMA_MIGRATIONS = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version bigint PRIMARY KEY,
    applied_at double precision NOT NULL
)"""


def migrations() -> tuple[SqlFile, ...]:
    """The SQL files of ``sql/postgresql/`` in version order."""
    return sql_files("postgresql")


async def schema_version(conn: AsyncConnection[TupleRow]) -> int:
    """The version the database records; 0 for one no watcher has set up."""
    cursor = await conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
    row = await cursor.fetchone()
    if row is None or not row[0]:
        return 0
    cursor = await conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
    row = await cursor.fetchone()
    return int(row[0]) if row is not None else 0


async def migrate(conn: AsyncConnection[TupleRow]) -> int:
    """Apply the files the database has not seen, in one transaction under the advisory lock;
    returns how many ran (0 when another instance got there first)."""
    known = migrations()
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
        await conn.execute(SCHEMA_MIGRATIONS)
        current = await schema_version(conn)
        for migration in pending(current, known, "database"):
            await conn.execute(migration.sql.encode())  # several statements, no parameters
            await conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                [migration.version, time.time()],
            )
    return len(known) - current
