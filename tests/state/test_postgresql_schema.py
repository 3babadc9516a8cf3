"""The PostgreSQL engine's schema (plain SQL files) on a real server: both engines end with the
same tables and columns (but the leases, PostgreSQL's alone); migrating is once, under a lock,
and refuses a newer schema."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import TupleRow

from watcher.state.migrations import SchemaTooNewError, SqlFile
from watcher.state.postgresql_schema import migrate, migrations, schema_version
from watcher.state.store import SqliteStore
from watcher.testing.postgres import Postgres

# SQLite's declared types (STRICT tables: exactly these) and what each is on PostgreSQL.
TYPES = {"TEXT": "text", "INTEGER": "bigint", "REAL": "double precision"}

# The tables of several instances sharing one database: none on SQLite.
POSTGRESQL_ONLY = ("instances", "shard_leases")

Column = tuple[str, str, bool, bool]  # name, type (PostgreSQL's name), NOT NULL, in the key
Tables = dict[str, list[Column]]
Indexes = dict[str, tuple[str, tuple[str, ...]]]  # name -> table, columns


@pytest.fixture
def database(postgres: Postgres) -> Iterator[str]:
    with postgres.database() as conninfo:
        yield conninfo


async def connect(conninfo: str) -> psycopg.AsyncConnection[TupleRow]:
    return await psycopg.AsyncConnection.connect(conninfo, autocommit=True)


def sqlite_schema(path: Path) -> tuple[Tables, Indexes]:
    with SqliteStore(path):
        pass
    conn = sqlite3.connect(path)
    try:
        tables: Tables = {}
        names = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        for (table,) in names:
            tables[table] = [
                (name, TYPES[type_], bool(notnull) or pk > 0, pk > 0)
                for _cid, name, type_, notnull, _default, pk in conn.execute(
                    f"PRAGMA table_info({table})"
                )
            ]
        indexes: Indexes = {}
        for name, table in conn.execute(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        ).fetchall():
            columns = tuple(row[2] for row in conn.execute(f"PRAGMA index_info({name})"))
            indexes[name] = (table, columns)
        return tables, indexes
    finally:
        conn.close()


async def postgresql_schema(conn: psycopg.AsyncConnection[TupleRow]) -> tuple[Tables, Indexes]:
    keys = await (
        await conn.execute(
            """SELECT k.table_name, k.column_name FROM information_schema.key_column_usage k
            JOIN information_schema.table_constraints c
                ON c.constraint_name = k.constraint_name AND c.table_schema = k.table_schema
            WHERE c.constraint_type = 'PRIMARY KEY' AND k.table_schema = 'public'"""
        )
    ).fetchall()
    in_key = set(keys)
    tables: Tables = {}
    for table, name, type_, nullable in await (
        await conn.execute(
            """SELECT table_name, column_name, data_type, is_nullable
            FROM information_schema.columns WHERE table_schema = 'public'
            ORDER BY table_name, ordinal_position"""
        )
    ).fetchall():
        tables.setdefault(table, []).append(
            (name, type_, nullable == "NO", (table, name) in in_key)
        )
    # The indexes made by CREATE INDEX (not those behind a primary key or a unique constraint).
    indexes: Indexes = {}
    for name, table, columns in await (
        await conn.execute(
            """SELECT i.relname, t.relname, array_agg(a.attname ORDER BY k.ord)
            FROM pg_index x
            JOIN pg_class i ON i.oid = x.indexrelid
            JOIN pg_class t ON t.oid = x.indrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = 'public'
            CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
            WHERE NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
            GROUP BY i.relname, t.relname"""
        )
    ).fetchall():
        indexes[name] = (table, tuple(columns))
    return tables, indexes


async def test_both_engines_end_with_the_same_tables_columns_and_indexes(
    database: str, tmp_path: Path
) -> None:
    conn = await connect(database)
    async with conn:
        assert await migrate(conn) == len(migrations())
        pg_tables, pg_indexes = await postgresql_schema(conn)
    sqlite_tables, sqlite_indexes = sqlite_schema(tmp_path / "watcher.db")
    # The leases are PostgreSQL's alone: one SQLite instance owns everything.
    assert sorted(pg_tables) == sorted([*sqlite_tables, *POSTGRESQL_ONLY])
    for table, columns in sqlite_tables.items():
        assert pg_tables[table] == columns, table
    assert pg_indexes == sqlite_indexes
    assert "deliveries" in pg_tables and "firing_alerts" in pg_tables  # a real comparison


async def test_migrating_again_changes_nothing_and_the_version_is_recorded(database: str) -> None:
    conn = await connect(database)
    async with conn:
        assert await schema_version(conn) == 0
        assert await migrate(conn) == len(migrations())
        assert await migrate(conn) == 0
        assert await schema_version(conn) == len(migrations())
        rows = await (await conn.execute("SELECT version FROM schema_migrations")).fetchall()
        assert [row[0] for row in rows] == [m.version for m in migrations()]


async def test_instances_starting_together_migrate_once(database: str) -> None:
    conns = [await connect(database) for _ in range(3)]
    try:
        applied = await asyncio.gather(*(migrate(conn) for conn in conns))
    finally:
        for conn in conns:
            await conn.close()
    assert sorted(applied) == [0, 0, len(migrations())]


async def test_a_schema_from_a_newer_watcher_is_refused_and_left_alone(database: str) -> None:
    conn = await connect(database)
    async with conn:
        await migrate(conn)
        newer = len(migrations()) + 1
        await conn.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, 0)", [newer]
        )
        with pytest.raises(SchemaTooNewError, match=f"schema version {newer}, newer"):
            await migrate(conn)
        assert await schema_version(conn) == newer


async def test_a_failing_migration_leaves_the_database_as_it_was(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from watcher.state import postgresql_schema

    broken = (*migrations(), SqlFile(2, "0002_broken.sql", "CREATE TABLE x ("))
    monkeypatch.setattr(postgresql_schema, "migrations", lambda: broken)
    conn = await connect(database)
    async with conn:
        with pytest.raises(psycopg.errors.SyntaxError):
            await migrate(conn)
        assert await schema_version(conn) == 0  # the first file rolled back with the broken one
        row = await (await conn.execute("SELECT to_regclass('alerts')")).fetchone()
        assert row == (None,)
