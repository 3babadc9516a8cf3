"""Target state, silences, history, the outbox's backlog, rounds and retention on PostgreSQL
(``watcher.state.pg_rows``) answer as on SQLite: each scenario is written once, against a small
adapter with the same coroutines over either engine, run on a fresh ``SqliteStore`` and on a
fresh migrated PostgreSQL database, and what a user would see of both is compared (and checked
against what it should be, so that two engines wrong alike do not pass)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psycopg
import pytest
from psycopg.rows import TupleRow

from watcher.core.events import AlertMessage, Grouping, NewSilence, Reason, Silence, TargetState
from watcher.core.fastjson import decode_json
from watcher.core.outbox_rows import (
    AlertRecord,
    DeliveryStatus,
    Destination,
    ResolvedDestinations,
)
from watcher.state import pg_claims, pg_deliveries, pg_rows
from watcher.state.alerts import to_json
from watcher.state.interface import GiveUp, StepToCommit
from watcher.state.postgresql_schema import migrate
from watcher.state.records import SourceRound, last_rounds
from watcher.state.retention import Pruned
from watcher.state.store import SqliteStore
from watcher.testing.postgres import Postgres

Connection = psycopg.AsyncConnection[TupleRow]
SOURCE = "ledger"
URLS = ("json://ops/a", "json://ops/b")
TOKEN = "claimer"


class Engine(Protocol):
    """What a scenario calls: the same coroutines over either engine."""

    async def commit_step(
        self, target: str, state: TargetState, alerts: Sequence[AlertMessage], now: float
    ) -> list[int]: ...

    async def upsert_states(self, rows: Sequence[tuple[str, TargetState, float]]) -> None: ...

    async def load_states(self, targets: Sequence[str]) -> dict[str, TargetState | None]: ...

    async def load_state(self, target: str) -> TargetState | None: ...

    async def claim(self, now: float) -> list[int]: ...

    async def mark_sent(
        self, ids: Sequence[int], now: float, group: tuple[str, str] | None = None
    ) -> None: ...

    async def mark_retry(self, ids: Sequence[int], next_attempt_at: float) -> None: ...

    async def mark_dead(self, ids: Sequence[int], now: float) -> None: ...

    async def pending_count(self) -> int: ...

    async def add_silence(
        self, rule: str, subject: str | None, starts_at: float, ends_at: float, now: float
    ) -> Silence: ...

    async def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]: ...

    async def active_silences(self, now: float) -> list[Silence]: ...

    async def expire_silence(self, silence_id: int, now: float) -> bool: ...

    async def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]: ...

    async def record_round(self, round_: SourceRound) -> None: ...

    async def last_rounds(self) -> list[SourceRound]: ...

    async def prune(
        self, unwatched: frozenset[str], now: float, retention: float, limit: int
    ) -> list[Pruned]:
        """A whole pass: each batch's counts."""

    async def rows(self, query: str) -> list[tuple[Any, ...]]:
        """A plain query's rows (no parameters: the same text runs on both engines)."""


def destinations(alert: AlertMessage) -> list[Destination]:
    return [Destination("ops", url) for url in URLS]


def watching(unwatched: frozenset[str]) -> Callable[[str, str], bool]:
    return lambda _source, target: target not in unwatched


