"""The outbox on a real PostgreSQL, shared by several claimers (watcher.state.pg_claims and
pg_deliveries): claims never shared, expired claims taken again, stale acks changing nothing,
NOTIFY waking a listener."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import TupleRow

from watcher.core.events import AlertMessage, Grouping
from watcher.core.outbox_rows import DeadLetterReports, Destination, ResolvedDestinations
from watcher.state import pg_claims as claims
from watcher.state import pg_deliveries as outbox
from watcher.state.interface import GiveUp, StepToCommit
from watcher.state.postgresql_schema import migrate
from watcher.state.store import SqliteStore
from watcher.testing.postgres import Postgres

Connection = psycopg.AsyncConnection[TupleRow]
NOW = 1_000_000.0
TTL = 60.0


@pytest.fixture
async def conninfo(postgres: Postgres) -> AsyncIterator[str]:
    with postgres.database() as info:
        async with await psycopg.AsyncConnection.connect(info, autocommit=True) as conn:
            await migrate(conn)
        yield info


@pytest.fixture
async def conns(conninfo: str) -> AsyncIterator[list[Connection]]:
    """Three connections, as three instances would have."""
    opened = [await psycopg.AsyncConnection.connect(conninfo, autocommit=True) for _ in range(3)]
    try:
        yield opened
    finally:
        for conn in opened:
            await conn.close()


def alert(n: int, grouping: Grouping | None = None) -> AlertMessage:
    return AlertMessage(
        rule="big_transfer",
        severity="warning",
        subject=f"addr{n}",
        reason="event" if grouping else "firing",
        dedup_key=f"big_transfer|addr{n}|{n}",
        title=f"transfer {n}",
        body="body",
        channels=("ops",),
        facts={"n": n},
        grouping=grouping,
    )


def to_urls(*urls: str) -> Callable[[AlertMessage], Sequence[Destination]]:
    return lambda _alert: [Destination("ops", url) for url in urls]


async def queue(
    conn: Connection, alerts: Sequence[AlertMessage], *urls: str, now: float = NOW
) -> list[int]:
    """Queue alerts to ``urls`` in one transaction; the ids of their deliveries."""
    async with conn.transaction():
        routed = ResolvedDestinations.of(alerts, to_urls(*urls))
        alert_ids = await outbox.insert_alerts(conn, alerts, routed, now)
    rows = await (
        await conn.execute(
            "SELECT id FROM deliveries WHERE alert_id = ANY(%s) ORDER BY id", [alert_ids]
        )
    ).fetchall()
    return [int(row[0]) for row in rows]


async def delivery(conn: Connection, id_: int) -> tuple[str, str | None, int]:
    row = await (
        await conn.execute(
            "SELECT status, claim_token, attempts FROM deliveries WHERE id = %s", [id_]
        )
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


async def alert_status(conn: Connection, delivery_id: int) -> str:
    row = await (
        await conn.execute(
            "SELECT a.status FROM alerts a JOIN deliveries d ON d.alert_id = a.id WHERE d.id = %s",
            [delivery_id],
        )
    ).fetchone()
    assert row is not None
    return str(row[0])


async def expire_claims(conn: Connection) -> None:
    """Time passes: every live claim runs out."""
    await conn.execute(
        "UPDATE deliveries SET claim_expires_at = claim_expires_at - 3600 WHERE status = 'sending'"
    )


async def test_two_claimers_at_once_never_share_a_delivery_and_together_take_all(
    conns: list[Connection],
) -> None:
    urls = [f"json://receiver/{n}" for n in range(8)]
    ids: list[int] = []
    for n, url in enumerate(urls):
        ids += await queue(conns[0], [alert(n * 100 + k) for k in range(25)], url)
    assert len(ids) == 200

    async def claimer(conn: Connection, token: str) -> list[tuple[int, str]]:
        """Claims until a claim finds nothing. One made while the other claims may find
        nothing though more is due: a URL the other's claim holds locked that moment is left
        out, even this claimer's own; a sender claims again at its next wake-up."""
        taken: list[tuple[int, str]] = []
        while rows := await claims.claim_due(conn, token=token, claim_ttl=TTL, now=NOW, limit=7):
            taken += [(row.id, row.url_id) for row in rows]
        return taken

    a, b = await asyncio.gather(claimer(conns[0], "a"), claimer(conns[1], "b"))
    assert a and b  # both claimed, at the same time
    # Each one's next wake-up, the other idle: what was left is taken, by its URL's holder.
    a += await claimer(conns[0], "a")
    b += await claimer(conns[1], "b")
    a_ids, b_ids = {i for i, _ in a}, {i for i, _ in b}
    assert not a_ids & b_ids  # never shared
    assert a_ids | b_ids == set(ids)  # together, all
    assert len(a) + len(b) == len(ids)  # nobody took a row twice
    # One URL, one claimer: its deliveries go in order, its digests are paced by one sender.
    assert not {u for _, u in a} & {u for _, u in b}
    for id_ in a_ids:
        assert (await delivery(conns[2], id_))[:2] == ("sending", "a")


