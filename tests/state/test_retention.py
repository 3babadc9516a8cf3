"""Retention: what a pass deletes and keeps (alerts with their deliveries, the state of targets no
rule names), that the daemon runs it and says so, and that the queries run at every scrape and
every round read through an index, never a scan of the alerts or the deliveries."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from watcher.core.events import AlertMessage, Grouping, Reason
from watcher.core.outbox_rows import Destination
from watcher.kinds.ruleset import Job, RuleSet
from watcher.state import snapshot
from watcher.state.database import MIGRATIONS, migrate, open_database
from watcher.state.interface import GiveUp, StepToCommit
from watcher.state.records import SourceRound, record_round
from watcher.state.store import AsyncSqliteStore, SqliteStore

from support.seeded import TREASURY, World, daemon_worlds

DAY = 86400.0
RETENTION = 90 * DAY
NOW = 1_800_000_000.0
OLD = NOW - RETENTION - DAY  # older than retention
NEW = NOW - RETENTION + DAY  # within retention
OPS = Destination("ops", "json://127.0.0.1:9/")


def message(
    title: str, reason: Reason, rule: str = "r", subject: str | None = None
) -> AlertMessage:
    return AlertMessage(
        rule=rule,
        severity="warning",
        subject=subject or title,
        reason=reason,
        dedup_key=f"{title}|{reason}",
        title=title,
        body="",
        channels=("ops",),
        facts={},
    )


def queue(
    store: SqliteStore,
    at: float,
    title: str,
    reason: Reason = "event",
    subject: str | None = None,
    sent: float | None = None,
    dead: float | None = None,
    silenced: bool = False,
) -> None:
    """One alert queued at ``at`` to one URL; its delivery sent or dead at the time given (else
    left pending)."""
    alert = message(title, reason, subject=subject)
    [alert_id] = store.commit_step(
        StepToCommit.of("s", title, {}, [alert], lambda _: [] if silenced else [OPS], at)
    )
    ids = [
        row[0]
        for row in store.db.execute("SELECT id FROM deliveries WHERE alert_id = ?", [alert_id])
    ]
    if sent is not None:
        store.mark_sent(ids, sent)
    if dead is not None:
        store.mark_dead(GiveUp(ids, "refused", dead))


def titles(store: SqliteStore) -> set[str]:
    return {row[0] for row in store.db.execute("SELECT title FROM alerts")}


def watched_none(_source: str, _target: str) -> bool:
    return True  # these cases are about alerts: every target is named by a rule


@pytest.fixture
def history(tmp_store: SqliteStore) -> SqliteStore:
    """Each case's alert titled by what should happen to it."""
    s = tmp_store
    queue(s, OLD, "resolved old: gone", "firing", subject="a", sent=OLD)
    queue(s, OLD + 1, "resolution old: gone", "resolved", subject="a", sent=OLD + 1)
    queue(s, NEW, "resolved new: kept", "firing", subject="b", sent=NEW)
    queue(s, NEW + 1, "resolution new: kept", "resolved", subject="b", sent=NEW + 1)
    queue(s, OLD, "firing old, since repeated: gone", "firing", subject="c", sent=OLD)
    queue(s, OLD + 2, "firing old, its latest repeat: kept", "repeat", subject="c", sent=OLD + 2)
    queue(s, OLD, "firing old: kept", "firing", subject="d", sent=OLD)
    queue(s, OLD, "event sent old: gone", sent=OLD)
    queue(s, NEW, "event sent new: kept", sent=NEW)
    queue(s, OLD, "event queued old, sent new: kept", sent=NEW)
    queue(s, OLD, "event pending old: kept")
    queue(s, OLD, "event dead old: gone", dead=OLD)
    queue(s, OLD, "event dead new: kept", dead=NEW)
    queue(s, OLD, "event silenced old: gone", silenced=True)
    queue(s, NEW, "event silenced new: kept", silenced=True)
    return s


def test_a_pass_deletes_exactly_the_finished_history_older_than_retention(
    history: SqliteStore,
) -> None:
    before = titles(history)
    firing = snapshot.firing(history.db.conn)
    done = history.prune(watched_none, NOW, RETENTION)
    assert titles(history) == {title for title in before if title.endswith("kept")}
    assert (done.alerts, done.deliveries) == (6, 5)  # the silenced one had no delivery
    assert snapshot.firing(history.db.conn) == firing  # what fires is still firing
    assert [f.title for f in firing] == ["firing old, its latest repeat: kept", "firing old: kept"]
    orphans = history.db.execute(
        "SELECT COUNT(*) FROM deliveries WHERE alert_id NOT IN (SELECT id FROM alerts)"
    ).fetchone()[0]
    assert orphans == 0
    assert history.prune(watched_none, NOW, RETENTION).alerts == 0  # nothing more to do