class OnSqlite:
    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    async def commit_step(
        self, target: str, state: TargetState, alerts: Sequence[AlertMessage], now: float
    ) -> list[int]:
        return self.store.commit_step(
            StepToCommit.of(SOURCE, target, state, alerts, destinations, now)
        )

    async def upsert_states(self, rows: Sequence[tuple[str, TargetState, float]]) -> None:
        for target, state, now in rows:
            self.store.stage_state(SOURCE, target, state, now)
        self.store.flush_states()

    async def load_states(self, targets: Sequence[str]) -> dict[str, TargetState | None]:
        self.store.prefetch_states(SOURCE, targets)
        return {target: self.store.load_state(SOURCE, target) for target in targets}

    async def load_state(self, target: str) -> TargetState | None:
        return self.store.load_state(SOURCE, target)

    async def claim(self, now: float) -> list[int]:
        return [row.id for row in self.store.claim_due(now)]

    async def mark_sent(
        self, ids: Sequence[int], now: float, group: tuple[str, str] | None = None
    ) -> None:
        self.store.mark_sent(ids, now, group)

    async def mark_retry(self, ids: Sequence[int], next_attempt_at: float) -> None:
        self.store.mark_retry(ids, "timeout", next_attempt_at)

    async def mark_dead(self, ids: Sequence[int], now: float) -> None:
        self.store.mark_dead(GiveUp(ids, "refused", now))

    async def pending_count(self) -> int:
        return self.store.pending_count()

    async def add_silence(
        self, rule: str, subject: str | None, starts_at: float, ends_at: float, now: float
    ) -> Silence:
        new = NewSilence(rule, subject, starts_at, ends_at, "deploy", "ops")
        return self.store.add_silence(new, now)

    async def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        return self.store.list_silences(now, include_expired)

    async def active_silences(self, now: float) -> list[Silence]:
        return self.store.active_silences(now)

    async def expire_silence(self, silence_id: int, now: float) -> bool:
        return self.store.expire_silence(silence_id, now)

    async def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        return self.store.history(limit, rule)

    async def record_round(self, round_: SourceRound) -> None:
        self.store.record_round(round_)

    async def last_rounds(self) -> list[SourceRound]:
        return last_rounds(self.store.db.conn)

    async def prune(
        self, unwatched: frozenset[str], now: float, retention: float, limit: int
    ) -> list[Pruned]:
        return list(self.store.prune_batches(watching(unwatched), now, retention, limit))

    async def rows(self, query: str) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.store.db.conn.execute(query).fetchall()]


class OnPostgres:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def commit_step(
        self, target: str, state: TargetState, alerts: Sequence[AlertMessage], now: float
    ) -> list[int]:
        # As the engine will: the state and the step's alerts in one transaction.
        async with self.conn.transaction():
            await pg_rows.upsert_state_in(self.conn, SOURCE, target, to_json(state), now)
            routed = ResolvedDestinations.of(alerts, destinations)
            return await pg_deliveries.insert_alerts(self.conn, alerts, routed, now)

    async def upsert_states(self, rows: Sequence[tuple[str, TargetState, float]]) -> None:
        await pg_rows.upsert_states(
            self.conn, [(SOURCE, target, to_json(state), now) for target, state, now in rows]
        )

    async def load_states(self, targets: Sequence[str]) -> dict[str, TargetState | None]:
        texts = await pg_rows.load_states(self.conn, SOURCE, targets)
        return {
            target: None if text is None else decode_json(text) for target, text in texts.items()
        }

    async def load_state(self, target: str) -> TargetState | None:
        text = await pg_rows.load_state_text(self.conn, SOURCE, target)
        return None if text is None else decode_json(text)

    async def claim(self, now: float) -> list[int]:
        rows = await pg_claims.claim_due(self.conn, token=TOKEN, claim_ttl=60.0, now=now)
        return [row.id for row in rows]

    async def mark_sent(
        self, ids: Sequence[int], now: float, group: tuple[str, str] | None = None
    ) -> None:
        assert await pg_deliveries.mark_sent(self.conn, ids, TOKEN, now, group) == []

    async def mark_retry(self, ids: Sequence[int], next_attempt_at: float) -> None:
        assert (
            await pg_deliveries.mark_retry(self.conn, ids, TOKEN, "timeout", next_attempt_at) == []
        )

    async def mark_dead(self, ids: Sequence[int], now: float) -> None:
        assert await pg_deliveries.mark_dead(self.conn, GiveUp(ids, "refused", now), TOKEN) == []

    async def pending_count(self) -> int:
        return await pg_rows.pending_count(self.conn)

    async def add_silence(
        self, rule: str, subject: str | None, starts_at: float, ends_at: float, now: float
    ) -> Silence:
        new = NewSilence(rule, subject, starts_at, ends_at, "deploy", "ops")
        return await pg_rows.add_silence(self.conn, new, now)

    async def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        return await pg_rows.list_silences(self.conn, now, include_expired)

    async def active_silences(self, now: float) -> list[Silence]:
        return await pg_rows.active_silences(self.conn, now)

    async def expire_silence(self, silence_id: int, now: float) -> bool:
        return await pg_rows.expire_silence(self.conn, silence_id, now)

    async def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        return await pg_rows.history(self.conn, limit, rule)

    async def record_round(self, round_: SourceRound) -> None:
        await pg_rows.record_round(self.conn, round_, "")  # SQLite's one instance

    async def last_rounds(self) -> list[SourceRound]:
        return await pg_rows.last_rounds(self.conn)

    async def prune(
        self, unwatched: frozenset[str], now: float, retention: float, limit: int
    ) -> list[Pruned]:
        batches = pg_rows.prune_batches(self.conn, watching(unwatched), now, retention, limit)
        return [done async for done in batches]

    async def rows(self, query: str) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in await (await self.conn.execute(query)).fetchall()]


