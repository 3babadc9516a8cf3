from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlite_utils import Database

from watcher.core.errors import PermanentStateError
from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import DeadLetterReports, Destination
from watcher.state.database import (
    MIGRATIONS,
    SchemaTooNewError,
    migrate,
    open_database,
    schema_version,
    transaction,
)
from watcher.state.interface import GiveUp, StepToCommit
from watcher.state.store import SqliteStore

OPS = Destination("ops", "json://user:SECRETPW1@127.0.0.1:9/?-token=SECRETTOKEN42")
MAIL = Destination("ops", "mailto://127.0.0.1:9?from=w@example.com&to=SECRETBOX99@example.com")


def alert(key: str = "r|subj|1|event", rule: str = "r", **changes: Any) -> AlertMessage:
    values: dict[str, Any] = {
        "rule": rule,
        "severity": "warning",
        "subject": "subj",
        "reason": "event",
        "dedup_key": key,
        "title": f"title {key}",
        "body": f"body {key}",
        "channels": ("ops",),
        "facts": {"n": 1},
    }
    values.update(changes)
    return AlertMessage(**values)


def to(*destinations: Destination) -> Any:
    return lambda _alert: list(destinations)


def count(store: SqliteStore, table: str) -> int:
    return int(store.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


# -- opening and migrations -----------------------------------------------------------------


def test_a_fresh_database_gets_every_table_in_wal_mode_with_foreign_keys(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "new" / "folder" / "watcher.db")
    try:
        assert (tmp_path / "new" / "folder" / "watcher.db").exists()
        assert {"targets", "alerts", "deliveries", "schema_migrations"} <= set(
            store.db.table_names()
        )
        assert schema_version(store.db) == len(MIGRATIONS)
        assert store.db.journal_mode == "wal"
        assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        with pytest.raises(sqlite3.IntegrityError):
            store.db.execute(
                "INSERT INTO deliveries (alert_id, channel, url_id, status, next_attempt_at, "
                "created_at) VALUES (999, 'ops', 'x', 'pending', 0, 0)"
            )
    finally:
        store.close()


def test_migrate_on_a_migrated_database_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "watcher.db"
    SqliteStore(path).close()
    db = open_database(path)
    schema = db.schema
    assert migrate(db) == 0
    assert db.schema == schema
    assert schema_version(db) == len(MIGRATIONS)
    db.close()
    SqliteStore(path).close()  # reopening is fine too


def _add_note_column(db: Database) -> None:
    db.execute("ALTER TABLE alerts ADD COLUMN note TEXT")


def test_migrate_applies_only_the_migrations_a_database_has_not_seen(tmp_path: Path) -> None:
    db = open_database(tmp_path / "watcher.db")
    assert migrate(db, MIGRATIONS) == len(MIGRATIONS)
    db.execute(
        "INSERT INTO targets (source, target, state, updated_at) VALUES ('s', 't', '{}', 1.0)"
    )
    assert migrate(db, [*MIGRATIONS, _add_note_column]) == 1
    assert schema_version(db) == len(MIGRATIONS) + 1
    assert "note" in db["alerts"].columns_dict
    assert db.execute("SELECT state FROM targets").fetchall() == [("{}",)]
    assert migrate(db, [*MIGRATIONS, _add_note_column]) == 0
    db.close()


def test_a_failing_migration_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    db = open_database(tmp_path / "watcher.db")
    migrate(db)

    def half_done(db: Database) -> None:
        db.execute("CREATE TABLE extra (x TEXT)")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        migrate(db, [*MIGRATIONS, half_done])
    assert "extra" not in db.table_names()
    assert schema_version(db) == len(MIGRATIONS)
    db.close()


def test_a_database_from_a_newer_watcher_is_refused(tmp_path: Path) -> None:
    db = open_database(tmp_path / "watcher.db")
    migrate(db, [*MIGRATIONS, _add_note_column])
    db.close()
    with pytest.raises(SchemaTooNewError, match="newer than this watcher"):
        SqliteStore(tmp_path / "watcher.db")


def _old_lease_tables(db: Database) -> None:
    """What version 6 of the watcher before made in a SQLite file too: the PostgreSQL engine's
    lease tables, with a row each."""
    db.execute("CREATE TABLE shard_leases (shard INTEGER PRIMARY KEY, owner TEXT) STRICT")
    db.execute("INSERT INTO shard_leases (shard) VALUES (0)")
    db.execute("CREATE TABLE instances (instance_id TEXT PRIMARY KEY) STRICT")
    db.execute("INSERT INTO instances VALUES ('a')")


SQLITE_TABLES = {
    "targets",
    "alerts",
    "deliveries",
    "silences",
    "group_sends",
    "sources",
    "firing_alerts",
    "unwatched_targets",
    "schema_migrations",
}


def test_a_new_database_holds_only_the_sqlite_engines_tables(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "watcher.db") as store:
        assert set(store.db.table_names()) == SQLITE_TABLES


def test_a_database_of_the_watcher_before_upgrades_and_loses_the_lease_tables(
    tmp_path: Path,
) -> None:
    path = tmp_path / "watcher.db"
    db = open_database(path)
    # Versions 1 to 8 as that watcher left them: version 6 had made the lease tables.
    migrate(db, [*MIGRATIONS[:5], _old_lease_tables, *MIGRATIONS[6:8]])
    db.execute(
        "INSERT INTO targets (source, target, state, updated_at) VALUES ('s', 't', '{}', 1.0)"
    )
    assert {"shard_leases", "instances"} <= set(db.table_names())
    db.close()
    with SqliteStore(path) as store:
        assert schema_version(store.db) == len(MIGRATIONS) > 8
        assert set(store.db.table_names()) == SQLITE_TABLES
        assert store.load_state("s", "t") == {}
        fresh = open_database(tmp_path / "fresh.db")
        migrate(fresh)
        assert store.db.schema == fresh.schema
        fresh.close()


def test_transaction_rolls_back_every_write_when_one_fails(tmp_path: Path) -> None:
    path = tmp_path / "watcher.db"
    store = SqliteStore(path)
    with pytest.raises(ZeroDivisionError), store.transaction():
        store.db.execute(
            "INSERT INTO targets (source, target, state, updated_at) VALUES ('s', 'a', '{}', 1.0)"
        )
        store.db.table("targets").insert(
            {"source": "s", "target": "b", "state": "{}", "updated_at": 1}
        )
        _ = 1 / 0
    assert count(store, "targets") == 0
    with store.transaction():
        store.db.execute(
            "INSERT INTO targets (source, target, state, updated_at) VALUES ('s', 'a', '{}', 1.0)"
        )
        store.db.execute(
            "INSERT INTO targets (source, target, state, updated_at) VALUES ('s', 'b', '{}', 1.0)"
        )
    store.close()
    reopened = SqliteStore(path)
    assert count(reopened, "targets") == 2
    reopened.close()


def test_transactions_do_not_nest(tmp_store: SqliteStore) -> None:
    with tmp_store.transaction(), pytest.raises(RuntimeError, match="does not nest"):  # noqa: SIM117
        with transaction(tmp_store.db):
            pass


# -- commit_step ----------------------------------------------------------------------------


def test_commit_step_saves_state_alerts_and_one_delivery_per_destination(
    tmp_store: SqliteStore,
) -> None:
    state = {"cursor": "sig9", "seen": [1, 2]}
    ids = tmp_store.commit_step(
        StepToCommit.of("signatures", "addr1", state, [alert()], to(OPS, MAIL), now=50.0)
    )
    assert len(ids) == 1
    assert tmp_store.load_state("signatures", "addr1") == state
    assert tmp_store.load_state("signatures", "other") is None
    due = tmp_store.due_deliveries(now=50.0)
    assert [(d.alert_id, d.channel, d.url_id, d.status, d.attempts) for d in due] == [
        (ids[0], "ops", OPS.url_id, "pending", 0),
        (ids[0], "ops", MAIL.url_id, "pending", 0),
    ]
    stored = due[0].alert
    assert (stored.title, stored.body, stored.severity, stored.rule) == (
        "title r|subj|1|event",
        "body r|subj|1|event",
        "warning",
        "r",
    )
    [record] = tmp_store.history()
    assert record.status == "queued"
    assert record.alert.facts == {"n": 1}
    assert tmp_store.pending_count() == 2


def test_commit_step_updates_the_state_of_a_known_target(tmp_store: SqliteStore) -> None:
    tmp_store.commit_step(StepToCommit.of("s", "t", {"v": 1}, [], to(), now=1.0))
    tmp_store.commit_step(StepToCommit.of("s", "t", {"v": 2}, [], to(), now=2.0))
    assert tmp_store.load_state("s", "t") == {"v": 2}
    assert count(tmp_store, "targets") == 1


def test_an_error_in_destinations_rolls_back_the_state_too(tmp_store: SqliteStore) -> None:
    tmp_store.commit_step(StepToCommit.of("s", "t", {"v": 1}, [], to(), now=1.0))

    def broken(message: AlertMessage) -> Sequence[Destination]:
        raise LookupError("no such channel")

    with pytest.raises(LookupError):
        tmp_store.commit_step(StepToCommit.of("s", "t", {"v": 2}, [alert()], broken, now=2.0))
    assert tmp_store.load_state("s", "t") == {"v": 1}
    assert count(tmp_store, "alerts") == 0
    assert count(tmp_store, "deliveries") == 0


def test_an_insert_failing_midway_rolls_back_the_earlier_inserts(tmp_store: SqliteStore) -> None:
    tmp_store.commit_step(StepToCommit.of("s", "t", {"v": 1}, [], to(), now=1.0))
    good = alert("k1")
    unstorable = alert("k2", facts={"when": object()})
    with pytest.raises(TypeError):
        tmp_store.commit_step(
            StepToCommit.of("s", "t", {"v": 2}, [good, unstorable], to(OPS), now=2.0)
        )
    assert tmp_store.load_state("s", "t") == {"v": 1}
    assert count(tmp_store, "alerts") == 0
    assert count(tmp_store, "deliveries") == 0
    # The store is usable afterwards: the failed transaction did not stay open.
    assert (
        tmp_store.commit_step(StepToCommit.of("s", "t", {"v": 3}, [good], to(OPS), now=3.0)) != []
    )


def test_a_rerun_step_repeats_no_alert_and_no_delivery(tmp_store: SqliteStore) -> None:
    first = tmp_store.commit_step(
        StepToCommit.of("s", "t", {"v": 1}, [alert("k1")], to(OPS), now=1.0)
    )
    again = tmp_store.commit_step(
        StepToCommit.of("s", "t", {"v": 2}, [alert("k1"), alert("k2")], to(OPS), now=2.0)
    )
    assert len(first) == 1
    assert len(again) == 1 and again[0] != first[0]
    assert [r.alert.dedup_key for r in tmp_store.history()] == ["k2", "k1"]
    assert count(tmp_store, "deliveries") == 2
    assert tmp_store.load_state("s", "t") == {"v": 2}


def test_one_url_in_two_channels_gets_one_delivery(tmp_store: SqliteStore) -> None:
    same_url = Destination("oncall", OPS.url)
    tmp_store.commit_step(StepToCommit.of("s", "t", {}, [alert()], to(OPS, same_url), now=1.0))
    assert [d.channel for d in tmp_store.due_deliveries(now=1.0)] == ["ops"]


def test_no_url_or_secret_reaches_the_database_files(
    tmp_path: Path, sqlite_file_bytes: Callable[[Path], bytes]
) -> None:
    path = tmp_path / "watcher.db"
    store = SqliteStore(path)
    store.commit_step(StepToCommit.of("s", "t", {}, [alert()], to(OPS, MAIL), now=1.0))
    [row, _] = store.due_deliveries(now=1.0)
    store.mark_retry(row.id, "error=500", next_attempt_at=5.0)
    content = sqlite_file_bytes(path)
    assert OPS.url_id.encode() in content  # what is stored instead
    for secret in (b"SECRETPW1", b"SECRETTOKEN42", b"SECRETBOX99", b"json://", b"mailto://"):
        assert secret not in content
    store.close()


# -- the outbox -----------------------------------------------------------------------------


def test_due_deliveries_are_the_pending_ones_whose_time_has_come_oldest_first(
    tmp_store: SqliteStore,
) -> None:
    tmp_store.commit_step(StepToCommit.of("s", "t", {}, [alert("k1")], to(OPS), now=10.0))
    tmp_store.commit_step(StepToCommit.of("s", "u", {}, [alert("k2")], to(OPS), now=20.0))
    first, second = tmp_store.due_deliveries(now=20.0)
    assert tmp_store.due_deliveries(now=15.0) == [first]
    tmp_store.mark_retry(first.id, "refused", next_attempt_at=30.0)
    assert tmp_store.due_deliveries(now=29.0) == [second]
    assert [d.id for d in tmp_store.due_deliveries(now=30.0)] == [first.id, second.id]
    assert tmp_store.due_deliveries(now=30.0, limit=1)[0].attempts == 1


def test_claimed_deliveries_are_not_due_until_released_or_requeued(tmp_store: SqliteStore) -> None:
    tmp_store.commit_step(
        StepToCommit.of("s", "t", {}, [alert("k1"), alert("k2")], to(OPS), now=1.0)
    )
    claimed = tmp_store.claim_due(now=1.0)
    assert [d.status for d in claimed] == ["sending", "sending"]
    assert tmp_store.claim_due(now=1.0) == []
    assert tmp_store.pending_count() == 2
    tmp_store.release([claimed[1].id], not_before=9.0)
    assert tmp_store.due_deliveries(now=8.0) == []
    assert [d.id for d in tmp_store.due_deliveries(now=9.0)] == [claimed[1].id]
    assert tmp_store.requeue_interrupted() == 1
    assert [d.id for d in tmp_store.due_deliveries(now=9.0)] == [d.id for d in claimed]


def test_alert_status_follows_its_deliveries(tmp_store: SqliteStore) -> None:
    [both, one] = tmp_store.commit_step(
        StepToCommit.of("s", "t", {}, [alert("k1"), alert("k2")], to(OPS, MAIL), now=1.0)
    )
    rows = {(d.alert_id, d.url_id): d.id for d in tmp_store.due_deliveries(now=1.0)}

    def status(alert_id: int) -> str:
        return next(r.status for r in tmp_store.history() if r.id == alert_id)

    tmp_store.mark_sent(rows[both, OPS.url_id], now=2.0)
    assert status(both) == "partial"
    tmp_store.mark_sent(rows[both, MAIL.url_id], now=2.0)
    assert status(both) == "sent"
    tmp_store.mark_dead(GiveUp(rows[one, OPS.url_id], "gone", now=2.0))
    assert status(one) == "queued"
    tmp_store.mark_dead(GiveUp(rows[one, MAIL.url_id], "gone", now=2.0))
    assert status(one) == "dead"
    assert tmp_store.pending_count() == 0


def test_a_mark_on_a_deleted_delivery_names_it_and_marks_the_others(tmp_store: SqliteStore) -> None:
    [gone, kept] = tmp_store.commit_step(
        StepToCommit.of("s", "t", {}, [alert("k1"), alert("k2")], to(OPS), now=1.0)
    )
    rows = {d.alert_id: d.id for d in tmp_store.due_deliveries(now=1.0)}
    with closing(sqlite3.connect(tmp_store.path)) as other, other:  # as by hand
        other.execute("DELETE FROM deliveries WHERE id = ?", [rows[gone]])

    assert tmp_store.mark_sent([rows[gone], rows[kept]], now=2.0) == [rows[gone]]
    assert {r.id: r.status for r in tmp_store.history()}[kept] == "sent"
    assert tmp_store.mark_retry(rows[gone], "refused", next_attempt_at=9.0) == [rows[gone]]
    letter = alert("dead|1", channels=("ops",))
    reports = DeadLetterReports.of({rows[gone]: letter}, to(OPS))
    assert tmp_store.mark_dead(GiveUp(rows[gone], "gone", 2.0, reports)) == [rows[gone]]
    assert count(tmp_store, "alerts") == 2  # no dead letter for a delivery that is gone


def test_an_alert_without_destination_is_recorded_as_silenced(tmp_store: SqliteStore) -> None:
    [alert_id] = tmp_store.commit_step(
        StepToCommit.of("s", "t", {}, [alert(channels=())], to(), now=1.0)
    )
    [record] = tmp_store.history()
    assert (record.id, record.status, record.deliveries) == (alert_id, "silenced", ())


def test_history_is_newest_first_filtered_and_summarises_deliveries(tmp_store: SqliteStore) -> None:
    tmp_store.commit_step(
        StepToCommit.of("s", "a", {}, [alert("k1", rule="whales")], to(OPS), now=1.0)
    )
    tmp_store.commit_step(
        StepToCommit.of("s", "b", {}, [alert("k2", rule="treasury")], to(OPS, MAIL), now=2.0)
    )
    tmp_store.commit_step(
        StepToCommit.of("s", "c", {}, [alert("k3", rule="whales")], to(OPS), now=3.0)
    )
    due = tmp_store.due_deliveries(now=3.0)
    [ops_row, mail_row] = [d for d in due if d.alert.rule == "treasury"]
    tmp_store.mark_sent(ops_row.id, now=4.0)
    tmp_store.mark_retry(mail_row.id, "Failed to send: error=500.", next_attempt_at=9.0)

    assert [r.alert.dedup_key for r in tmp_store.history()] == ["k3", "k2", "k1"]
    assert [r.alert.dedup_key for r in tmp_store.history(limit=2)] == ["k3", "k2"]
    assert [r.alert.dedup_key for r in tmp_store.history(rule="whales")] == ["k3", "k1"]
    [treasury] = tmp_store.history(rule="treasury")
    assert treasury.status == "partial"
    assert [
        (d.url_id, d.status, d.attempts, d.last_error, d.sent_at) for d in treasury.deliveries
    ] == [
        (OPS.url_id, "sent", 1, None, 4.0),
        (MAIL.url_id, "pending", 1, "Failed to send: error=500.", None),
    ]
    as_dict = treasury.as_dict()
    assert as_dict["deliveries"][0]["status"] == "sent"
    assert as_dict["facts"] == {"n": 1}


def test_the_store_is_a_context_manager_that_closes_the_file(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "watcher.db") as store:
        store.commit_step(
            StepToCommit.of("votes", "cluster", {"seen": 1}, [], lambda alert: [], 10.0)
        )
        assert store.load_state("votes", "cluster") == {"seen": 1}
    with pytest.raises(PermanentStateError, match="load state: ProgrammingError") as closed:
        store.load_state("votes", "cluster")
    assert isinstance(closed.value.__cause__, sqlite3.ProgrammingError)
    with SqliteStore(tmp_path / "watcher.db") as again:
        assert again.load_state("votes", "cluster") == {"seen": 1}