# What fires, from the history alone: the latest state transition of each (rule, subject) that
# is not a resolution (what ``firing_alerts`` must always agree with).
FIRING_FROM_HISTORY = """
SELECT a.rule, a.subject, a.severity, a.title, a.created_at
FROM alerts a JOIN (
    SELECT MAX(id) AS id FROM alerts WHERE reason IN ('firing', 'repeat', 'resolved')
    GROUP BY rule, subject
) latest ON latest.id = a.id
WHERE a.reason != 'resolved'
ORDER BY a.created_at DESC
"""


def from_history(conn: sqlite3.Connection) -> list[snapshot.Firing]:
    return [snapshot.Firing(*row) for row in conn.execute(FIRING_FROM_HISTORY)]


def test_what_fires_is_kept_with_each_alert_as_the_history_says(history: SqliteStore) -> None:
    conn = history.db.conn
    assert snapshot.firing(conn) == from_history(conn) != []
    queue(history, NOW, "c resolved", "resolved", subject="c", sent=NOW)
    queue(history, NOW, "e fires", "firing", subject="e")
    queue(history, NOW + 1, "e repeats", "repeat", subject="e")
    assert snapshot.firing(conn) == from_history(conn)
    assert [f.title for f in snapshot.firing(conn)] == ["e repeats", "firing old: kept"]


def test_the_upgrade_finds_what_fires_in_the_history(tmp_path: Path) -> None:
    path = tmp_path / "watcher.db"
    db = open_database(path)
    migrate(db, MIGRATIONS[:4])  # a database of the watcher before retention
    for id_, subject, reason in (
        (1, "a", "firing"),
        (2, "b", "firing"),
        (3, "a", "resolved"),
        (4, "c", "event"),
        (5, "b", "repeat"),
    ):
        db.execute(
            "INSERT INTO alerts (id, created_at, rule, severity, subject, reason, dedup_key, "
            "title, body, facts, status) VALUES (?, ?, 'r', 'warning', ?, ?, ?, ?, '', '{}', "
            "'sent')",
            [id_, OLD + id_, subject, reason, str(id_), f"{subject} {reason}"],
        )
    db.close()
    with SqliteStore(path) as store:
        assert [f.title for f in snapshot.firing(store.db.conn)] == ["b repeat"]


def test_small_batches_delete_the_same_rows(history: SqliteStore, tmp_path: Path) -> None:
    kept = {title for title in titles(history) if title.endswith("kept")}
    done = history.prune(watched_none, NOW, RETENTION, limit=2)
    assert (titles(history), done.alerts, done.deliveries) == (kept, 6, 5)


def test_digest_sends_and_ended_silences_older_than_retention_go(tmp_store: SqliteStore) -> None:
    db = tmp_store.db
    db.execute("INSERT INTO group_sends VALUES ('g', 'u', ?, 1), ('g', 'u', ?, 1)", [OLD, NEW])
    for ends, expired in ((OLD, None), (NOW + DAY, OLD), (NEW, None), (NOW + DAY, None)):
        db.execute(
            "INSERT INTO silences (rule, starts_at, ends_at, comment, created_at, expired_at) "
            "VALUES ('r', ?, ?, '', ?, ?)",
            [OLD - DAY, ends, OLD - DAY, expired],
        )
    done = tmp_store.prune(watched_none, NOW, RETENTION)
    assert (done.group_sends, done.silences) == (1, 2)
    assert [row[0] for row in db.execute("SELECT sent_at FROM group_sends")] == [NEW]
    assert [row[0] for row in db.execute("SELECT ends_at FROM silences ORDER BY id")] == [
        NEW,
        NOW + DAY,
    ]


# -- targets no rule names -----------------------------------------------------------------------


def test_a_target_no_rule_names_goes_once_unwatched_for_longer_than_retention(
    tmp_store: SqliteStore,
) -> None:
    for target in ("kept", "dropped", "back", "builtin-like"):
        tmp_store.commit_step(
            StepToCommit.of("s", target, {"cursor": target}, [], lambda _: [], OLD)
        )
    named = {"kept"}
    watched = lambda source, target: target in named  # noqa: E731

    first = tmp_store.prune(watched, OLD + DAY, RETENTION)  # "back" and "dropped" unwatched
    assert (first.targets, first.unwatched) == (0, 3)
    named.add("back")  # named again within retention: its state (cursor) stays
    assert tmp_store.prune(watched, NEW, RETENTION).targets == 0
    named.discard("back")  # and dropped again: counted from now
    assert tmp_store.prune(watched, NOW, RETENTION).unwatched == 1

    done = tmp_store.prune(watched, OLD + DAY + RETENTION + 1, RETENTION)
    assert done.targets == 2
    left = {row[0] for row in tmp_store.db.execute("SELECT target FROM targets")}
    assert left == {"kept", "back"}
    assert tmp_store.load_state("s", "back") == {"cursor": "back"}