@pytest.fixture
async def pg_conn(postgres: Postgres) -> AsyncIterator[Connection]:
    """An autocommit connection to a fresh migrated database (as a pool hands out)."""
    with postgres.database() as info:
        async with await psycopg.AsyncConnection.connect(info, autocommit=True) as conn:
            await migrate(conn)
            yield conn


@pytest.fixture
def engines(tmp_path: Path, pg_conn: Connection) -> Iterator[tuple[Engine, Engine]]:
    store = SqliteStore(tmp_path / "w.db")
    try:
        yield OnSqlite(store), OnPostgres(pg_conn)
    finally:
        store.close()


Scenario = Callable[[Engine], Awaitable[Any]]


async def on_both(engines: tuple[Engine, Engine], scenario: Scenario) -> Any:
    """What ``scenario`` saw on SQLite, having checked that PostgreSQL saw the same."""
    sqlite, postgresql = [await scenario(engine) for engine in engines]
    assert postgresql == sqlite
    return sqlite


def alert(
    subject: str,
    n: int,
    reason: Reason = "event",
    rule: str = "big_transfer",
    grouping: Grouping | None = None,
) -> AlertMessage:
    return AlertMessage(
        rule=rule,
        severity="warning",
        subject=subject,
        reason=reason,
        dedup_key=f"{rule}|{subject}|{n}|{reason}",
        title=f"transfer {n}",
        body="body",
        channels=("ops",),
        facts={"n": n, "amount": "12.5", "nested": {"é": [1, 2.5, None]}},
        grouping=grouping,
    )


# -- silences -------------------------------------------------------------------------------------


async def test_silences_added_listed_active_and_expired_alike(
    engines: tuple[Engine, Engine],
) -> None:
    async def scenario(e: Engine) -> list[Any]:
        seen: list[Any] = [
            await e.add_silence("big_transfer", None, 100.0, 200.0, now=90.0),
            await e.add_silence("low_balance", "addr1", 150.0, 300.0, now=95.0),
            await e.add_silence("low_balance", "addr2", 50.0, 120.0, now=96.0),
        ]
        for now in (90.0, 100.0, 119.9, 120.0, 160.0, 250.0, 300.0):
            seen += [now, await e.active_silences(now), await e.list_silences(now)]
        seen += [
            await e.expire_silence(2, 170.0),
            await e.expire_silence(2, 171.0),  # expired already
            await e.expire_silence(3, 170.0),  # ended already
            await e.expire_silence(99, 170.0),  # none such
            await e.active_silences(170.0),
            await e.list_silences(170.0),
            await e.list_silences(170.0, include_expired=True),
        ]
        return seen

    seen = await on_both(engines, scenario)
    first = Silence(1, "big_transfer", None, 100.0, 200.0, "deploy", "ops", 90.0)
    assert seen[0] == first
    assert [s.id for s in seen[-1]] == [3, 2, 1]
    assert seen[-1][1].expired_at == 170.0
    assert seen[-7:-3] == [True, False, False, False]
    assert seen[-3] == [first]


# -- target state -------------------------------------------------------------------------------


