"""The PostgreSQL engine's schema: plain SQL files (``sql/postgresql/NNNN_name.sql``, shipped
with the package), applied in order at start-up.

``migrate`` runs the files a database has not seen, all in ONE transaction that first takes a
transaction-level advisory lock (``pg_advisory_xact_lock``): instances starting together queue
on the lock, and each one after the first finds the work done. PostgreSQL's DDL is
transactional, so a failed file leaves the database as it was. A database at a version newer
than this watcher knows is refused (``SchemaTooNewError``), as with SQLite.

The versions are the PostgreSQL engine's own (file 0001 holds what SQLite's migrations 1-5
make); ``schema_migrations`` has the same shape on both engines.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from importlib import resources

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from watcher.state.database import SchemaTooNewError

# The advisory lock's key: any constant that no other user of the database takes ("watcher"
# in ASCII, as a 64-bit integer).
MIGRATION_LOCK = 0x77_61_74_63_68_65_72

SCHEMA_MIGRATIONS = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version bigint PRIMARY KEY,
    applied_at double precision NOT NULL
)"""

_FILE_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> tuple[Migration, ...]:
    """The SQL files in version order; their numbers run 1, 2, ... without a gap."""
    folder = resources.files("watcher.state") / "sql" / "postgresql"
    found = []
    for entry in folder.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match is not None:
            found.append(Migration(int(match[1]), entry.name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"PostgreSQL migrations not numbered 1..n: {[m.name for m in found]}")
    return tuple(found)


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
        if current > len(known):
            raise SchemaTooNewError(
                f"the state database is at schema version {current}, newer than this watcher "
                f"knows ({len(known)}): upgrade the watcher or use another database"
            )
        for migration in known[current:]:
            await conn.execute(migration.sql.encode())  # several statements, no parameters
            await conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                [migration.version, time.time()],
            )
    return len(known) - current
