"""A round's summary line (`round`, info level) says what the sweep did: its targets, failures,
the RPC calls it made and the alerts it committed, counted per sweep even when sweeps overlap."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from structlog.testing import capture_logs

from watcher.kinds.ruleset import Job
from watcher.simulator.keys import derived_pubkey
from watcher.state.shards import SHARDS
from watcher.state.store import AsyncSqliteStore

from support.seeded import MINT, TREASURY, World, daemon_worlds


@pytest.fixture
async def make_world(tmp_path: Path) -> AsyncIterator[Callable[..., World]]:
    async with daemon_worlds(tmp_path) as make:
        yield make


def rounds(logs: list[MutableMapping[str, Any]]) -> dict[str, MutableMapping[str, Any]]:
    return {line["source"]: line for line in logs if line["event"] == "round"}


def deposits(make_world: Callable[..., World], label: str) -> tuple[World, tuple[str, ...], Job]:
    """A world of 25 addresses with a transaction each, one rule watching them every second,
    batches of 10; the addresses, and the job sweeping them."""
    addresses = tuple(derived_pubkey(f"{label} {i}") for i in range(25))
    rule = {
        "name": "deposits",
        "kind": "new_transactions",
        "addresses": list(addresses),
        "every": "1s",
        "notify": ["hooks"],
    }
    world = make_world(rules=[rule], rpc={"batch_size": 10})
    for address in addresses:
        world.ledger.add_transactions(address, 1)
    return world, addresses, Job("signatures", 1.0, addresses)


async def test_the_summary_counts_the_calls_the_node_saw_and_the_alerts_committed(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    signatures = Job("signatures", 1.0, (TREASURY,))
    holders = Job("holders", 1.0, (MINT,))
    await asyncio.gather(world.daemon.sweep(signatures), world.daemon.sweep(holders))  # baseline

    world.ledger.add_transactions(TREASURY, 3)
    before_alerts = len(await world.alerts())
    before_calls = world.server_calls()
    world.now[0] += 5
    with capture_logs() as logs:
        await asyncio.gather(world.daemon.sweep(signatures), world.daemon.sweep(holders))
    said = rounds(logs)
    assert said["signatures"]["targets"] == 1 and said["signatures"]["failed"] == 0
    assert said["signatures"]["alerts"] == len(await world.alerts()) - before_alerts > 0
    assert said["holders"]["alerts"] == 0  # nothing moved: the sweeps' counts stay apart
    assert said["holders"]["calls"] == 1
    assert said["signatures"]["calls"] + said["holders"]["calls"] == (
        world.server_calls() - before_calls
    )
    # The treasury moved: its balance read is one of the calls, and said.
    assert said["signatures"]["balance_reads"] == 1
    assert said["holders"]["balance_reads"] == 0


async def test_a_quiet_round_writes_nothing_and_a_busy_one_writes_its_step(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    signatures = Job("signatures", 1.0, (TREASURY,))
    await world.daemon.sweep(signatures)  # the baseline is written
    assert await world.state("signatures", TREASURY)
    commits = world.daemon.store.commits
    for _ in range(3):
        world.now[0] += 1
        await world.daemon.sweep(signatures)
    assert world.daemon.store.commits == commits  # nothing new: not one transaction

    cursor = await world.cursor()
    world.ledger.add_transactions(TREASURY, 2)
    world.now[0] += 1
    await world.daemon.sweep(signatures)
    assert world.daemon.store.commits == commits + 1  # the step and its alerts, together
    assert await world.cursor() != cursor
    assert [alert.title.split(": ")[1][:18] for alert in await world.alerts()] == [
        "2 new transactions"
    ]


async def test_a_first_sweep_writes_its_baselines_together_in_one_transaction(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    addresses = (TREASURY, *(derived_pubkey(f"rounds address {n}") for n in range(60)))
    commits = world.daemon.store.commits
    await world.daemon.sweep(Job("signatures", 1.0, addresses))
    assert world.daemon.store.commits == commits + 1  # 61 baselines: one transaction
    assert all([await world.state("signatures", address) for address in addresses])


async def test_a_poll_that_raises_fails_its_target_only_and_the_sweep_goes_on(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    broken = derived_pubkey("rounds broken state")
    signatures = Job("signatures", 1.0, (broken, TREASURY))
    await world.daemon.sweep(signatures)  # baselines
    # A state an older version wrote: the kind's step cannot read it and raises.
    world.daemon.store.stage_state("signatures", broken, {"cursor": 42}, world.now[0])
    await world.daemon.store.flush_states()
    world.ledger.add_transactions(TREASURY, 2)

    with capture_logs() as logs:
        for _ in range(2):
            world.now[0] += 1
            await world.daemon.sweep(signatures)
    said = [line for line in logs if line["event"] == "round"]
    assert [(line["targets"], line["failed"]) for line in said] == [(2, 1), (2, 1)]
    raised = [line for line in logs if line["event"].startswith("poll raised")]
    assert [(line["log_level"], line["target"]) for line in raised] == [
        ("error", broken),  # once per stretch, naming the target
        ("debug", broken),
    ]
    # The target after the broken one was polled: its transactions were alerted.
    assert [alert.title.split(": ")[1][:18] for alert in await world.alerts()] == [
        "2 new transactions"
    ]
    scrape = world.daemon.metrics.exposition().decode()
    assert 'watcher_poll_errors_total{source="signatures"} 2.0' in scrape

    # A clean state again: the stretch ends, said once.
    world.daemon.store.stage_state(
        "signatures", broken, await world.state("signatures", TREASURY), world.now[0]
    )
    await world.daemon.store.flush_states()
    with capture_logs() as logs:
        world.now[0] += 1
        await world.daemon.sweep(signatures)
    assert [line["failed"] for line in logs if line["event"] == "round"] == [0]
    assert any(line["event"] == "poll of target works again" for line in logs)


async def test_a_sweeps_first_calls_go_ten_to_a_request_and_each_answer_reaches_its_own_poll(
    make_world: Callable[..., World],
) -> None:
    world, addresses, job = deposits(make_world, "batched deposit")
    # Each state is read once, with its chunk (a read of its own per target would be a query
    # per poll: on PostgreSQL a round trip each).
    rows = cast(AsyncSqliteStore, world.daemon.store).sqlite.targets
    own_reads: list[str] = []
    read_state = rows.read_state

    def counted(source: str, target: str) -> Any:
        if source == "signatures":
            own_reads.append(target)
        return read_state(source, target)

    rows.read_state = counted  # type: ignore[method-assign]
    await world.daemon.sweep(job)  # the first polls: each its own page, then its balance
    assert own_reads == []
    world.server.log.clear()
    world.now[0] += 1
    registry = world.daemon.metrics.registry
    polls = {
        name: registry.get_sample_value(name, labels)
        for name, labels in [
            ("watcher_polls_total", {"source": "signatures"}),
            ("watcher_rule_polls_total", {"rule": "deposits"}),
        ]
    }
    with capture_logs() as logs:
        await world.daemon.sweep(job)  # quiet: one page since each cursor, 10 to a request
    quiet = world.server.log.snapshot()
    assert [call.method for call in quiet] == ["getSignaturesForAddress"] * 25
    assert sorted(call.batch_size for call in quiet) == [5] * 5 + [10] * 20
    assert all("until" in call.params[1] for call in quiet)
    assert own_reads == []
    # Each quiet poll ends at its answer, and counts as a poll that succeeded.
    said = rounds(logs)["signatures"]
    assert (said["targets"], said["failed"], said["alerts"]) == (25, 0, 0)
    for name, labels in [
        ("watcher_polls_total", {"source": "signatures"}),
        ("watcher_rule_polls_total", {"rule": "deposits"}),
    ]:
        assert registry.get_sample_value(name, labels) == (polls[name] or 0) + 25
    assert (
        registry.get_sample_value(
            "watcher_last_successful_poll_timestamp_seconds", {"source": "signatures"}
        )
        == world.now[0]
    )

    # Moves in the middle of a batch: each alert names its own address, once; a call of the
    # batch answered garbage fails its own poll only.
    moved = [addresses[3], addresses[14]]
    for address in moved:
        world.ledger.add_transactions(address, 2)
    world.ledger.faults.rewrite("getSignaturesForAddress", lambda result: "garbage", skip=20)
    world.now[0] += 1
    with capture_logs() as logs:
        await world.daemon.sweep(job)
    said = rounds(logs)["signatures"]
    assert said["targets"] == 25 and said["failed"] == 1 and said["alerts"] == 2
    alerts = await world.alerts()
    assert sorted(alert.subject for alert in alerts) == sorted(moved)
    assert all("2 new transactions" in alert.title for alert in alerts), alerts


class StateReads:
    """The addresses whose states the database was asked for, query by query."""

    def __init__(self, world: World) -> None:
        self.rows = cast(AsyncSqliteStore, world.daemon.store).sqlite.targets
        self.queries: list[list[str]] = []
        read_states, read_state = self.rows.read_states, self.rows.read_state

        def many(source: str, targets: Sequence[str]) -> Any:
            if source == "signatures":
                self.queries.append(list(targets))
            return read_states(source, targets)

        def one(source: str, target: str) -> Any:
            if source == "signatures":
                self.queries.append([target])
            return read_state(source, target)

        self.rows.read_states = many  # type: ignore[method-assign]
        self.rows.read_state = one  # type: ignore[method-assign]

    def taken(self) -> list[str]:
        """The targets read since the last call."""
        read = [target for query in self.queries for target in query]
        self.queries.clear()
        return read


async def test_a_quiet_target_is_polled_from_what_its_last_quiet_poll_left_not_its_state(
    make_world: Callable[..., World],
) -> None:
    world, addresses, job = deposits(make_world, "resting deposit")
    await world.daemon.sweep(job)  # the first polls
    reads = StateReads(world)

    async def sweep() -> list[str]:
        world.server.log.clear()
        world.now[0] += 1
        await world.daemon.sweep(job)
        pages = [c for c in world.server.log.snapshot() if c.method == "getSignaturesForAddress"]
        # Every poll's first call as ever, ten to a request: the page since its cursor, which
        # the poll that runs takes from its batch (it does not ask again).
        assert sorted(call.batch_size for call in pages) == [5] * 5 + [10] * 20
        assert all("until" in call.params[1] for call in pages)
        return reads.taken()

    assert sorted(await sweep()) == sorted(addresses)  # quiet: each state read, its rest kept
    assert await sweep() == []  # from the rests: no state read
    commits = world.daemon.store.commits

    moved = addresses[13]
    world.ledger.add_transactions(moved, 2)
    assert await sweep() == [moved]  # its answer was news: its state read, its poll run
    alerts = await world.alerts()
    assert [(alert.subject, alert.title.split(": ")[1][:18]) for alert in alerts] == [
        (moved, "2 new transactions")
    ]
    assert world.daemon.store.commits == commits + 1
    assert await sweep() == [moved]  # its state changed: read again, then at rest
    assert await sweep() == []
    world.ledger.add_transactions(moved, 1)
    assert await sweep() == [moved]
    assert len(await world.alerts()) == 2  # the next one, counted once


async def test_rests_are_kept_only_while_the_same_shards_are_held(
    make_world: Callable[..., World],
) -> None:
    """Another instance may write a target's state once it holds its shard: a shard that moved,
    even one that came back, leaves no rest standing."""
    addresses = tuple(derived_pubkey(f"sharded deposit {i}") for i in range(12))
    rule = {"name": "d", "kind": "new_transactions", "addresses": [*addresses], "notify": ["hooks"]}
    world = make_world(rules=[rule], rpc={"batch_size": 10})
    job = Job("signatures", 1.0, addresses)
    held = [frozenset(range(SHARDS))]
    store = world.daemon.store
    store.shards_held = lambda: held[0]  # type: ignore[method-assign]
    await world.daemon.sweep(job)  # the first polls
    reads = StateReads(world)
    for expected in (addresses, ()):
        world.now[0] += 1
        await world.daemon.sweep(job)
        assert sorted(reads.taken()) == sorted(expected)
    held[0] = frozenset(range(SHARDS))  # the same shards, taken again: another object
    world.now[0] += 1
    await world.daemon.sweep(job)
    assert sorted(reads.taken()) == sorted(addresses)