async def test_a_thousand_states_upserted_then_loaded_alike(
    engines: tuple[Engine, Engine],
) -> None:
    targets = [f"addr{i:04d}" for i in range(1000)]

    async def scenario(e: Engine) -> list[Any]:
        await e.upsert_states([(t, {"i": i, "seen": [t]}, 10.0) for i, t in enumerate(targets)])
        # Every other one written again, with a new document.
        await e.upsert_states(
            [(t, {"i": -i, "note": "ünïcode"}, 20.0) for i, t in enumerate(targets) if i % 2]
        )
        return [
            await e.load_states([*targets, "missing"]),
            await e.load_state("addr0001"),
            await e.load_state("missing"),
            await e.rows("SELECT target, state, updated_at FROM targets ORDER BY target"),
        ]

    states, one, missing, rows = await on_both(engines, scenario)
    assert len(states) == 1001 and states["missing"] is None
    assert states["addr0000"] == {"i": 0, "seen": ["addr0000"]}
    assert one == {"i": -1, "note": "ünïcode"}
    assert missing is None
    assert rows[1] == ("addr0001", to_json(one), 20.0)


async def test_state_text_is_stored_byte_for_byte(pg_conn: Connection) -> None:
    """The text given is the text read back: neither reordered nor respaced (a jsonb column
    would), whichever call wrote it."""
    odd = '{"b": 1,  "a" : ["é", 1.50, {"z":null}]}'
    await pg_rows.upsert_states(pg_conn, [(SOURCE, "x", odd, 1), (SOURCE, "y", "[]", 1.5)])
    async with pg_conn.transaction():
        await pg_rows.upsert_state_in(pg_conn, SOURCE, "z", odd + " ", 2.0)
    assert await pg_rows.load_states(pg_conn, SOURCE, ["x", "y", "z", "w"]) == {
        "x": odd,
        "y": "[]",
        "z": odd + " ",
        "w": None,
    }
    assert await pg_rows.load_state_text(pg_conn, SOURCE, "x") == odd
    assert await pg_rows.load_states(pg_conn, SOURCE, []) == {}


async def test_a_target_given_twice_in_one_flush_keeps_its_last_state(
    engines: tuple[Engine, Engine],
) -> None:
    async def scenario(e: Engine) -> TargetState | None:
        await e.upsert_states([("a", {"v": 1}, 1.0), ("a", {"v": 2}, 2.0)])
        return await e.load_state("a")

    assert await on_both(engines, scenario) == {"v": 2}


async def test_a_state_written_with_its_alerts_rolls_back_with_them(pg_conn: Connection) -> None:
    """``upsert_state_in`` writes in the caller's transaction: nothing when it rolls back."""
    with pytest.raises(RuntimeError):
        async with pg_conn.transaction():
            await pg_rows.upsert_state_in(pg_conn, SOURCE, "a", "{}", 1.0)
            alerts = [alert("a", 1)]
            routed = ResolvedDestinations.of(alerts, destinations)
            await pg_deliveries.insert_alerts(pg_conn, alerts, routed, 1.0)
            raise RuntimeError("the step failed")
    assert await pg_rows.load_state_text(pg_conn, SOURCE, "a") is None
    assert await pg_rows.history(pg_conn) == []


# -- history and the backlog --------------------------------------------------------------------


