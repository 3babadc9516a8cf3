"""A sweep of a rule with ``max_every`` polls only the targets that are due; each target's
cadence is kept in its state document (written only when its interval moves), so a restart
keeps every backoff."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator, Callable, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from watcher.budget.backoff import Cadence
from watcher.budget.cadences import (
    CadenceBook,
    activity,
    paced_state,
    stored_cadence,
    worth_storing,
)
from watcher.config import packed_keys
from watcher.config.packed_keys import JoinedTargets, PackedAddresses
from watcher.core.events import CADENCE_KEY
from watcher.kinds.ruleset import Job
from watcher.service.status import Status, read_status
from watcher.simulator.keys import derived_pubkey
from watcher.state.commands import sqlite_command_store

from support.seeded import HOLDERS, MINT, TREASURY, World, base_rules, daemon_worlds

A, B, C = "a", "b", "c"


def cadence(interval: float, next_due: float, rate: float = 0.0) -> Cadence:
    return Cadence(interval=interval, next_due=next_due, rate=rate, seen_at=next_due - interval)


@pytest.mark.parametrize(
    ("known", "now", "expected"),
    [
        pytest.param({}, 100.0, [A, B, C], id="never-read-all-due"),
        pytest.param(
            {A: cadence(8, 100.4), B: cadence(1, 100.6), C: cadence(1, 100.5)},
            100.0,
            [A, C],
            id="due-within-half-a-sweep",
        ),
        pytest.param({A: None, B: None, C: None}, 100.0, [A, B, C], id="never-polled-all-due"),
        pytest.param(
            {A: cadence(8, 108), B: cadence(1, 100), C: cadence(4, 99)},
            100.0,
            [B, C],
            id="due-at-and-after-next-due",
        ),
        pytest.param({A: cadence(8, 108), B: cadence(2, 101)}, 100.0, [C], id="unknown-is-due"),
        pytest.param(
            {A: cadence(8, 108), B: cadence(8, 108), C: cadence(8, 108)},
            107.4,
            [],
            id="all-quiet-none-due",
        ),
    ],
)
def test_a_sweep_polls_the_targets_whose_time_has_come(
    known: dict[str, Cadence | None], now: float, expected: list[str]
) -> None:
    book = CadenceBook()
    for target, value in known.items():
        book.learn("signatures", target, value)
    assert book.due("signatures", [A, B, C], now, slack=0.5) == expected


TARGETS = tuple(f"t{i}" for i in range(6))
# Whole and half seconds: a due time often falls exactly on a sweep's moment, or on a second.
MOMENTS = st.integers(0, 40).map(lambda x: x / 2)
SLACKS = st.sampled_from([0.0, 0.5])
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("learn"), st.sampled_from(TARGETS), st.none() | MOMENTS, MOMENTS),
        st.tuples(st.just("poll"), st.sampled_from(TARGETS), st.integers(0, 1), MOMENTS),
        st.tuples(st.just("allocate"), st.sampled_from(TARGETS), MOMENTS, MOMENTS),
        st.tuples(st.just("due"), st.sampled_from([TARGETS, TARGETS[:3]]), MOMENTS, SLACKS),
    ),
    max_size=60,
)


@settings(max_examples=2000)  # a slot left behind the wheel's reading needs many to show
@given(OPERATIONS)
def test_the_due_index_says_what_looking_at_every_target_would(operations: list[Any]) -> None:
    """Whatever the order of learning, polling, allocating and asking (times going back too,
    several sweeps with their own slack), ``due`` lists exactly the targets a scan of every
    cadence would: unknown, without a cadence, or next due by ``now + slack``."""
    book = CadenceBook()
    for operation, first, second, third in operations:
        if operation == "learn":
            known = None if second is None else cadence(max(0.1, third), second)
            book.learn("signatures", first, known)
        elif operation == "poll":
            book.after_poll(
                "signatures", first, None, now=third, events=second, every=1.0, max_every=8.0
            )
        elif operation == "allocate":
            book.allocate({"signatures": {first: max(0.1, second)}})
        else:
            now, slack = second, third
            expected = [
                target
                for target in first
                if (known := book.get("signatures", target)) is None
                or now + slack >= known.next_due
            ]
            assert book.due("signatures", first, now, slack) == expected


def test_the_book_holds_one_str_of_each_target_of_a_packed_list() -> None:
    """A packed list makes a new str at each pass over it: what the book learns of its
    targets, the polls it says are due and their next times hold the strs its index made,
    not a second one each (a hundred bytes a target: 100 MB at a million)."""
    targets = JoinedTargets((PackedAddresses([derived_pubkey(f"book {n}") for n in range(500)]),))
    book = CadenceBook()
    tracemalloc.start()
    try:
        for target in book.unknown("signatures", targets):
            book.learn("signatures", target, None)  # as a sweep learns what the states keep
        for target in book.due("signatures", targets, 0.0):
            book.after_poll("signatures", target, None, now=0.0, events=0, every=1, max_every=8)
        assert not book.due("signatures", targets, 0.5)
        made = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, packed_keys.__file__)]
        )
    finally:
        tracemalloc.stop()
    # The blocks the packed list allocated and something still holds: its base58 strs (about
    # 93 bytes each; nothing else of it was made after tracing began).
    strs = sum(stat.count for stat in made.statistics("lineno"))
    assert strs == len(targets)


@pytest.mark.parametrize(
    ("stored", "new", "events", "written"),
    [
        pytest.param(None, cadence(1, 101), 0, True, id="first-cadence"),
        pytest.param(cadence(1, 100), cadence(2, 102), 0, True, id="backoff-step"),
        pytest.param(cadence(8, 100), cadence(8, 108), 0, False, id="quiet-at-max-every"),
        pytest.param(cadence(8, 100), cadence(8, 108), 1, True, id="activity"),
        pytest.param(cadence(8, 100), cadence(9, 109), 0, False, id="allocation-nudge"),
        pytest.param(cadence(8, 100), cadence(5, 105), 0, True, id="allocation-moved-far"),
    ],
)
def test_the_cadence_is_written_only_when_its_interval_moves_or_the_state_does(
    stored: Cadence | None, new: Cadence, events: int, written: bool
) -> None:
    assert worth_storing(stored, new, events) is written
    previous = {"v": 1} if stored is None else {"v": 1, CADENCE_KEY: stored.to_json()}
    state = paced_state(previous, {"v": 1}, new, events, stored)
    assert state[CADENCE_KEY] == (new if written else stored or new).to_json()


@pytest.mark.parametrize(
    ("previous", "new", "events"),
    [
        pytest.param(None, {"cursor": 1}, 0, id="baseline"),
        pytest.param({"cursor": 1, "slot_time": 5}, {"cursor": 1, "slot_time": 6}, 0, id="other"),
        pytest.param({"cursor": 1}, {"cursor": 2}, 1, id="moved"),
        pytest.param({"cursor": 1, CADENCE_KEY: {}}, {"cursor": 1}, 0, id="cadence-only"),
    ],
)
def test_activity_is_a_change_of_the_sources_activity_keys(
    previous: dict[str, Any] | None, new: dict[str, Any], events: int
) -> None:
    assert activity(previous, new, ("cursor",)) == events


def test_a_damaged_stored_cadence_is_no_cadence() -> None:
    assert stored_cadence({CADENCE_KEY: {"interval": "soon"}}) is None
    assert stored_cadence({"v": 1}) is None
    assert stored_cadence(None) is None


# -- the daemon's sweeps ---------------------------------------------------------------------


@pytest.fixture
async def make_world(tmp_path: Path) -> AsyncIterator[Callable[..., World]]:
    async with daemon_worlds(tmp_path) as make:
        yield make


def adaptive_rules() -> list[dict[str, Any]]:
    [treasury, *_] = base_rules()
    return [{**treasury, "every": "1s", "max_every": "8s"}]


JOB = Job("signatures", 1.0, (TREASURY,), max_interval=8.0)


def rounds(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [line for line in logs if line["event"] == "round"]


async def sweep_each_second(world: World, seconds: int) -> list[float]:
    """Sweeps once a second for ``seconds``; the offsets (from the first) of the sweeps that
    polled the target."""
    start, polled = world.now[0], []
    for _ in range(seconds):
        with capture_logs() as logs:
            await world.daemon.sweep(JOB)
        [line] = rounds(logs)
        assert line["due"] + line["skipped"] == 1
        if line["due"]:
            polled.append(world.now[0] - start)
        world.now[0] += 1.0
    return polled


async def test_a_quiet_target_backs_off_and_activity_brings_it_back(
    make_world: Callable[..., World],
) -> None:
    world = make_world(adaptive_rules())
    assert world.daemon.ruleset.jobs() == [JOB]
    # The baseline, then quiet polls 1, 2, 4, 8, 8 s apart.
    assert await sweep_each_second(world, 24) == [0, 1, 3, 7, 15, 23]
    world.ledger.add_transactions(TREASURY, 1)
    polled = await sweep_each_second(world, 18)
    assert polled[0] <= 8  # seen at its next poll, within max_every
    assert len(await world.alerts()) == 1
    # Activity: back to every second, then backing off again.
    assert [later - polled[0] for later in polled[1:4]] == [1, 3, 7]


async def test_quiet_polls_at_max_every_write_nothing(make_world: Callable[..., World]) -> None:
    world = make_world(adaptive_rules())
    await sweep_each_second(world, 16)  # backed off to 8 s
    commits = world.daemon.store.commits
    assert await sweep_each_second(world, 17) == [7, 15]
    assert world.daemon.store.commits == commits


async def test_a_restart_keeps_the_backoff(make_world: Callable[..., World]) -> None:
    world = make_world(adaptive_rules())
    await sweep_each_second(world, 16)
    stored = stored_cadence(await world.state("signatures", TREASURY))
    assert stored is not None and stored.interval == 8.0
    await world.daemon.close()

    again = make_world(adaptive_rules())
    again.now[0] = world.now[0]
    # Due at once (its stored due time passed: never later than promised), then 8 s apart:
    # not 1, 2, 4 s from scratch.
    assert await sweep_each_second(again, 17) == [0, 8, 16]


async def test_a_job_without_max_every_polls_every_target_every_sweep(
    make_world: Callable[..., World],
) -> None:
    world = make_world(base_rules()[:1])
    [job] = world.daemon.ruleset.jobs()
    assert job.max_interval is None
    for _ in range(3):
        with capture_logs() as logs:
            await world.daemon.sweep(job)
        [line] = rounds(logs)
        assert (line["due"], line["skipped"]) == (1, 0)
        world.now[0] += 1.0
    assert CADENCE_KEY not in await world.state("signatures", TREASURY)


async def test_metrics_count_polls_per_rule_and_show_the_intervals_and_the_projection(
    make_world: Callable[..., World],
) -> None:
    world = make_world(adaptive_rules())
    await sweep_each_second(world, 16)  # polled 5 times, backed off to 8 s
    text = world.daemon.metrics.exposition().decode()
    assert 'watcher_rule_polls_total{rule="treasury"} 5.0' in text
    # One target every 8 s: 324,000 calls a 30-day month.
    assert "watcher_projected_monthly_calls 324000.0" in text
    assert 'watcher_target_interval_seconds_bucket{le="5"} 0.0' in text
    assert 'watcher_target_interval_seconds_bucket{le="15"} 1.0' in text
    assert "watcher_target_interval_seconds_sum 8.0" in text


async def test_status_counts_the_targets_at_each_interval_band(
    make_world: Callable[..., World],
) -> None:
    world = make_world(adaptive_rules())
    await sweep_each_second(world, 16)

    def command() -> Status:  # as `watcher status` runs: outside any event loop
        with sqlite_command_store(world.daemon.settings.state_path, readonly=True) as store:
            return read_status(store, 0.0)

    status = await asyncio.to_thread(command)
    assert status.intervals is not None
    assert [(bound, count) for bound, count in status.intervals.bands if count] == [(15.0, 1)]
    [line] = [line for line in status.lines() if line.startswith("intervals")]
    assert line == (
        "intervals of 1 targets with max_every: up to 15s: 1; 324,000 calls a month at these"
        " intervals"
    )
    assert '"projected_monthly_calls": 324000.0' in status.as_json()


async def sweeps_until_polled(world: World, job: Job, seconds: int) -> int:
    """Sweeps once a second until one polls the job's target; how many sweeps that took."""
    for count in range(1, seconds + 1):
        with capture_logs() as logs:
            await world.daemon.sweep(job)
        world.now[0] += 1.0
        if rounds(logs)[0]["due"]:
            return count
    raise AssertionError(f"not polled in {seconds} sweeps")


