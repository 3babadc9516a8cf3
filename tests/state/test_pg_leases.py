"""Leased shards and fenced writes on a real PostgreSQL (``watcher.state.pg_leases``): each
test has its own database; several connections stand for several instances. Waits are on a
condition with a deadline (the database's clock, a lock wait seen in ``pg_stat_activity``),
never a fixed sleep; a paused (SIGSTOP-like) instance is one that simply does not renew."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import psycopg
import pytest
from psycopg.rows import TupleRow

from watcher.core.errors import LeaseLost, StateError
from watcher.state import pg_leases
from watcher.state.pg_leases import (
    NOW,
    acquire,
    fenced,
    held_shards,
    live_instances,
    prune_instances,
    register_instance,
    release,
    renew,
    renew_instance,
    retire,
    takeable_shards,
)
from watcher.state.postgresql_schema import migrate
from watcher.state.shards import SHARDS, balanced_share, plan, rank_of
from watcher.testing.postgres import Postgres

Connection = psycopg.AsyncConnection[TupleRow]
Connect = Callable[[], Awaitable[Connection]]
TTL = 30.0


@pytest.fixture
def database(postgres: Postgres) -> Iterator[str]:
    with postgres.database() as conninfo:
        yield conninfo


@pytest.fixture
async def connect(database: str) -> AsyncIterator[Connect]:
    """Opens autocommit connections to the test's migrated database (closed at the end)."""
    opened: list[Connection] = []

    async def open_connection() -> Connection:
        conn = await psycopg.AsyncConnection.connect(database, autocommit=True)
        opened.append(conn)
        return conn

    await migrate(await open_connection())
    yield open_connection
    for conn in opened:
        await conn.close()


async def eventually(predicate: Callable[[], Awaitable[object]], what: str) -> None:
    """Poll every 20 ms until ``predicate`` is truthy; fail after 10 s."""
    try:
        async with asyncio.timeout(10):
            while True:  # the condition is in the database: polled, no event to wait on
                if await predicate():
                    return
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out after 10 s waiting for {what}") from None


async def scalar(conn: Connection, query: str, params: list[object] | None = None) -> object:
    row = await (await conn.execute(query, params)).fetchone()
    assert row is not None
    return row[0]


async def expire(conn: Connection, *shards: int) -> None:
    """The owner paused past its lease: the expiry put in the past (by the database's clock)."""
    await conn.execute(
        f"UPDATE shard_leases SET expires_at = {NOW} - 1 WHERE shard = ANY(%s::bigint[])",
        [list(shards)],
    )


async def target_rows(conn: Connection) -> list[str]:
    rows = await (await conn.execute("SELECT target FROM targets ORDER BY target")).fetchall()
    return [row[0] for row in rows]


async def write_target(conn: Connection, target: str) -> None:
    await conn.execute(
        "INSERT INTO targets (source, target, state, updated_at) VALUES ('s', %s, '{}', 0)",
        [target],
    )


# -- schema ---------------------------------------------------------------------------------------


async def test_the_database_starts_with_every_shard_free_at_epoch_0(connect: Connect) -> None:
    conn = await connect()
    query = "SELECT COUNT(*), COUNT(owner), MIN(shard), MAX(shard), SUM(epoch) FROM shard_leases"
    expected = (SHARDS, 0, 0, SHARDS - 1, 0)
    assert await (await conn.execute(query)).fetchone() == expected
    assert await takeable_shards(conn) == list(range(SHARDS))


# -- instances ------------------------------------------------------------------------------------


async def test_instances_register_renew_go_stale_and_are_pruned(connect: Connect) -> None:
    conn = await connect()
    await register_instance(conn, "b", host="box-b", pid=2)
    await register_instance(conn, "a", host="box-a", pid=1)
    live = await live_instances(conn, TTL)
    assert [(i.instance_id, i.host, i.pid) for i in live] == [("a", "box-a", 1), ("b", "box-b", 2)]
    db_now = await scalar(conn, f"SELECT {NOW}")
    assert isinstance(db_now, float)
    assert all(abs(i.renewed_at - db_now) < 5 and i.started_at <= i.renewed_at for i in live)

    # b pauses (renews nothing) for longer than the ttl: no longer live.
    await conn.execute("UPDATE instances SET renewed_at = renewed_at - 100 WHERE instance_id = 'b'")
    assert [i.instance_id for i in await live_instances(conn, TTL)] == ["a"]
    assert await renew_instance(conn, "b") is True  # it resumes: live again
    assert [i.instance_id for i in await live_instances(conn, TTL)] == ["a", "b"]

    await conn.execute("UPDATE instances SET renewed_at = renewed_at - 100 WHERE instance_id = 'b'")
    assert await prune_instances(conn, dead_for=50) == 1
    assert await renew_instance(conn, "b") is False  # pruned: it must register again
    await register_instance(conn, "b", host="box-b", pid=3)
    assert [i.pid for i in await live_instances(conn, TTL)] == [1, 3]


