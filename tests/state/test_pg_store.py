"""Several instances on one PostgreSQL (``watcher.state.pg_store``): each ``PostgresStore`` here
stands for one ``watcher run``. Leases settle on balanced shares, a stale owner writes nothing,
a graceful stop hands its shards over, claims are never shared. A paused instance is one that
does not run its lease round; lapsed leases are put in the past by the database's clock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack

import psycopg
import pytest

from watcher.budget.cadences import CADENCE_KEY
from watcher.core.errors import LeaseLost, TransientStateError
from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import Destination
from watcher.state.interface import StepToCommit
from watcher.state.pg_leases import NOW
from watcher.state.pg_pool import PoolLimits
from watcher.state.pg_store import PostgresStore
from watcher.state.records import SourceRound
from watcher.state.shards import SHARDS, shard_of
from watcher.testing.postgres import Postgres

OPS = Destination("ops", "json://127.0.0.1:9/ops")


def alert(key: str) -> AlertMessage:
    return AlertMessage("r", "warning", "subj", "event", key, "t", "b", ("ops",), {})


@pytest.fixture
def database(postgres: Postgres) -> Iterator[str]:
    with postgres.database() as url:
        yield url


@pytest.fixture
async def instances(database: str) -> AsyncIterator[Callable[[str], PostgresStore]]:
    """Builds started-later stores on the test's database (closed at the end)."""
    async with AsyncExitStack() as stack:

        def make(name: str) -> PostgresStore:
            store = PostgresStore(database, instance=name)
            stack.push_async_callback(store.close)
            return store

        yield make


def to_url(n: int) -> Callable[[AlertMessage], list[Destination]]:
    return lambda _alert: [Destination("ops", f"json://h/{n}")]


