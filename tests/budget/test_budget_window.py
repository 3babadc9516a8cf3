"""The budget holds over any ten minutes, whatever the plan expected: a sweep's adaptive polls
are cut to what the window has left, the most expected events first; with several instances
each spends its share of the shards."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, cast

import pytest

from watcher.budget.cadences import CadenceBook
from watcher.budget.planning import BUDGET_WINDOW, SpendWindow
from watcher.config.call_budget import Budget
from watcher.kinds.ruleset import Job
from watcher.service.metrics import Metrics
from watcher.state.shards import SHARDS

from support.scheduling import HeldShards, scheduling_sweeper, time


def test_the_pace_spends_what_was_earned_since_the_last_sweep_up_to_a_burst() -> None:
    window = SpendWindow()
    # A first sweep: a burst's worth, and the one poll more that the pace may save up.
    assert window.room(0.0, per_second=2.0, burst=30.0) == 61
    window.spend(0.0, 60)
    assert window.room(10.0, per_second=2.0, burst=30.0) == 21  # earned in 10 s, and the one
    window.spend(10.0, 5)
    assert window.room(100.0, per_second=2.0, burst=30.0) == 61  # saved: at most the burst


def test_a_budget_slower_than_a_poll_a_sweep_loses_nothing_it_earned() -> None:
    """0.08 polls a second, a sweep every 5 s: a poll every 12.5 s, not every third sweep."""
    window, polls = SpendWindow(), []
    for now in range(0, 1000, 5):
        room = window.room(float(now), per_second=0.08, burst=10.0)
        polls.append(min(room, 1))
        window.spend(float(now), polls[-1])
    assert sum(polls) == 80 + 1  # what 1,000 s earn, and what a first sweep may spend


@pytest.mark.parametrize(
    ("spent", "now", "room"),
    [
        pytest.param([], 0.0, 600, id="nothing-spent"),
        pytest.param([(0.0, 100), (300.0, 200)], 500.0, 300, id="both-in-the-window"),
        pytest.param([(0.0, 100), (300.0, 200)], 600.0, 400, id="the-first-left-it"),
        pytest.param([(0.0, 700)], 10.0, 0, id="over-is-no-room"),
        pytest.param([(100.0, 500)], 50.0, 600, id="clock-stepped-back"),
    ],
)
def test_the_window_has_room_for_what_its_last_ten_minutes_did_not_spend(
    spent: list[tuple[float, int]], now: float, room: int
) -> None:
    window = SpendWindow()
    for moment, polls in spent:
        window.spend(moment, polls)
    assert window.room(now, per_second=1.0, burst=BUDGET_WINDOW) == room


BUSY = tuple(f"busy{i}" for i in range(5))
QUIET = tuple(f"quiet{i}" for i in range(95))


def replay(
    shards: frozenset[int] | None, seconds: int, metrics: Metrics | None = None
) -> list[list[str]]:
    """A sweep a second of 100 targets (every 1 s, max_every 8 s) under 5 calls a second, the
    five busy ones moving at each poll; the targets polled at each sweep."""
    job = Job("signatures", 1.0, BUSY + QUIET, max_interval=8.0)
    budget, jobs = Budget(5.0 * 86400, 86400.0), (job,)
    book = CadenceBook()
    sweeper = scheduling_sweeper(
        HeldShards(shards),
        book,
        budget,
        jobs,
        metrics or Metrics(time),
    )

    async def run() -> list[list[str]]:
        polled = []
        for now in range(seconds):
            due, _ = await sweeper.to_poll(job, job.targets, float(now))
            for target in due:
                moved = int(target in BUSY)
                book.after_poll(
                    "signatures", target, None, now=now, events=moved, every=1.0, max_every=8.0
                )
            polled.append(list(due))
        return polled

    return asyncio.run(run())


def most_in_a_window(polled: list[list[str]]) -> int:
    calls = [len(due) for due in polled]
    span = int(BUDGET_WINDOW)
    return max(sum(calls[start : start + span]) for start in range(len(calls) - span + 1))


def test_busy_targets_beyond_the_plan_never_spend_more_than_the_budget_in_ten_minutes() -> None:
    metrics = Metrics(time)
    polled = replay(None, 1500, metrics)
    assert most_in_a_window(polled) <= 5 * BUDGET_WINDOW
    # The budget is spent, not starved: the last ten minutes used nearly all of it.
    assert sum(map(len, polled[-600:])) >= 0.95 * 5 * BUDGET_WINDOW
    # Even max_every (8 s) for all costs 12.5 calls a second: the plan stretches every
    # interval to 20 s, busy or not, and no target waits more than twice that (the busy ones,
    # back at every after each poll, get only what the plan's polls leave).
    for target in BUSY + QUIET:
        polls = [now for now in range(900, 1500) if target in polled[now]]
        assert max(later - earlier for earlier, later in itertools.pairwise(polls)) <= 40
    assert sum(target in BUSY for due in polled[-600:] for target in due) >= 5 * 600 / 20
    # /metrics says how many due polls the limit put off.
    deferred = metrics.registry.get_sample_value(
        "watcher_budget_deferred_polls_total", {"source": "signatures"}
    )
    assert deferred is not None and deferred > 1000


def test_an_instance_holding_half_the_shards_spends_half_the_budget() -> None:
    half = frozenset(range(SHARDS // 2))
    polled = replay(half, 1500)
    assert most_in_a_window(polled) <= 2.5 * BUDGET_WINDOW
    assert sum(map(len, polled[-600:])) >= 0.95 * 2.5 * BUDGET_WINDOW


async def test_a_job_not_swept_yet_catches_nothing_up_its_first_round_polls_it_all() -> None:
    """Shards that move before a new job's first round (a reload's, run at once) are that
    round's to poll: a catch-up round beside it would poll every target twice at once."""
    job = Job("signatures", 1.0, BUSY + QUIET, max_interval=8.0)
    no_metrics = cast(Any, None)  # a catch-up decided, nothing polled: nothing to count
    sweeper = scheduling_sweeper(
        HeldShards(frozenset(range(SHARDS))), CadenceBook(), None, (job,), no_metrics
    )
    rounds: list[frozenset[int] | None] = []

    async def sweep(job: Job, only: frozenset[int] | None = None) -> None:
        rounds.append(only)

    sweeper.sweep = sweep  # type: ignore[method-assign]
    await sweeper.catch_up(job)
    assert rounds == []