# -- acquire, renew, release ----------------------------------------------------------------------


async def test_acquire_takes_free_shards_lowest_first_at_a_new_epoch(connect: Connect) -> None:
    conn = await connect()
    assert await acquire(conn, "a", 3, TTL) == {0: 1, 1: 1, 2: 1}
    assert await acquire(conn, "b", 2, TTL) == {3: 1, 4: 1}
    assert await acquire(conn, "b", 5, TTL, among=[10, 5, 2]) == {5: 1, 10: 1}  # 2 is a's
    assert await acquire(conn, "b", 0, TTL) == {}
    assert await acquire(conn, "b", 5, TTL, among=[]) == {}
    assert await held_shards(conn) == {
        "a": {0: 1, 1: 1, 2: 1},
        "b": {3: 1, 4: 1, 5: 1, 10: 1},
    }
    takeable = await takeable_shards(conn)
    assert takeable[:3] == [6, 7, 8] and len(takeable) == SHARDS - 7
    expires = await scalar(conn, f"SELECT expires_at - {NOW} FROM shard_leases WHERE shard = 0")
    assert isinstance(expires, float) and TTL - 5 < expires <= TTL  # by the database's clock


async def test_renew_extends_what_is_still_held_and_a_lapsed_lease_is_lost(
    connect: Connect,
) -> None:
    conn = await connect()
    await acquire(conn, "a", 4, 5.0)
    await expire(conn, 1)  # a paused past shard 1's lease
    assert await renew(conn, "a", {0, 1, 2, 3, 99}, TTL) == {0, 2, 3}
    assert await renew(conn, "b", {0}, TTL) == set()  # not b's
    assert await takeable_shards(conn) == [1, *range(4, SHARDS)]
    assert await acquire(conn, "b", 1, TTL) == {1: 2}  # taken over: epoch 2
    assert await renew(conn, "a", {1}, TTL) == set()  # lost for good
    assert await renew(conn, "a", set(), TTL) == set()
    held = await held_shards(conn)
    assert held == {"a": {0: 1, 2: 1, 3: 1}, "b": {1: 2}}
    renewed = await scalar(
        conn, f"SELECT MIN(expires_at - {NOW}) FROM shard_leases WHERE owner = 'a'"
    )
    assert isinstance(renewed, float) and renewed > 5.0  # extended to TTL from now


async def test_release_hands_shards_back_for_another_to_take_at_once(connect: Connect) -> None:
    conn = await connect()
    await acquire(conn, "a", 5, TTL)
    assert await release(conn, "b", {0, 1}) == set()  # only the owner releases
    assert await release(conn, "a", {3, 4, 7}) == {3, 4}
    assert await release(conn, "a", set()) == set()
    assert await takeable_shards(conn) == list(range(3, SHARDS))
    assert await acquire(conn, "b", 2, TTL) == {3: 2, 4: 2}
    assert await held_shards(conn) == {"a": {0: 1, 1: 1, 2: 1}, "b": {3: 2, 4: 2}}


async def test_retire_releases_everything_and_deletes_the_heartbeat(connect: Connect) -> None:
    conn = await connect()
    await register_instance(conn, "a", host="h", pid=1)
    await acquire(conn, "a", 3, TTL)
    assert await retire(conn, "a") == [0, 1, 2]
    assert await live_instances(conn, TTL) == []
    assert await takeable_shards(conn) == list(range(SHARDS))


async def test_epochs_grow_on_every_takeover(connect: Connect) -> None:
    conn = await connect()
    epochs = []
    for owner in ["a", "b", "a", "a", "c"]:
        taken = await acquire(conn, owner, 1, TTL, among=[7])
        assert list(taken) == [7]
        epochs.append(taken[7])
        await expire(conn, 7)  # lapsed, or handed back: either way the next take is new
        if owner == "a":
            await release(conn, "a", {7})
    assert epochs == [1, 2, 3, 4, 5]