async def test_history_and_pending_count_alike(engines: tuple[Engine, Engine]) -> None:
    async def scenario(e: Engine) -> list[Any]:
        seen: list[Any] = [await e.pending_count()]
        await e.commit_step("addr1", {"v": 1}, [alert("addr1", 1), alert("addr1", 2)], 10.0)
        await e.commit_step("addr2", {"v": 2}, [alert("addr2", 3, "firing", "low")], 10.0)
        await e.commit_step("addr3", {"v": 3}, [alert("addr3", 4)], 12.0)
        # A step redone: its alerts are recorded already, nothing is repeated. (Last: on
        # PostgreSQL the skipped insert still draws an id, so later alerts' ids would differ.)
        redone = await e.commit_step("addr2", {"v": 2}, [alert("addr2", 3, "firing", "low")], 13.0)
        assert redone == []
        seen.append(await e.pending_count())
        ids = await e.claim(20.0)
        seen += [ids, await e.pending_count()]  # being sent still counts
        await e.mark_sent(ids[:2], 21.0)
        await e.mark_retry(ids[2:4], 60.0)
        await e.mark_dead(ids[4:6], 22.0)
        seen.append(await e.pending_count())
        seen += [
            await e.history(),
            await e.history(limit=2),
            await e.history(rule="low"),
            await e.history(rule="none such"),
        ]
        return seen

    seen = await on_both(engines, scenario)
    assert seen[:2] == [0, 8]
    assert seen[2] == list(range(1, 9))
    assert seen[3:5] == [8, 4]
    full, two, low, none = seen[5:]
    assert [r.id for r in full] == [4, 3, 2, 1]  # newest first; equal times by id
    assert [r.status for r in full] == ["queued", "dead", "queued", "sent"]
    assert full[-1].deliveries == (
        DeliveryStatus("ops", Destination("ops", URLS[0]).url_id, "sent", 1, None, 21.0),
        DeliveryStatus("ops", Destination("ops", URLS[1]).url_id, "sent", 1, None, 21.0),
    )
    assert full[-1].alert == AlertMessage(**{**vars(alert("addr1", 1)), "channels": ()})
    assert two == full[:2]
    assert [r.id for r in low] == [3] and none == []


# -- rounds ---------------------------------------------------------------------------------------


async def test_rounds_recorded_and_read_alike(engines: tuple[Engine, Engine]) -> None:
    async def scenario(e: Engine) -> list[list[SourceRound]]:
        seen = [await e.last_rounds()]
        await e.record_round(SourceRound("b", 10.0, 5, 0, 1.5, 10.0))
        await e.record_round(SourceRound("a", 11.0, 3, 1, 0.5, 11.0))
        seen.append(await e.last_rounds())
        # A round that all failed keeps the last success.
        await e.record_round(SourceRound("b", 20.0, 5, 5, 2.0, None))
        seen.append(await e.last_rounds())
        return seen

    seen = await on_both(engines, scenario)
    assert seen[0] == []
    assert seen[2] == [
        SourceRound("a", 11.0, 3, 1, 0.5, 11.0),
        SourceRound("b", 20.0, 5, 5, 2.0, 10.0),
    ]


# -- retention ----------------------------------------------------------------------------------

RETENTION = 1000.0
BATCH = 2  # rows a transaction of a pass reads or deletes at most (BATCH_ROWS in earnest)
LATER = 10_000.0  # the first pass: cutoff 9,000
REMAINS = {
    "alerts": "SELECT id, status FROM alerts ORDER BY id",
    "deliveries": "SELECT id, alert_id, status FROM deliveries ORDER BY id",
    "firing": "SELECT rule, subject, alert_id FROM firing_alerts ORDER BY rule, subject",
    "targets": "SELECT source, target, updated_at FROM targets ORDER BY source, target",
    "unwatched": "SELECT source, target, since FROM unwatched_targets ORDER BY source, target",
    "group_sends": "SELECT group_key, url_id, sent_at FROM group_sends ORDER BY sent_at",
    "silences": "SELECT id FROM silences ORDER BY id",
}


async def sent(
    e: Engine, target: str, alerts: Sequence[AlertMessage], at: float, sent_at: float
) -> None:
    await e.commit_step(target, {"at": at}, alerts, at)
    await e.mark_sent(await e.claim(at), sent_at)


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[Engine], Awaitable[None]]
    # Each pass: its time, and the targets no rule names then.
    passes: tuple[tuple[float, frozenset[str]], ...]
    pruned: Pruned  # the passes' totals
    kept: dict[str, int] = field(default_factory=dict)  # rows left per table (of REMAINS)


async def old_sent(e: Engine) -> None:
    await sent(e, "a", [alert("a", 1)], 100.0, 110.0)


async def firing(e: Engine) -> None:
    await sent(e, "a", [alert("a", 1, "firing")], 100.0, 110.0)