@pytest.fixture
async def make_world(tmp_path: Path) -> AsyncIterator[Callable[..., World]]:
    async with daemon_worlds(tmp_path) as make:
        yield make


def treasury_only(world: World, named: bool) -> RuleSet:
    rules = world.daemon.ruleset.rules
    return RuleSet([rule for rule in rules if named or rule.name != "treasury"])


async def test_a_target_named_again_within_retention_alerts_on_what_it_missed_and_after_is_new(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    daemon = world.daemon
    with_treasury = daemon.ruleset
    signatures = Job("signatures", 1.0, (TREASURY,))
    await daemon.sweep(signatures)  # the baseline

    daemon.use(daemon.settings, treasury_only(world, named=False))
    await daemon.pruner.prune_once()
    world.now[0] += 30 * DAY
    world.ledger.add_transactions(TREASURY, 2)
    daemon.use(daemon.settings, with_treasury)
    assert (await daemon.pruner.prune_once()).targets == 0
    await daemon.sweep(signatures)
    assert [t.split(": ")[1][:18] for t in await world.titles()] == ["2 new transactions"]

    daemon.use(daemon.settings, treasury_only(world, named=False))
    await daemon.pruner.prune_once()
    world.now[0] += daemon.settings.retention + DAY
    assert (await daemon.pruner.prune_once()).targets == 1
    assert await daemon.store.load_state("signatures", TREASURY) is None
    world.ledger.add_transactions(TREASURY, 3)
    daemon.use(daemon.settings, with_treasury)
    await daemon.sweep(signatures)  # a new target: its baseline, learnt silently
    assert len(await world.titles()) == 1
    assert await daemon.store.load_state("signatures", TREASURY)


async def test_the_daemon_prunes_at_start_and_says_what_it_deleted_in_one_line(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    daemon = world.daemon
    engine = daemon.store
    assert isinstance(engine, AsyncSqliteStore)  # the SQLite engine: queue() reads its rows
    store = engine.sqlite
    queue(store, world.now[0] - daemon.settings.retention - DAY, "old", sent=world.now[0])
    queue(store, world.now[0] - daemon.settings.retention - DAY, "older", dead=0.0)
    with capture_logs() as logs:
        task = asyncio.create_task(daemon.pruner.prune_forever())
        for _ in range(500):  # a deadline of 5 s
            if any(line["event"] == "history pruned" for line in logs):
                break
            await asyncio.sleep(0.01)
        daemon.stopping.set()
        await asyncio.wait_for(task, 5)
    [line] = [line for line in logs if line["event"] == "history pruned"]
    assert (line["alerts"], line["deliveries"], line["retention"]) == (1, 1, "90d")
    assert titles(store) == {"old"}  # sent within retention: kept


# -- indexes --------------------------------------------------------------------------------------


def plans(conn: sqlite3.Connection, statements: list[str]) -> dict[str, list[str]]:
    return {
        sql: [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
        for sql in statements
        if sql.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE", "INSERT"))
    }


def traced(conn: sqlite3.Connection, run: Callable[[], Any]) -> list[str]:
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        run()
    finally:
        conn.set_trace_callback(None)
    return seen


def full_scans(found: dict[str, list[str]]) -> list[tuple[str, str]]:
    """(query, step) of every step reading every row of alerts or deliveries (through the
    table or a whole index)."""
    return [
        (sql, step)
        for sql, steps in found.items()
        for step in steps
        if step.split()[:2] in (["SCAN", t] for t in ("alerts", "deliveries", "a", "d"))
    ]


def test_what_a_scrape_and_a_round_read_uses_an_index(history: SqliteStore, tmp_path: Path) -> None:
    store = history
    conn = store.db.conn
    scrape = traced(conn, store.summary)
    grouped = replace(message("y", "event"), grouping=Grouping("new_transactions", 60.0))
    store.commit_step(
        StepToCommit.of("s", "b", {}, [message("x", "event"), grouped], lambda _: [OPS], NOW)
    )

    def a_round() -> None:
        store.prefetch_states("s", ["a", "b"])
        store.load_state("s", "zz")
        store.active_silences(NOW)
        store.pending_count()
        store.group_sends("g", "u")
        store.mark_sent([d.id for d in store.claim_due(NOW + 1, 100, 10)], NOW, ("g", "u"))
        store.commit_step(
            StepToCommit.of("s", "a", {}, [message("z", "firing")], lambda _: [OPS], NOW)
        )
        record_round(store.db, SourceRound("s", NOW, 1, 0, 0.1, NOW))

    round_ = traced(store.db.conn, a_round)
    assert any("a.group_key = " in sql for sql in round_)  # a digest group was completed
    found = plans(conn, scrape) | plans(store.db.conn, round_)
    assert len(found) >= 10
    assert full_scans(found) == []
    assert found[snapshot._FIRING][0] == "SCAN f"  # the firing alerts only