async def test_two_instances_acquiring_at_once_never_get_the_same_shard(
    connect: Connect,
) -> None:
    conns = [await connect() for _ in range(3)]
    for round_ in range(5):
        taken = await asyncio.gather(
            *(acquire(conn, f"i{n}", 400, TTL) for n, conn in enumerate(conns))
        )
        keys = [set(t) for t in taken]
        assert sum(map(len, keys)) == SHARDS, round_  # 400 + 400 + 224: nobody waited or lost
        assert set().union(*keys) == set(range(SHARDS))
        assert await held_shards(conns[0]) == {f"i{n}": t for n, t in enumerate(taken)}
        await conns[0].execute(f"UPDATE shard_leases SET owner = NULL, expires_at = {NOW}")


async def test_lease_operations_refuse_a_connection_already_in_a_transaction(
    database: str, connect: Connect
) -> None:
    await connect()  # migrated
    conn = await psycopg.AsyncConnection.connect(database)  # not autocommit
    async with conn:
        await conn.execute("SELECT 1")  # opens a transaction
        with pytest.raises(RuntimeError, match="transaction of its own"):
            await acquire(conn, "a", 1, TTL)
        await conn.rollback()
        assert await acquire(conn, "a", 1, TTL) == {0: 1}
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


# -- fair shares ----------------------------------------------------------------------------------


async def lease_loop_turn(conn: Connection, me: str, held: dict[int, int]) -> None:
    """One turn of an instance's lease loop: heartbeat, renew, plan, hand back, take."""
    await renew_instance(conn, me)
    kept = await renew(conn, me, held, TTL)
    for shard in set(held) - kept:
        del held[shard]
    live = [i.instance_id for i in await live_instances(conn, TTL)]
    share = balanced_share(len(set(live) | {me}), rank_of(me, live))
    step = plan(set(held), await takeable_shards(conn), share)
    for shard in await release(conn, me, step.release):
        del held[shard]
    held.update(await acquire(conn, me, len(step.take), TTL, among=step.take))


async def test_three_instances_settle_on_fair_shares_and_two_share_a_retired_ones(
    connect: Connect,
) -> None:
    names = ["a", "b", "c"]
    conns = {me: await connect() for me in names}
    held: dict[str, dict[int, int]] = {me: {} for me in names}
    for me in names:  # they start one after another: the first one takes everything
        await register_instance(conns[me], me, host=me, pid=1)
        await lease_loop_turn(conns[me], me, held[me])
    assert len(held["a"]) == SHARDS
    for _ in range(3):
        for me in names:
            await lease_loop_turn(conns[me], me, held[me])
    counts = {me: len(shards) for me, shards in held.items()}
    assert counts == {"a": 342, "b": 341, "c": 341}
    assert await held_shards(conns["a"]) == held  # what each believes is what the table says
    assert await takeable_shards(conns["a"]) == []

    # c stops gracefully: its shards are free at once, and a and b take them.
    await retire(conns["c"], "c")
    del held["c"]
    for _ in range(2):
        for me in ["a", "b"]:
            await lease_loop_turn(conns[me], me, held[me])
    assert {me: len(shards) for me, shards in held.items()} == {"a": 512, "b": 512}
    assert await held_shards(conns["a"]) == held


async def test_a_paused_instances_shards_go_to_the_others_and_come_back_when_it_resumes(
    connect: Connect,
) -> None:
    names = ["a", "b", "c"]
    conns = {me: await connect() for me in names}
    held: dict[str, dict[int, int]] = {me: {} for me in names}
    for me in names:
        await register_instance(conns[me], me, host=me, pid=1)
    for _ in range(3):
        for me in names:
            await lease_loop_turn(conns[me], me, held[me])
    was_cs = set(held["c"])
    # c stops (SIGSTOP): it renews nothing; its heartbeat and leases lapse (moved into the past
    # by the database's clock rather than waited for).
    observer = await connect()
    await observer.execute(f"UPDATE instances SET renewed_at = {NOW} - 100 WHERE instance_id='c'")
    await expire(observer, *was_cs)
    for _ in range(2):
        for me in ["a", "b"]:
            await lease_loop_turn(conns[me], me, held[me])
    assert {len(held["a"]), len(held["b"])} == {512}
    table = await held_shards(observer)
    assert set(table) == {"a", "b"}
    assert {table[owner][shard] for owner in table for shard in was_cs & set(table[owner])} == {2}
    # c resumes (SIGCONT): its renewal tells it everything is lost; it counts again, the
    # others hand back their surplus, and the three settle as before.
    for _ in range(3):
        for me in names:
            await lease_loop_turn(conns[me], me, held[me])
    assert {me: len(shards) for me, shards in held.items()} == {"a": 342, "b": 341, "c": 341}
    assert await held_shards(observer) == held


