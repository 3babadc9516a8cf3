"""Each engine's schema as plain SQL files, one folder per dialect, shipped with the package:
``sql/sqlite/`` and ``sql/postgresql/``, each file ``NNNN_name.sql``, numbered from 1 without a
gap. Append-only: never edit a file that has shipped, add the next one.

What both engines share to apply them: the files of a dialect in order (``sql_files``), which
of them a database at a version still needs (``pending``: refusing a database from a newer
watcher, ``SchemaTooNewError``), and the table recording the versions (``schema_migrations``,
the same shape on both). How a file is applied is the engine's: SQLite runs each file in its
own transaction with its version (``watcher.state.database.migrate``); PostgreSQL runs them all
in one transaction under an advisory lock (``watcher.state.postgresql_schema.migrate``)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal, TypeVar

from watcher.core.errors import StateUnusable

Dialect = Literal["sqlite", "postgresql"]

_FILE_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

M = TypeVar("M")


class SchemaTooNewError(StateUnusable):
    """The database was written by a newer watcher: refuse rather than guess."""


@dataclass(frozen=True)
class SqlFile:
    """One migration: its version, its file's name and its SQL."""

    version: int
    name: str
    sql: str


def sql_files(dialect: Dialect) -> tuple[SqlFile, ...]:
    """The dialect's SQL files in version order; their numbers run 1, 2, ... without a gap."""
    folder = resources.files("watcher.state") / "sql" / dialect
    found = []
    for entry in folder.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match is not None:
            found.append(SqlFile(int(match[1]), entry.name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{dialect} migrations not numbered 1..n: {[m.name for m in found]}")
    return tuple(found)


def too_new(version: int, known: int, elsewhere: str) -> str:
    """Why a database at ``version`` is refused; ``elsewhere``: what to use instead."""
    return (
        f"the state database is at schema version {version}, newer than this watcher "
        f"knows ({known}): upgrade the watcher or use another {elsewhere}"
    )


def pending(current: int, known: Sequence[M], elsewhere: str) -> Sequence[M]:
    """The migrations a database at version ``current`` has not seen, in order; a database
    from a newer watcher is refused (``elsewhere``: what to use instead, as ``too_new``)."""
    if current > len(known):
        raise SchemaTooNewError(too_new(current, len(known), elsewhere))
    return known[current:]


def sqlite_statements(script: str) -> list[str]:
    """A SQLite file's statements, each ending at the end of a line (``sqlite3`` runs one
    statement per call, and ``executescript`` would commit the transaction it runs in)."""
    statements: list[str] = []
    text = ""
    for line in script.splitlines(keepends=True):
        text += line
        if sqlite3.complete_statement(text):
            statements.append(text.strip())
            text = ""
    rest = [
        line for line in text.splitlines() if line.strip() and not line.strip().startswith("--")
    ]
    if rest:
        raise ValueError(f"an unfinished statement (no ';' at the end of a line): {rest[0]!r}")
    return statements