async def test_claimers_racing_round_after_round_never_share_a_url(
    conns: list[Connection],
) -> None:
    """New deliveries to the same few URLs, claimed by two claimers at once, round after round:
    a URL is never claimed by both (the per-URL lock and the fresh re-read of live claims)."""
    urls = [f"json://receiver/{n}" for n in range(3)]
    for round_ in range(15):
        ids = await queue(conns[2], [alert(round_ * 10 + k) for k in range(6)], *urls)
        a, b = await asyncio.gather(
            claims.claim_due(conns[0], token=f"a{round_}", claim_ttl=TTL, now=NOW),
            claims.claim_due(conns[1], token=f"b{round_}", claim_ttl=TTL, now=NOW),
        )
        assert not {r.url_id for r in a} & {r.url_id for r in b}
        assert {r.id for r in a} | {r.id for r in b} == set(ids)
        for rows, token in ((a, f"a{round_}"), (b, f"b{round_}")):
            assert await outbox.mark_sent(conns[2], [r.id for r in rows], token, NOW) == []


async def test_a_url_another_claim_is_taking_is_left_out(conns: list[Connection]) -> None:
    [held] = await queue(conns[0], [alert(1)], "json://one")
    [free] = await queue(conns[0], [alert(2)], "json://two")
    [row] = await claims.claim_due(conns[2], token="x", claim_ttl=TTL, now=NOW, limit=1)
    assert await outbox.release(conns[2], [row.id], "x") == []
    url_one = row.url_id
    async with conns[1].transaction():  # another claimer, mid-claim of json://one
        await conns[1].execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [claims.URL_LOCK_CLASS, url_one]
        )
        rows = await claims.claim_due(conns[0], token="a", claim_ttl=TTL, now=NOW)
        assert [r.id for r in rows] == [free]
    [later] = await claims.claim_due(conns[0], token="a", claim_ttl=TTL, now=NOW)
    assert later.id == held


async def test_a_claim_skips_rows_another_claim_is_taking_without_waiting(
    conns: list[Connection],
) -> None:
    ids = await queue(conns[0], [alert(n) for n in range(4)], "json://one", "json://two")
    held = ids[:2]  # both URLs of the first alert
    async with conns[1].transaction():  # another claimer, mid-claim: its rows are locked
        await conns[1].execute("SELECT id FROM deliveries WHERE id = ANY(%s) FOR UPDATE", [held])
        rows = await asyncio.wait_for(
            claims.claim_due(conns[0], token="a", claim_ttl=TTL, now=NOW), timeout=10
        )
    assert [row.id for row in rows] == ids[2:]