# -- fencing --------------------------------------------------------------------------------------


async def test_a_fenced_write_commits_while_the_lease_holds(connect: Connect) -> None:
    conn, other = await connect(), await connect()
    epoch = (await acquire(conn, "x", 1, TTL))[0]
    async with fenced(conn, 0, "x", epoch) as tx:
        await write_target(tx, "t1")
        assert await target_rows(other) == []  # not committed yet
    assert await target_rows(other) == ["t1"]


@pytest.mark.parametrize("stale", ["epoch", "owner", "lapsed", "released", "taken over"])
async def test_a_stale_fenced_write_raises_lease_lost_and_writes_nothing(
    connect: Connect, stale: str
) -> None:
    conn = await connect()
    epoch = (await acquire(conn, "x", 1, TTL))[0]
    owner = "x"
    if stale == "epoch":
        epoch -= 1
    elif stale == "owner":
        owner = "y"
    elif stale == "lapsed":
        await expire(conn, 0)
    elif stale == "released":
        await release(conn, "x", {0})
    else:
        await expire(conn, 0)
        assert await acquire(conn, "y", 1, TTL) == {0: 2}
    ran = False
    with pytest.raises(LeaseLost) as caught:
        async with fenced(conn, 0, owner, epoch) as tx:
            ran = True
            await write_target(tx, "t1")
    assert not ran
    assert (caught.value.shard, caught.value.owner, caught.value.epoch) == (0, owner, epoch)
    assert isinstance(caught.value, StateError) and not caught.value.transient
    assert caught.value.during("flush states") is caught.value
    assert "shard 0" in str(caught.value) and "lost" in str(caught.value)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # rolled back
    assert await target_rows(conn) == []


async def test_fence_in_keeps_the_shards_still_held_at_their_epochs(connect: Connect) -> None:
    conn = await connect()
    epochs = await acquire(conn, "x", 4, TTL)  # shards 0-3, each at epoch 1
    await expire(conn, 1)
    await release(conn, "x", {2})
    with pytest.raises(RuntimeError):  # it fences inside the caller's transaction only
        await pg_leases.fence_in(conn, "x", epochs)
    async with conn.transaction():
        stale = {**epochs, 3: epochs[3] - 1}
        assert await pg_leases.fence_in(conn, "x", stale) == {0}  # 1 lapsed, 2 released
        assert await pg_leases.fence_in(conn, "y", epochs) == set()
        assert await pg_leases.fence_in(conn, "x", {}) == set()


async def test_an_error_inside_a_fenced_write_rolls_it_back(connect: Connect) -> None:
    conn = await connect()
    epoch = (await acquire(conn, "x", 1, TTL))[0]
    with pytest.raises(ZeroDivisionError):
        async with fenced(conn, 0, "x", epoch) as tx:
            await write_target(tx, "t1")
            raise ZeroDivisionError
    assert await target_rows(conn) == []
    assert await renew(conn, "x", {0}, TTL) == {0}  # no lock left behind


async def backend_waits_on_a_lock(observer: Connection, waiter: Connection) -> bool:
    """Whether ``waiter``'s server process waits on a lock now (``pg_stat_activity``)."""
    kind = await scalar(
        observer,
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
        [waiter.info.backend_pid],
    )
    return kind == "Lock"