@pytest.mark.parametrize("kind", ["holder_changes", "account_changed", "balance_below"])
async def test_each_adaptive_kind_backs_off_and_comes_back_on_its_own_activity(
    make_world: Callable[..., World], kind: str
) -> None:
    account = HOLDERS[0]
    keys: dict[str, dict[str, Any]] = {
        "holder_changes": {"mints": [MINT], "min_change_pct": 10},
        "account_changed": {"accounts": [account]},
        "balance_below": {"accounts": [account], "min_sol": 1},
    }
    watched = keys[kind]
    rule = {"name": "r", "kind": kind, "every": "1s", "max_every": "8s", "notify": ["hooks"]}
    world = make_world([{**rule, **watched}])
    if kind != "holder_changes":
        world.ledger.accounts.set_account(account, lamports=5 * 10**9)
    [job] = world.daemon.ruleset.jobs()
    for _ in range(6):  # the baseline, then 1, 2, 4, 8 s apart
        await sweeps_until_polled(world, job, 9)
    assert await sweeps_until_polled(world, job, 9) == 8
    if kind == "holder_changes":
        world.ledger.set_holders(MINT, [(h, 1_000_000 * (200 - i)) for i, h in enumerate(HOLDERS)])
    else:
        world.ledger.accounts.set_account(account, lamports=7 * 10**9)
    await sweeps_until_polled(world, job, 9)  # sees the change
    assert await sweeps_until_polled(world, job, 9) == 1  # back to every
    assert await sweeps_until_polled(world, job, 9) == 2