async def test_what_a_claim_returns_is_what_sqlite_claims(
    conns: list[Connection], tmp_path: Path
) -> None:
    alerts = [alert(1), alert(2, Grouping("transfer", wait=60, max_per_hour=3))]
    await queue(conns[0], alerts, "json://one")
    await queue(conns[0], [alert(3)], "json://one", now=NOW + 100)  # not yet due
    with SqliteStore(tmp_path / "watcher.db") as store:
        store.commit_step(StepToCommit.of("s", "t", {}, alerts, to_urls("json://one"), NOW))
        store.commit_step(
            StepToCommit.of("s", "t", {}, [alert(3)], to_urls("json://one"), NOW + 100)
        )
        expected = store.claim_due(NOW, group_limit=10)
    rows = await claims.claim_due(conns[0], token="a", claim_ttl=TTL, now=NOW, group_limit=10)
    assert len(rows) == 2 and rows == expected  # ids, values, status 'sending', the alert


async def test_a_live_claim_holds_its_url_an_expired_one_is_taken_again_with_a_new_token(
    conns: list[Connection],
) -> None:
    [first] = await queue(conns[0], [alert(1)], "json://one")
    [mine] = await claims.claim_due(conns[0], token="a", claim_ttl=TTL, now=NOW)
    [second] = await queue(conns[0], [alert(2)], "json://one")
    # The URL is claim a's while it lives: b takes neither row, not even the new one.
    assert await claims.claim_due(conns[1], token="b", claim_ttl=TTL, now=NOW) == []
    await expire_claims(conns[2])
    taken = await claims.claim_due(conns[1], token="b", claim_ttl=TTL, now=NOW)
    assert [row.id for row in taken] == [first, second] and mine.id == first
    assert await delivery(conns[2], first) == ("sending", "b", 0)


async def test_an_expired_claims_ack_changes_nothing(conns: list[Connection]) -> None:
    [id_] = await queue(conns[0], [alert(1, Grouping("transfer"))], "json://one")
    [row] = await claims.claim_due(conns[0], token="a", claim_ttl=TTL, now=NOW)
    await expire_claims(conns[2])
    [again] = await claims.claim_due(conns[1], token="b", claim_ttl=TTL, now=NOW)
    assert again.id == id_
    # a comes back from its stall and acks: nothing changes, the row stays b's.
    group = (str(row.group_key), row.url_id)
    assert await outbox.mark_sent(conns[0], [id_], "a", NOW + 1, group=group) == [id_]
    assert await outbox.mark_retry(conns[0], [id_], "a", "refused", NOW + 5) == [id_]
    assert await outbox.mark_dead(conns[0], GiveUp(id_, "gone", NOW + 1), "a") == [id_]
    assert await outbox.release(conns[0], [id_], "a") == [id_]
    assert await claims.extend_claim(conns[0], [id_], "a", TTL) == [id_]
    assert await delivery(conns[2], id_) == ("sending", "b", 0)
    assert await alert_status(conns[2], id_) == "queued"
    assert (await outbox.group_sends(conns[2], *group)).sent == ()  # no digest send recorded
    # b's ack, with the token that holds, does.
    assert await outbox.mark_sent(conns[1], [id_], "b", NOW + 2, group=group) == []
    assert await delivery(conns[2], id_) == ("sent", None, 1)
    assert await alert_status(conns[2], id_) == "sent"
    assert (await outbox.group_sends(conns[2], *group)).sent == (NOW + 2,)


async def test_an_ack_racing_a_takeover_lands_on_one_side_only(conns: list[Connection]) -> None:
    """The first claimer's ack and another's claim of the expired row, at once: either the ack
    holds (the row sent, not claimed) or the claim (the ack changes nothing), never both."""
    ack_won: list[bool] = []
    for n in range(20):
        [id_] = await queue(conns[0], [alert(n)], f"json://one/{n}")
        await claims.claim_due(conns[0], token=f"a{n}", claim_ttl=TTL, now=NOW)
        await expire_claims(conns[2])
        unchanged, taken = await asyncio.gather(
            outbox.mark_sent(conns[0], [id_], f"a{n}", NOW),
            claims.claim_due(conns[1], token=f"b{n}", claim_ttl=TTL, now=NOW),
        )
        status = await delivery(conns[2], id_)
        if unchanged == []:
            assert taken == [] and status == ("sent", None, 1)
        else:
            assert [r.id for r in taken] == [id_] and status == ("sending", f"b{n}", 0)
            await outbox.mark_sent(conns[1], [id_], f"b{n}", NOW)
        ack_won.append(unchanged == [])
    # Which side wins a round is the server's; the ack is sent first, so it wins some: a run
    # where it never did would not have tested the ack's side of the race.
    assert any(ack_won), "the ack never won a round"