async def expire_all(url: str, owner: str) -> None:
    """``owner`` paused past its leases: their expiry put in the past by the database's clock."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            f"UPDATE shard_leases SET expires_at = {NOW} - 1 WHERE owner = %s", [owner]
        )
        await conn.execute(
            f"UPDATE instances SET renewed_at = {NOW} - 100 WHERE instance_id = %s", [owner]
        )


async def settle(*stores: PostgresStore, rounds: int = 4) -> None:
    for _ in range(rounds):
        for store in stores:
            await store.maintain_leases()


async def test_three_instances_settle_on_balanced_shares_with_no_shard_held_twice(
    instances: Callable[[str], PostgresStore],
) -> None:
    a, b, c = instances("a"), instances("b"), instances("c")
    await a.start()
    await a.maintain_leases()
    assert a.shards_held() == frozenset(range(SHARDS))  # alone at first: everything
    await b.start()
    await c.start()
    await settle(a, b, c)
    held = [
        a.shards_held() or frozenset(),
        b.shards_held() or frozenset(),
        c.shards_held() or frozenset(),
    ]
    assert sorted(len(h) for h in held) == [341, 341, 342]
    assert frozenset().union(*held) == frozenset(range(SHARDS))
    assert sum(len(h) for h in held) == SHARDS


async def test_the_shards_held_are_the_same_set_until_they_move(
    instances: Callable[[str], PostgresStore], database: str
) -> None:
    """A sweep compares the set it started with to the store's (``Sweeper._poll``): the same
    object means nothing moved, so the set must be a new one whenever a shard comes or goes."""
    a, b = instances("a"), instances("b")
    await a.start()
    await a.maintain_leases()
    alone = a.shards_held()
    await a.maintain_leases()  # renewed, nothing moved
    assert a.shards_held() is alone and alone == frozenset(range(SHARDS))
    await b.start()
    await settle(a, b)
    halved = a.shards_held()
    assert halved is not alone and len(halved or ()) == SHARDS // 2
    await expire_all(database, "a")  # paused past its leases: b takes them at its next round
    await settle(b, rounds=1)
    await a.maintain_leases()  # renews nothing: every shard of a is lost
    assert a.shards_held() is not halved and a.shards_held() == frozenset()


async def test_a_graceful_stop_hands_every_shard_over_at_the_next_round(
    instances: Callable[[str], PostgresStore],
) -> None:
    a, b = instances("a"), instances("b")
    await a.start()
    await b.start()
    await settle(a, b)
    assert len(b.shards_held() or ()) == SHARDS // 2
    await a.close()
    done = await b.maintain_leases()
    assert done.held == SHARDS and done.live_instances == 1


async def test_each_instance_has_its_own_last_round_of_a_source_until_it_is_gone(
    instances: Callable[[str], PostgresStore],
) -> None:
    a, b = instances("a"), instances("b")
    await a.start()
    await b.start()
    await settle(a, b)
    await a.record_round(SourceRound("votes", 10.0, 4, 0, 0.5, 10.0))
    await b.record_round(SourceRound("votes", 11.0, 3, 3, 0.7, None))  # b's round all failed
    await a.record_round(SourceRound("votes", 12.0, 4, 4, 0.6, None))  # and then a's
    assert (await a.status(CADENCE_KEY)).rounds == [
        SourceRound("votes", 12.0, 4, 4, 0.6, 10.0, instance="a"),
        SourceRound("votes", 11.0, 3, 3, 0.7, None, instance="b"),
    ]
    await a.close()  # a graceful stop: its round goes at the others' next lease round
    await b.maintain_leases()
    assert (await b.status(CADENCE_KEY)).rounds == [
        SourceRound("votes", 11.0, 3, 3, 0.7, None, instance="b")
    ]


async def test_a_stale_owner_writes_nothing_and_drops_the_shard(
    instances: Callable[[str], PostgresStore], database: str
) -> None:
    a, b = instances("a"), instances("b")
    await a.start()
    await a.maintain_leases()
    target = "addr1"
    shard = shard_of("signatures", target)
    await a.commit_step(StepToCommit.of("signatures", target, {"v": 1}, [], lambda _a: [], 1.0))
    a.stage_state("signatures", "addr1", {"v": 2}, 2.0)
    # a pauses past its leases; b starts and takes everything over (at new epochs).
    await expire_all(database, "a")
    await b.start()
    assert (await b.maintain_leases()).held == SHARDS
    # a resumes: its step and its flush roll back, nothing of it is written.
    with pytest.raises(LeaseLost):
        await a.commit_step(
            StepToCommit.of("signatures", target, {"v": 3}, [alert("k")], lambda _a: [OPS], 3.0)
        )
    assert await a.flush_states() == 0
    assert not a.holds("signatures", target)
    assert await b.load_state("signatures", target) == {"v": 1}
    assert await b.pending_count() == 0
    assert shard in (b.shards_held() or ())
    # and its next round finds its leases gone.
    done = await a.maintain_leases()
    assert done.held == 0 and done.live_instances == 2


async def test_an_instance_whose_renewals_fail_stops_offering_its_shards() -> None:
    clock = [0.0]
    store = PostgresStore(
        "host=/nonexistent dbname=none",
        instance="cut-off",
        lease_ttl=15.0,
        limits=PoolLimits(wait_timeout=0.5, connect_timeout=1.0),
        monotonic=lambda: clock[0],
    )
    store._shards.taken({1: 1, 2: 1})  # as if its last round (at 0) had kept them
    store._shards.renewed({1, 2}, 0.0, 15.0)
    assert store.shards_held() == frozenset({1, 2})
    clock[0] = 15.0  # no renewal since: the leases may have lapsed
    assert store.shards_held() == frozenset()
    assert not store.holds("s", "t")


async def test_two_instances_never_claim_the_same_delivery(
    instances: Callable[[str], PostgresStore],
) -> None:
    a, b = instances("a"), instances("b")
    await a.start()
    await a.maintain_leases()
    for n in range(40):
        await a.commit_step(StepToCommit.of("s", f"t{n}", {}, [alert(f"k{n}")], to_url(n % 7), 1.0))
    await b.start()
    first, second = await asyncio.gather(a.claim_due(1.0, limit=50), b.claim_due(1.0, limit=50))
    more = await a.claim_due(1.0, limit=50) + await b.claim_due(1.0, limit=50)
    ids = [row.id for row in [*first, *second, *more]]
    assert len(ids) == len(set(ids)) == 40


async def test_next_due_leaves_out_a_url_another_instance_is_sending_to(
    instances: Callable[[str], PostgresStore], database: str
) -> None:
    """While another instance holds a URL's claim, its rows are that instance's to send: they
    do not make this one claim again (until the claim expires)."""
    a, b = instances("a"), instances("b")
    await a.start()
    await b.start()
    await a.maintain_leases()
    for n in range(2):
        await a.commit_step(StepToCommit.of("s", f"t{n}", {}, [alert(f"k{n}")], to_url(0), 1.0))
    await a.commit_step(StepToCommit.of("s", "t2", {}, [alert("k2")], to_url(1), 2.0))
    (first,) = await a.claim_due(1.0, limit=1)
    assert [first.url_id] == [d.url_id for d in to_url(0)(first.alert)]
    assert await a.next_due() == 1.0  # its own claim: the second row to the URL is a's too
    assert await b.next_due() == 2.0  # a holds json://h/0: only json://h/1's row is b's
    async with await psycopg.AsyncConnection.connect(database, autocommit=True) as conn:
        await conn.execute(f"UPDATE deliveries SET claim_expires_at = {NOW} - 1")
    assert await b.next_due() == 1.0  # a's claim expired: its URL's rows are anyone's


async def test_a_late_ack_of_a_claim_taken_over_changes_nothing(
    instances: Callable[[str], PostgresStore], database: str
) -> None:
    a, b = instances("a"), instances("b")
    await a.start()
    await b.start()
    await a.maintain_leases()
    await a.commit_step(StepToCommit.of("s", "t", {}, [alert("k")], lambda _a: [OPS], 1.0))
    (row,) = await a.claim_due(1.0)
    async with await psycopg.AsyncConnection.connect(database, autocommit=True) as conn:
        await conn.execute(f"UPDATE deliveries SET claim_expires_at = {NOW} - 1")
    (taken,) = await b.claim_due(1.0)  # a's claim expired: b takes it
    assert taken.id == row.id
    assert await a.mark_sent([row.id], 2.0) == [row.id]  # a's ack: not changed
    assert await b.mark_sent([row.id], 3.0) == []
    (record,) = await b.history()
    assert record.status == "sent" and record.deliveries[0].sent_at == 3.0


async def test_an_unreachable_database_is_a_transient_error() -> None:
    store = PostgresStore(
        "host=/nonexistent dbname=none",
        instance="x",
        limits=PoolLimits(wait_timeout=0.5, connect_timeout=1.0),
    )
    with pytest.raises(TransientStateError) as raised:
        await store.start()
    assert raised.value.operation == "open the state database"
    await store.close()


async def test_deliveries_queued_by_one_instance_wake_the_others_sender(
    instances: Callable[[str], PostgresStore],
) -> None:
    a, b = instances("a"), instances("b")
    await a.start()
    await a.maintain_leases()
    await b.start()
    woken = asyncio.Event()
    listening = asyncio.create_task(b.watch_outbox(woken.set))
    try:
        # The LISTEN is in place once its backend shows in pg_stat_activity as listening; simpler
        # and as sure: commit until the wake comes (each commit notifies), with a deadline.
        async with asyncio.timeout(10):
            n = 0
            while not woken.is_set():
                n += 1
                await a.commit_step(
                    StepToCommit.of("s", f"t{n}", {}, [alert(f"w{n}")], to_url(1), 1.0)
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), 0.2)
    finally:
        listening.cancel()