async def fired_then_resolved(e: Engine) -> None:
    await sent(e, "a", [alert("a", 1, "firing")], 100.0, 110.0)
    await sent(e, "a", [alert("a", 1, "resolved")], 200.0, 210.0)


async def pending(e: Engine) -> None:
    await e.commit_step("a", {}, [alert("a", 1)], 100.0)


async def one_sent_one_retried(e: Engine) -> None:
    await e.commit_step("a", {}, [alert("a", 1)], 100.0)
    ids = await e.claim(100.0)
    await e.mark_sent(ids[:1], 110.0)
    await e.mark_retry(ids[1:], 120.0)


async def dead_long_ago(e: Engine) -> None:
    await e.commit_step("a", {}, [alert("a", 1)], 100.0)
    await e.mark_dead(await e.claim(100.0), 110.0)


async def sent_after_cutoff(e: Engine) -> None:
    await sent(e, "a", [alert("a", 1)], 100.0, 9_500.0)


async def many_old(e: Engine) -> None:
    """More rows than a batch holds (the passes run batches of 2)."""
    for n in range(5):
        await sent(e, f"t{n}", [alert(f"t{n}", n)], 100.0 + n, 110.0 + n)


async def target_only(e: Engine) -> None:
    await e.upsert_states([("a", {}, 100.0), ("b", {}, 100.0)])


async def target_written_again(e: Engine) -> None:
    """Written after it was noted unwatched (a rule named it for a while between passes)."""
    await target_only(e)
    await e.upsert_states([("a", {"again": True}, LATER + 500)])


async def small_tables(e: Engine) -> None:
    digest = Grouping("transfer", wait=0.0, interval=60.0)
    await e.commit_step("a", {}, [alert("a", 1, grouping=digest)], 100.0)
    # Two URLs' sends: a send drops its own URL's older ones (those pacing no longer reads).
    await e.mark_sent(await e.claim(100.0), 110.0, ("big_transfer|transfer", "old url"))
    await e.commit_step("a", {}, [alert("a", 2, grouping=digest)], 9_500.0)
    await e.mark_sent(await e.claim(9_500.0), 9_510.0, ("big_transfer|transfer", "new url"))
    await e.add_silence("r", None, 0.0, 500.0, now=0.0)  # ended long ago
    silence = await e.add_silence("r", None, 0.0, 20_000.0, now=0.0)
    await e.expire_silence(silence.id, 600.0)  # expired long ago: goes too
    await e.add_silence("r", None, 0.0, 20_000.0, now=0.0)  # running
    await e.add_silence("r", None, 0.0, 9_500.0, now=0.0)  # ended after the cutoff