async def test_a_claim_runs_out_by_the_databases_clock(conns: list[Connection]) -> None:
    [id_] = await queue(conns[0], [alert(1)], "json://one")
    await claims.claim_due(conns[0], token="a", claim_ttl=0.2, now=NOW)
    assert await claims.claim_due(conns[1], token="b", claim_ttl=TTL, now=NOW) == []
    started = await claims.db_now(conns[2])
    taken = []
    for _ in range(500):  # a condition with a deadline (10 s)
        taken = await claims.claim_due(conns[1], token="b", claim_ttl=TTL, now=NOW)
        if taken:
            break
        await asyncio.sleep(0.02)
    assert [r.id for r in taken] == [id_]
    assert await claims.db_now(conns[2]) - started >= 0.15  # not before its time


async def test_marks_with_the_claims_token_work(conns: list[Connection]) -> None:
    ids = await queue(conns[0], [alert(n) for n in range(3)], "json://one")
    rows = await claims.claim_due(conns[0], token="a", claim_ttl=TTL, now=NOW)
    assert [row.id for row in rows] == ids
    assert await outbox.mark_retry(conns[0], [ids[0]], "a", "refused", NOW + 30) == []
    assert await delivery(conns[1], ids[0]) == ("pending", None, 1)
    assert await outbox.release(conns[0], [ids[1]], "a", not_before=NOW + 30) == []
    assert await delivery(conns[1], ids[1]) == ("pending", None, 0)
    # Nothing due now; at NOW + 30 both are, for any claimer.
    assert await claims.claim_due(conns[1], token="b", claim_ttl=TTL, now=NOW) == []
    letter = alert(99)
    reports = DeadLetterReports.of({ids[2]: letter}, to_urls("json://fallback"))
    gone = await outbox.mark_dead(conns[0], GiveUp([ids[2]], "gone", NOW, reports), "a")
    assert gone == [] and await delivery(conns[1], ids[2]) == ("dead", None, 1)
    assert await alert_status(conns[1], ids[2]) == "dead"
    # The dead letter was queued in the same transaction, to the fallback URL.
    [report] = await claims.claim_due(conns[1], token="b", claim_ttl=TTL, now=NOW)
    assert report.alert.dedup_key == letter.dedup_key
    retried = await claims.claim_due(conns[1], token="c", claim_ttl=TTL, now=NOW + 30)
    assert [row.id for row in retried] == ids[:2]
    # A mark of an id that is not there says so.
    assert await outbox.mark_sent(conns[1], [ids[0], 123456], "c", NOW + 31) == [123456]


async def test_extending_a_claim_keeps_it_from_being_taken(conns: list[Connection]) -> None:
    [id_] = await queue(conns[0], [alert(1)], "json://one")
    await claims.claim_due(conns[0], token="a", claim_ttl=TTL, now=NOW)
    await expire_claims(conns[2])
    assert await claims.extend_claim(conns[0], [id_], "a", TTL) == []  # before anyone took it
    assert await claims.claim_due(conns[1], token="b", claim_ttl=TTL, now=NOW) == []
    assert await outbox.mark_sent(conns[0], id_, "a", NOW) == []


async def test_a_claim_completes_its_digest_groups(conns: list[Connection]) -> None:
    grouping = Grouping("transfer", wait=60)
    ids = await queue(conns[0], [alert(n, grouping) for n in range(5)], "json://one")
    rows = await claims.claim_due(
        conns[0], token="a", claim_ttl=TTL, now=NOW, limit=1, group_limit=10
    )
    assert [row.id for row in rows] == ids
    assert {row.group_key for row in rows} == {"big_transfer|transfer"}


