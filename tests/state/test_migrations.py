"""The SQL files of both engines' schemas (``watcher.state.migrations``): found in order, and a
SQLite file split into its statements."""

from __future__ import annotations

import pytest

from watcher.state.migrations import SchemaTooNewError, pending, sql_files, sqlite_statements


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_each_dialect_has_its_files_numbered_from_one(dialect: str) -> None:
    files = sql_files("sqlite" if dialect == "sqlite" else "postgresql")
    assert [f.version for f in files] == list(range(1, len(files) + 1))
    assert files[0].name == "0001_initial.sql"
    assert "CREATE TABLE alerts" in files[0].sql


def test_a_sqlite_file_is_split_at_each_statements_end_comments_kept_with_the_next() -> None:
    script = "-- a table\nCREATE TABLE a (x TEXT);\nINSERT INTO a VALUES ('a;b');\n-- done\n"
    assert sqlite_statements(script) == [
        "-- a table\nCREATE TABLE a (x TEXT);",
        "INSERT INTO a VALUES ('a;b');",
    ]
    assert sqlite_statements("-- nothing to do\n") == []
    with pytest.raises(ValueError, match="unfinished statement"):
        sqlite_statements("CREATE TABLE a (x TEXT);\nCREATE TABLE b (\n")


def test_only_the_files_a_database_has_not_seen_are_pending() -> None:
    assert pending(1, ["one", "two", "three"], "database") == ["two", "three"]
    assert pending(3, ["one", "two", "three"], "database") == []
    with pytest.raises(SchemaTooNewError, match=r"version 4, newer .* another state_path"):
        pending(4, ["one", "two", "three"], "state_path")