NONE: frozenset[str] = frozenset()
A, B, AB = frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"})
EVEN = frozenset({"t0", "t2", "t4"})
AFTER = LATER + RETENTION + 1  # a target noted unwatched at LATER has been so for retention
CASES = [
    Case(
        "old sent alert pruned",
        old_sent,
        ((LATER, NONE),),
        Pruned(alerts=1, deliveries=2),
        {"targets": 1},
    ),
    Case(
        "firing alert kept",
        firing,
        ((LATER, NONE),),
        Pruned(),
        {"alerts": 1, "deliveries": 2, "firing": 1, "targets": 1},
    ),
    Case(
        "resolved: both transitions go",
        fired_then_resolved,
        ((LATER, NONE),),
        Pruned(alerts=2, deliveries=4),
        {"targets": 1},
    ),
    Case(
        "pending delivery keeps alert",
        pending,
        ((LATER, NONE),),
        Pruned(),
        {"alerts": 1, "deliveries": 2, "targets": 1},
    ),
    Case(
        "a delivery to retry keeps the alert and its sent one",
        one_sent_one_retried,
        ((LATER, NONE),),
        Pruned(),
        {"alerts": 1, "deliveries": 2, "targets": 1},
    ),
    Case(
        "dead long ago pruned",
        dead_long_ago,
        ((LATER, NONE),),
        Pruned(alerts=1, deliveries=2),
        {"targets": 1},
    ),
    Case(
        "sent after the cutoff kept",
        sent_after_cutoff,
        ((LATER, NONE),),
        Pruned(),
        {"alerts": 1, "deliveries": 2, "targets": 1},
    ),
    Case(
        "old alerts pruned across batches",
        many_old,
        ((LATER, NONE),),
        Pruned(alerts=5, deliveries=10),
        {"targets": 5},
    ),
    Case(
        "unwatched target noted then deleted after retention",
        target_only,
        ((LATER, A), (LATER + RETENTION / 2, A), (AFTER, A)),
        Pruned(targets=1, unwatched=1),
        {"targets": 1},
    ),
    Case(
        # Named again: its note goes, and unwatched once more, its time starts again.
        "watched again kept",
        target_only,
        ((LATER, AB), (AFTER, B), (AFTER + 1, AB)),
        Pruned(targets=1, unwatched=3),
        {"targets": 1, "unwatched": 1},
    ),
    Case(
        "unwatched target written since it was noted kept",
        target_written_again,
        ((LATER, A), (AFTER, A)),
        Pruned(unwatched=1),
        {"targets": 2, "unwatched": 1},
    ),
    Case(
        "unwatched targets across batches",
        many_old,
        ((LATER, EVEN), (AFTER, EVEN)),
        Pruned(alerts=5, deliveries=10, targets=3, unwatched=3),
        {"targets": 2},
    ),
    Case(
        "old group sends and ended silences pruned",
        small_tables,
        ((LATER, NONE),),
        Pruned(alerts=1, deliveries=2, group_sends=1, silences=2),
        {"alerts": 1, "deliveries": 2, "targets": 1, "group_sends": 1, "silences": 2},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_retention_alike(engines: tuple[Engine, Engine], case: Case) -> None:
    async def scenario(e: Engine) -> tuple[list[list[Pruned]], dict[str, list[tuple[Any, ...]]]]:
        await case.setup(e)
        passes = [await e.prune(unwatched, now, RETENTION, BATCH) for now, unwatched in case.passes]
        return passes, {table: await e.rows(query) for table, query in REMAINS.items()}

    # The same batches too: the targets are written in the order of their key, so that SQLite's
    # rowid walks them in the order PostgreSQL's primary key does.
    passes, remains = await on_both(engines, scenario)
    total = Pruned()
    for done in (batch for batches in passes for batch in batches):
        # Deliveries go with their alerts: a batch's are its alerts' (two each here).
        rows = (done.alerts, done.targets, done.unwatched, done.group_sends, done.silences)
        assert max(rows) <= BATCH
        total.add(done)
    assert total == case.pruned
    assert {table: len(rows) for table, rows in remains.items() if rows} == case.kept


async def test_an_unwatched_target_written_meanwhile_by_another_instance_stays(
    pg_conn: Connection,
) -> None:
    """Between a targets batch's read and its deletes, another instance (whose rules still
    name the target, in a rolling deploy) writes it: it is not deleted, and stays noted."""
    await pg_rows.upsert_states(pg_conn, [(SOURCE, "a", "{}", 100.0)])
    assert await prune_all(pg_conn, lambda _source, _target: False, LATER) == Pruned(unwatched=1)

    def written_meanwhile(source: str, target: str) -> bool:
        with psycopg.connect(pg_conn.info.dsn, autocommit=True) as other:
            other.execute(
                "UPDATE targets SET state = '{\"new\":1}', updated_at = %s WHERE target = %s",
                [AFTER, target],
            )
        return False

    assert await prune_all(pg_conn, written_meanwhile, AFTER) == Pruned()
    assert await pg_rows.load_state_text(pg_conn, SOURCE, "a") == '{"new":1}'
    notes = await (await pg_conn.execute("SELECT target, since FROM unwatched_targets")).fetchall()
    assert notes == [("a", LATER)]


async def prune_all(conn: Connection, watched: Callable[[str, str], bool], now: float) -> Pruned:
    total = Pruned()
    async for done in pg_rows.prune_batches(conn, watched, now, RETENTION, BATCH):
        total.add(done)
    return total