async def test_two_deliveries_of_one_alert_marked_at_once_leave_it_sent(
    conns: list[Connection],
) -> None:
    """Each mark refreshes the alert's status after locking it: the later one sees the other's
    delivery sent (no 'partial' left behind by two snapshots taken together)."""
    for n in range(10):
        one, two = await queue(conns[0], [alert(n)], f"json://one/{n}", f"json://two/{n}")
        await claims.claim_due(conns[0], token=f"a{n}", claim_ttl=TTL, now=NOW, limit=1)
        await claims.claim_due(conns[1], token=f"b{n}", claim_ttl=TTL, now=NOW, limit=1)
        unchanged = await asyncio.gather(
            outbox.mark_sent(conns[0], one, f"a{n}", NOW),
            outbox.mark_sent(conns[1], two, f"b{n}", NOW),
        )
        assert list(unchanged) == [[], []]
        assert await alert_status(conns[2], one) == "sent"


async def test_notify_on_commit_wakes_a_listener(conninfo: str, conns: list[Connection]) -> None:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as listening:
        wakes = outbox.listen_outbox(listening, poll_timeout=60)
        first = asyncio.ensure_future(anext(wakes))
        # The LISTEN is in place once the listener waits: a notification before it is lost.
        await until_listening(conns[2])
        alerts = [alert(1)]
        routed = ResolvedDestinations.of(alerts, to_urls("json://one"))
        async with conns[0].transaction():
            await outbox.insert_alerts(conns[0], alerts, routed, NOW)
        assert await asyncio.wait_for(first, timeout=10) is True  # woken, not the 60 s poll
        await wakes.aclose()


async def test_a_rolled_back_insert_wakes_nobody_and_the_poll_still_does(
    conninfo: str, conns: list[Connection]
) -> None:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as listening:
        wakes = outbox.listen_outbox(listening, poll_timeout=0.3)
        first = asyncio.ensure_future(anext(wakes))
        await until_listening(conns[2])
        alerts = [alert(1)]
        routed = ResolvedDestinations.of(alerts, to_urls("json://one"))
        with pytest.raises(RuntimeError):
            async with conns[0].transaction():
                await outbox.insert_alerts(conns[0], alerts, routed, NOW)
                raise RuntimeError("rolled back")
        assert await asyncio.wait_for(first, timeout=10) is False  # the poll's timeout
        await wakes.aclose()


async def until_listening(conn: Connection, timeout: float = 10.0) -> None:  # noqa: ASYNC109
    """Wait (a condition with a deadline) until the listener's LISTEN has run: a notification
    committed before it would reach nobody."""
    for _ in range(int(timeout / 0.02)):
        if await _listening(conn):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no LISTEN after {timeout}s")


async def _listening(conn: Connection) -> bool:
    row = await (
        await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %%' AND state = 'idle' "
            "AND datname = current_database()"
        )
    ).fetchone()
    return row is not None and int(row[0]) > 0


async def test_a_graceful_release_wakes_a_listener(conninfo: str, conns: list[Connection]) -> None:
    [id_] = await queue(conns[0], [alert(1)], "json://one")
    await claims.claim_due(conns[0], token="a", claim_ttl=TTL, now=NOW)
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as listening:
        wakes = outbox.listen_outbox(listening, poll_timeout=60)
        first = asyncio.ensure_future(anext(wakes))
        await until_listening(conns[2])
        assert await outbox.release(conns[0], [id_], "a") == []
        assert await asyncio.wait_for(first, timeout=10) is True
        await wakes.aclose()
    [row] = await claims.claim_due(conns[1], token="b", claim_ttl=TTL, now=NOW)
    assert row.id == id_


async def test_listening_needs_an_autocommit_connection(conninfo: str) -> None:
    async with await psycopg.AsyncConnection.connect(conninfo) as conn:
        with pytest.raises(ValueError, match="autocommit"):
            await anext(outbox.listen_outbox(conn, poll_timeout=1))
