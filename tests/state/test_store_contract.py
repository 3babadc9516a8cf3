"""The ``Store`` contract, run on both engines: every call of the protocol gives the same
answers on the SQLite engine and on the PostgreSQL one (a real server, a database per test).
The PostgreSQL store is the only instance on its database here: its first lease round takes
every shard, so it may write every target, as the SQLite engine does."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from watcher.core.events import (
    WATCH_SINCE_KEY,
    AlertMessage,
    Grouping,
    NewSilence,
    Silence,
    WatchSince,
)
from watcher.core.outbox_rows import DeadLetterReports, Destination
from watcher.state.interface import GiveUp, StepToCommit, Store, store_members
from watcher.state.pg_store import PostgresStore
from watcher.state.records import CONFIG_SOURCE, SourceRound, config_round
from watcher.state.shards import SHARDS
from watcher.state.snapshot import Awaiting, Firing
from watcher.state.store import AsyncSqliteStore
from watcher.testing.postgres import Postgres

OPS = Destination("ops", "json://127.0.0.1:9/ops")
MAIL = Destination("mail", "json://127.0.0.1:9/mail")


def alert(key: str, rule: str = "r", **changes: Any) -> AlertMessage:
    values: dict[str, Any] = {
        "rule": rule,
        "severity": "warning",
        "subject": "subj",
        "reason": "event",
        "dedup_key": key,
        "title": f"title {key}",
        "body": f"body {key}",
        "channels": ("ops",),
        "facts": {"n": 1, "key": key},
    }
    values.update(changes)
    return AlertMessage(**values)


def to(*destinations: Destination) -> Callable[[AlertMessage], Sequence[Destination]]:
    return lambda _alert: list(destinations)


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        async with AsyncSqliteStore.open(tmp_path / "watcher.db") as sqlite:
            yield sqlite
        return
    postgres: Postgres = request.getfixturevalue("postgres")
    with postgres.database() as url:
        async with PostgresStore(url, instance="only") as pg:
            done = await pg.maintain_leases()
            assert done.held == SHARDS
            yield pg


# -- members ------------------------------------------------------------------------------------


def test_the_postgresql_engine_has_every_member_of_the_protocol_with_its_parameters() -> None:
    for name, wanted in store_members().items():
        if name.startswith("_") and name not in {"__aenter__", "__aexit__"}:
            continue
        if not callable(wanted) or isinstance(wanted, property):
            continue
        got = getattr(PostgresStore, name)
        assert list(inspect.signature(got).parameters) == list(
            inspect.signature(wanted).parameters
        ), name
        asynchronous = inspect.iscoroutinefunction(wanted) or name == "prune_batches"
        assert (
            inspect.iscoroutinefunction(got) or inspect.isasyncgenfunction(got)
        ) == asynchronous, name


# -- target state -------------------------------------------------------------------------------


async def test_a_committed_step_is_read_back_with_its_alerts_queued(store: Store) -> None:
    assert await store.load_state("signatures", "addr1") is None
    ids = await store.commit_step(
        StepToCommit.of(
            "signatures", "addr1", {"cursor": "sig9", "seen": [1, 2]}, [alert("k1")], to(OPS), 10.0
        )
    )
    assert len(ids) == 1
    assert await store.load_state("signatures", "addr1") == {"cursor": "sig9", "seen": [1, 2]}
    assert await store.pending_count() == 1
    # A step redone after a crash repeats nothing.
    assert (
        await store.commit_step(
            StepToCommit.of("signatures", "addr1", {"c": 2}, [alert("k1")], to(OPS), 11.0)
        )
        == []
    )
    assert await store.pending_count() == 1
    assert await store.load_state("signatures", "addr1") == {"c": 2}


async def test_staged_states_are_read_before_the_flush_and_written_by_it(store: Store) -> None:
    for n in range(5):
        assert store.stage_state("signatures", f"a{n}", {"n": n}, 5.0) is False
    assert await store.load_state("signatures", "a3") == {"n": 3}
    commits = store.commits
    assert await store.flush_states() == 5
    assert store.commits == commits + 1
    assert await store.flush_states() == 0
    await store.prefetch_states("signatures", ["a0", "a4", "nobody"])
    assert await store.load_state("signatures", "a4") == {"n": 4}
    assert await store.load_state("signatures", "nobody") is None


async def test_a_batch_s_states_are_read_in_order_from_memory_first(store: Store) -> None:
    for n in range(3):
        store.stage_state("signatures", f"a{n}", {"n": n}, 5.0)
    await store.flush_states()
    store.stage_state("signatures", "a1", {"n": 10}, 6.0)  # staged: newer than the stored one
    await store.prefetch_states("signatures", ["a2"])
    await store.commit_step(StepToCommit.of("signatures", "a0", {"n": 20}, (), to(), 7.0))
    targets = ["a2", "nobody", "a1", "a0", "a2"]
    assert await store.load_states("signatures", targets) == [
        {"n": 2},  # prefetched
        None,
        {"n": 10},
        {"n": 20},  # committed: no copy held
        {"n": 2},
    ]
    assert await store.load_states("signatures", []) == []


async def test_a_watch_s_start_is_kept_once_and_counted_until_the_first_poll(
    store: Store,
) -> None:
    since = WatchSince(1000.0, slot=77)
    await store.commit_step(StepToCommit.of("signatures", "polled", {"cursor": 1}, (), to(), 900.0))
    assert await store.register_watch("signatures", ["a", "b", "polled"], since) == 2
    assert await store.load_state("signatures", "a") == {
        "v": 1,
        WATCH_SINCE_KEY: {"at": 1000.0, "slot": 77},
    }
    assert await store.load_state("signatures", "polled") == {"cursor": 1}  # never changed
    # A later start (a restart, another instance) keeps the first moment.
    assert await store.register_watch("signatures", ["a", "c"], WatchSince(2000.0)) == 1
    assert await store.load_state("signatures", "a") == {
        "v": 1,
        WATCH_SINCE_KEY: {"at": 1000.0, "slot": 77},
    }
    assert await store.awaiting_first_poll() == [Awaiting("signatures", 3, 1000.0)]
    # A first poll held back as doubtful keeps the start: still waiting.
    doubted = {"v": 1, WATCH_SINCE_KEY: {"at": 1000.0, "slot": 77}, "doubt": {"seen": 1}}
    await store.commit_step(StepToCommit.of("signatures", "a", doubted, (), to(), 2100.0))
    # The first polls' states: one staged and flushed, one committed with its step.
    store.stage_state("signatures", "b", {"v": 1, "cursor": {"sig": "x"}}, 2100.0)
    await store.flush_states()
    assert await store.awaiting_first_poll() == [Awaiting("signatures", 2, 1000.0)]
    await store.commit_step(StepToCommit.of("signatures", "a", {"cursor": 2}, (), to(), 2200.0))
    assert await store.awaiting_first_poll() == [Awaiting("signatures", 1, 2000.0)]
    status = await store.status("_cadence")
    assert status.awaiting == [Awaiting("signatures", 1, 2000.0)]
    # Taken out of the rules before its first poll: retention finds it named by no rule, and
    # it no longer counts (nobody will poll it).
    async for _done in store.prune_batches(lambda s, t: t != "c", 2300.0, retention=1e6):
        pass
    assert await store.awaiting_first_poll() == []


# -- the outbox -----------------------------------------------------------------------------------


async def test_claims_marks_and_the_alerts_status(store: Store) -> None:
    await store.commit_step(
        StepToCommit.of("s", "t1", {}, [alert("a1"), alert("a2")], to(OPS, MAIL), 10.0)
    )
    assert await store.claim_due(5.0) == []  # not due yet
    claimed = await store.claim_due(10.0)
    assert [row.alert.dedup_key for row in claimed] == ["a1", "a1", "a2", "a2"]
    assert all(row.status == "sending" for row in claimed)
    assert await store.claim_due(10.0) == []  # claimed: not due again
    first, second, third, fourth = (row.id for row in claimed)
    assert await store.mark_sent([first], 11.0) == []
    assert await store.mark_retry(second, "HTTP 500", 20.0) == []
    assert await store.mark_dead(GiveUp([third], "gone", 11.0)) == []
    await store.release([fourth])
    history = {record.alert.dedup_key: record for record in await store.history()}
    assert history["a1"].status == "partial"
    assert history["a2"].status == "queued"
    assert sorted(d.status for d in history["a1"].deliveries) == ["pending", "sent"]
    again = await store.claim_due(20.0)
    assert sorted(row.id for row in again) == sorted([second, fourth])
    assert [row.attempts for row in again if row.id == second] == [1]


async def test_next_due_is_the_earliest_pending_delivery_a_claim_could_take(store: Store) -> None:
    assert await store.next_due() is None  # nothing pending
    await store.commit_step(StepToCommit.of("s", "t1", {}, [alert("a1")], to(OPS), 10.0))
    await store.commit_step(StepToCommit.of("s", "t2", {}, [alert("m1")], to(MAIL), 12.0))
    assert await store.next_due() == 10.0
    assert await store.next_due(skip_urls=[OPS.url_id]) == 12.0  # a busy URL's rows wait
    (ops,) = await store.claim_due(10.0)
    assert await store.next_due() == 12.0  # claimed: being sent, not pending
    await store.mark_retry(ops.id, "HTTP 500", 30.0)
    (mail,) = await store.claim_due(12.0)
    assert await store.next_due() == 30.0  # the retry
    await store.mark_sent(mail.id, 13.0)
    (retried,) = await store.claim_due(30.0)
    await store.mark_sent(retried.id, 31.0)
    assert await store.next_due() is None


async def test_a_release_with_not_before_delays_the_rows(store: Store) -> None:
    await store.commit_step(StepToCommit.of("s", "t1", {}, [alert("a1")], to(OPS), 10.0))
    (row,) = await store.claim_due(10.0)
    await store.release([row.id], not_before=30.0)
    assert await store.claim_due(29.0) == []
    assert [r.id for r in await store.claim_due(30.0)] == [row.id]


async def test_claims_skip_busy_urls_and_complete_digest_groups(store: Store) -> None:
    grouped = [alert(f"g{n}", grouping=Grouping("new_transactions")) for n in range(3)]
    await store.commit_step(StepToCommit.of("s", "t1", {}, grouped, to(OPS), 10.0))
    await store.commit_step(StepToCommit.of("s", "t2", {}, [alert("m1")], to(MAIL), 10.0))
    assert {r.url_id for r in await store.claim_due(10.0, skip_urls=[OPS.url_id])} == {MAIL.url_id}
    rows = await store.claim_due(10.0, limit=1, group_limit=10)
    key = "r|new_transactions"
    assert [r.alert.dedup_key for r in rows] == ["g0", "g1", "g2"]
    assert await store.mark_sent([r.id for r in rows], 12.0, group=(key, OPS.url_id)) == []
    sends = await store.group_sends(key, OPS.url_id)
    assert sends.sent == (12.0,)
    assert sends.scheduled_at is None


async def test_a_dead_delivery_queues_its_dead_letter_once(store: Store) -> None:
    await store.commit_step(StepToCommit.of("s", "t1", {}, [alert("a1")], to(OPS), 10.0))
    (row,) = await store.claim_due(10.0)
    letter = alert("dead|a1", rule="watcher_dead_letter")
    await store.mark_dead(
        GiveUp([row.id], "refused", 11.0, DeadLetterReports.of({row.id: letter}, to(MAIL)))
    )
    keys = [record.alert.dedup_key for record in await store.history()]
    assert keys == ["dead|a1", "a1"]
    assert [r.url_id for r in await store.claim_due(11.0)] == [MAIL.url_id]


# -- silences, history, rounds, retention ---------------------------------------------------------


async def test_silences_are_added_listed_active_and_expired(store: Store) -> None:
    one = await store.add_silence(NewSilence("r", None, 10.0, 100.0, "maintenance", "ops@x"), 5.0)
    two = await store.add_silence(NewSilence("r", "subj", 50.0, 60.0, "later", None), 5.0)
    assert one == Silence(one.id, "r", None, 10.0, 100.0, "maintenance", "ops@x", 5.0)
    assert [s.id for s in await store.list_silences(20.0)] == [two.id, one.id]
    assert [s.id for s in await store.active_silences(20.0)] == [one.id]
    assert await store.expire_silence(one.id, 30.0) is True
    assert await store.expire_silence(one.id, 31.0) is False
    assert await store.active_silences(30.0) == []
    assert len(await store.list_silences(30.0, include_expired=True)) == 2


async def test_history_is_newest_first_and_filtered_by_rule(store: Store) -> None:
    await store.commit_step(StepToCommit.of("s", "t1", {}, [alert("a1", rule="r1")], to(OPS), 10.0))
    await store.commit_step(StepToCommit.of("s", "t2", {}, [alert("a2", rule="r2")], to(), 20.0))
    records = await store.history()
    assert [(r.alert.dedup_key, r.status) for r in records] == [
        ("a2", "silenced"),
        ("a1", "queued"),
    ]
    assert records[1].alert.facts == {"n": 1, "key": "a1"}
    assert [r.alert.dedup_key for r in await store.history(rule="r1")] == ["a1"]
    assert len(await store.history(limit=1)) == 1


async def test_retention_deletes_old_finished_alerts_and_unwatched_targets(store: Store) -> None:
    await store.commit_step(StepToCommit.of("s", "old", {}, [alert("a1")], to(OPS), 10.0))
    await store.commit_step(StepToCommit.of("s", "kept", {"x": 1}, [alert("a2")], to(OPS), 10.0))
    rows = await store.claim_due(10.0)
    await store.mark_sent([rows[0].id], 11.0)  # a1 sent; a2 still claimed: kept
    watched = lambda source, target: target == "kept"  # noqa: E731
    totals: dict[str, int] = {}
    for now in (1000.0, 2000.0):
        async for done in store.prune_batches(watched, now, retention=500.0):
            for name, value in vars(done).items():
                totals[name] = totals.get(name, 0) + value
    assert totals["alerts"] == 1 and totals["deliveries"] == 1
    assert totals["unwatched"] == 1 and totals["targets"] == 1
    assert [r.alert.dedup_key for r in await store.history()] == ["a2"]
    assert await store.load_state("s", "old") is None
    assert await store.load_state("s", "kept") == {"x": 1}


async def test_standing_alerts_are_what_fires_and_the_recent_resolutions(store: Store) -> None:
    def state(key: str, subject: str, reason: str) -> AlertMessage:
        return alert(key, subject=subject, reason=reason)

    await store.commit_step(
        StepToCommit.of("s", "t", {}, [state("a1", "A", "firing")], to(OPS, MAIL), 100.0)
    )
    await store.commit_step(
        StepToCommit.of("s", "t", {}, [state("b1", "B", "firing")], to(OPS), 100.0)
    )
    await store.commit_step(
        StepToCommit.of("s", "t", {}, [state("b2", "B", "resolved")], to(OPS), 200.0)
    )
    await store.commit_step(
        StepToCommit.of("s", "t", {}, [state("c1", "C", "firing")], to(OPS), 100.0)
    )
    await store.commit_step(
        StepToCommit.of("s", "t", {}, [state("c2", "C", "resolved")], to(OPS), 150.0)
    )
    await store.commit_step(StepToCommit.of("s", "t", {}, [alert("e1")], to(OPS), 200.0))
    rows = await store.standing_alerts([OPS.url_id], 160.0)
    assert [(r.alert.dedup_key, r.url_id, r.created_at) for r in rows] == [
        ("a1", OPS.url_id, 100.0),
        ("b2", OPS.url_id, 200.0),
    ]
    both = await store.standing_alerts([OPS.url_id, MAIL.url_id], 0.0)
    assert [(r.alert.dedup_key, r.channel) for r in both] == [
        ("a1", "ops"),
        ("a1", "mail"),
        ("b2", "ops"),
        ("c2", "ops"),
    ]
    assert await store.standing_alerts([], 0.0) == []


async def test_a_muted_repeat_leaves_its_firing_standing(store: Store) -> None:
    """A repeat a silence muted (no delivery) does not replace the firing it reminds of: the
    re-posts of that firing resume when the silence ends; a repeat sent again replaces it."""
    muted = {"silenced_by": {"id": 1, "comment": "c", "ends_at": 9e9}}
    for key, reason, facts, when in (
        ("f1", "firing", {}, 100.0),
        ("f2", "repeat", muted, 200.0),
    ):
        destinations = to() if facts else to(OPS)
        firing = alert(key, subject="A", reason=reason, facts=facts)
        await store.commit_step(StepToCommit.of("s", "t", {}, [firing], destinations, when))
    rows = await store.standing_alerts([OPS.url_id], 0.0)
    assert [r.alert.dedup_key for r in rows] == ["f1"]
    [firing_now], _outbox = await store.summary()
    assert (firing_now.rule, firing_now.subject, firing_now.since) == ("r", "A", 100.0)
    repeat = alert("f3", subject="A", reason="repeat")
    await store.commit_step(StepToCommit.of("s", "t", {}, [repeat], to(OPS), 300.0))
    assert [r.alert.dedup_key for r in await store.standing_alerts([OPS.url_id], 0.0)] == ["f3"]


# -- what is true now -----------------------------------------------------------------------------


async def test_the_summary_and_the_status_are_what_fires_the_outbox_and_the_rounds(
    store: Store,
) -> None:
    def state(key: str, subject: str, reason: str) -> AlertMessage:
        return alert(key, subject=subject, reason=reason, severity="critical")

    await store.commit_step(
        StepToCommit.of("s", "t", {}, [state("a1", "A", "firing")], to(OPS, MAIL), 100.0)
    )
    await store.commit_step(
        StepToCommit.of("s", "t", {}, [state("b1", "B", "firing")], to(OPS), 110.0)
    )
    await store.commit_step(
        StepToCommit.of("s", "t", {}, [state("b2", "B", "resolved")], to(OPS), 120.0)
    )
    [dead, *_] = await store.claim_due(100.0)
    await store.mark_dead(GiveUp([dead.id], "gone", 130.0))
    await store.record_round(SourceRound("votes", 140.0, 4, 1, 0.5, 139.0))
    firing, outbox = await store.summary()
    assert firing == [Firing("r", "A", "critical", "title a1", 100.0)]
    assert (outbox.pending, outbox.dead) == (4 - 1, 1)
    assert outbox.oldest_pending_at == 100.0
    status = await store.status("_cadence")
    assert (status.firing, status.outbox) == (firing, outbox)
    assert [(r.source, r.targets, r.failed) for r in status.rounds] == [("votes", 4, 1)]


async def test_a_refused_reload_is_kept_beside_the_rounds_with_the_last_successful_load(
    store: Store,
) -> None:
    """What ``watcher status --health`` reads: the last load of the settings and rules, refused
    after one at 100 (``watcher.state.records.config_round``), then put in force."""
    await store.record_round(config_round(ok=True, at=100.0))
    await store.record_round(config_round(ok=False, at=200.0))
    [load] = (await store.status("_cadence")).rounds
    assert (load.source, load.finished_at, load.failed, load.last_success_at) == (
        CONFIG_SOURCE,
        200.0,
        1,
        100.0,
    )
    await store.record_round(config_round(ok=True, at=300.0))
    [load] = (await store.status("_cadence")).rounds
    assert (load.failed, load.last_success_at) == (0, 300.0)