async def test_a_takeover_comes_after_an_open_fenced_write_then_the_stale_epoch_fails(
    connect: Connect,
) -> None:
    a, b, observer = await connect(), await connect(), await connect()
    # X holds shard 5 with a short lease, opens a fenced write and pauses there: it renews
    # nothing (a SIGSTOP, a long GC), so its lease lapses by the database's clock meanwhile.
    taken = await acquire(a, "x", 1, 2.0, among=[5])
    assert list(taken) == [5]
    epoch = taken[5]

    attempts = 0

    async def take_over() -> dict[int, int]:
        """Y's lease loop: tries to take shard 5 again and again until it gets it."""
        nonlocal attempts
        while True:
            attempts += 1
            got = await acquire(b, "y", 1, TTL, among=[5])
            if got:
                return got
            await asyncio.sleep(0.02)

    async with fenced(a, 5, "x", epoch) as tx:
        await write_target(tx, "before the pause")

        async def lapsed() -> bool:
            return await takeable_shards(observer) == list(range(SHARDS))

        await eventually(lapsed, "shard 5's lease to lapse by the database's clock")
        # Lapsed, so acquire would take it, but the fenced write holds its row FOR SHARE:
        # acquire skips the locked row (it does not wait) and takes nothing.
        assert await acquire(b, "y", 1, TTL, among=[5]) == {}
        assert not await backend_waits_on_a_lock(observer, b)
        takeover = asyncio.create_task(take_over())

        async def tried_a_few_times() -> bool:
            return attempts >= 5

        await eventually(tried_a_few_times, "Y's lease loop to try a few times")
        assert not takeover.done()  # no takeover while X's write is open
        await write_target(tx, "after the pause")  # still X's: commits with the rest
    # X's transaction committed: Y's next try takes the shard, at the next epoch.
    assert await asyncio.wait_for(takeover, timeout=10) == {5: epoch + 1}
    assert await target_rows(observer) == ["after the pause", "before the pause"]

    # X resumes and writes again with its old epoch: refused, nothing written.
    with pytest.raises(LeaseLost):
        async with fenced(a, 5, "x", epoch) as tx:
            await write_target(tx, "stale")
    assert await renew(a, "x", {5}, TTL) == set()  # X learns it lost the shard
    assert await target_rows(observer) == ["after the pause", "before the pause"]
    async with fenced(b, 5, "y", epoch + 1) as tx:  # Y's writes go through
        await write_target(tx, "new owner")
    assert "new owner" in await target_rows(observer)


async def test_an_update_of_the_lease_row_waits_for_an_open_fenced_write(
    connect: Connect,
) -> None:
    # The other side of FOR SHARE: an UPDATE of the row (here the owner's own renewal on its
    # other connection) waits until the fenced transaction ends, then goes on.
    a, b, observer = await connect(), await connect(), await connect()
    epoch = (await acquire(a, "x", 1, TTL))[0]
    async with fenced(a, 0, "x", epoch) as tx:
        await write_target(tx, "t1")
        renewal = asyncio.create_task(renew(b, "x", {0}, TTL))

        async def renewal_waits() -> bool:
            return await backend_waits_on_a_lock(observer, b)

        await eventually(renewal_waits, "the renewal to wait on the lease row's lock")
        assert not renewal.done()
    assert await asyncio.wait_for(renewal, timeout=10) == {0}


async def test_a_fence_check_waits_for_an_uncommitted_change_of_its_row_then_judges_it(
    connect: Connect,
) -> None:
    # X's lease is live, but a change of its row is in flight (here X's own release, from its
    # other connection, not yet committed) when X opens a fenced write: the FOR SHARE check
    # waits for that transaction, then checks the row as committed: the owner is gone: lost.
    a, b, observer = await connect(), await connect(), await connect()
    epoch = (await acquire(a, "x", 1, TTL))[0]
    write: asyncio.Task[None] | None = None
    async with b.transaction():
        await b.execute(f"UPDATE shard_leases SET owner = NULL, expires_at = {NOW} WHERE shard = 0")

        async def fenced_write() -> None:
            async with fenced(a, 0, "x", epoch) as tx:
                await write_target(tx, "stale")

        write = asyncio.create_task(fenced_write())

        async def write_waits() -> bool:
            return await backend_waits_on_a_lock(observer, a)

        await eventually(write_waits, "the fence check to wait on the release's lock")
        assert not write.done()
    with pytest.raises(LeaseLost):
        await asyncio.wait_for(write, timeout=10)
    assert await target_rows(observer) == []


async def test_a_fence_check_on_a_lapsed_lease_fails_at_once_even_during_a_takeover(
    connect: Connect,
) -> None:
    # A takeover only takes a lapsed lease, and a lapsed lease fails the check as committed:
    # X's fence fails without waiting for Y's uncommitted takeover.
    a, b = await connect(), await connect()
    epoch = (await acquire(a, "x", 1, TTL))[0]
    await expire(a, 0)
    async with b.transaction():
        await b.execute(
            f"""UPDATE shard_leases SET owner = 'y', epoch = epoch + 1, expires_at = {NOW} + 30
            WHERE shard = 0"""
        )
        with pytest.raises(LeaseLost):
            async with asyncio.timeout(5), fenced(a, 0, "x", epoch) as tx:
                await write_target(tx, "stale")
    assert await target_rows(a) == []


def test_the_module_names_what_it_exports() -> None:
    assert all(hasattr(pg_leases, name) for name in pg_leases.__all__)
