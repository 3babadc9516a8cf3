"""The store's errors: the SQLite engine maps its driver's errors at its boundary, so callers
catch ``StateError`` (transient or permanent) and never ``sqlite3.Error``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from watcher.core.errors import PermanentStateError, StateError, TransientStateError
from watcher.state.database import state_error
from watcher.state.interface import StepToCommit
from watcher.state.store import SqliteStore


def test_a_locked_database_is_a_transient_store_error_with_the_driver_error_as_cause(
    tmp_path: Path,
) -> None:
    path = tmp_path / "watcher.db"
    with SqliteStore(path) as store:
        store.db.conn.execute("PRAGMA busy_timeout = 10")
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(TransientStateError, match=r"^commit step: OperationalError") as e:
                store.commit_step(
                    StepToCommit.of("votes", "cluster", {"seen": 1}, [], lambda alert: [], 10.0)
                )
            assert isinstance(e.value.__cause__, sqlite3.OperationalError)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert store.load_state("votes", "cluster") is None  # rolled back: nothing written
        store.commit_step(
            StepToCommit.of("votes", "cluster", {"seen": 1}, [], lambda alert: [], 10.0)
        )
        assert store.load_state("votes", "cluster") == {"seen": 1}


def test_errors_met_while_pruning_batch_by_batch_are_store_errors(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "watcher.db") as store:
        store.db.execute("ALTER TABLE alerts RENAME TO gone")  # as a broken file would be
        batches = store.prune_batches(lambda source, target: True, 1000.0, 10.0)
        with pytest.raises(PermanentStateError, match=r"^prune batches: OperationalError"):
            next(batches)


def test_a_caller_names_the_work_that_failed_keeping_the_kind_and_the_cause() -> None:
    driver = sqlite3.OperationalError("database is locked")
    try:
        raise state_error(driver, "claim due") from driver
    except StateError as raised:
        error = raised.during("claim deliveries")
    assert type(error) is TransientStateError
    assert str(error) == "claim deliveries: OperationalError: database is locked"
    assert error.__cause__ is driver
