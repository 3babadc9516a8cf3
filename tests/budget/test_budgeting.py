"""``rpc.budget``: the plan shares what the fixed rules leave among the adaptive targets, says
when it stretches intervals beyond max_every, and paces a big list's first polls."""

from __future__ import annotations

import itertools
import math
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from watcher.budget.planning import job_key, plan_budget, stretch_warning
from watcher.config.call_budget import Budget, parse_budget
from watcher.kinds.ruleset import Job
from watcher.simulator.keys import derived_pubkey

from support.seeded import World, base_rules, daemon_worlds

QUIET = 0.0


def per_day(calls_per_second: float) -> Budget:
    return Budget(calls_per_second * 86400, 86400.0)


FIXED = Job("holders", 10.0, ("m1", "m2"))  # 0.2 calls/s
ADAPTIVE = Job("signatures", 1.0, tuple(f"a{i}" for i in range(10)), max_interval=10.0)


@pytest.mark.parametrize(
    ("jobs", "budget", "cost", "stretch"),
    [
        pytest.param([ADAPTIVE], per_day(20.0), 10.0, 1.0, id="ample-all-at-every"),
        pytest.param([ADAPTIVE], per_day(0.5), 0.5, 2.0, id="below-the-floor-stretches"),
        pytest.param([FIXED, ADAPTIVE], per_day(0.7), 0.7, 2.0, id="fixed-spends-first"),
        pytest.param([FIXED, ADAPTIVE], per_day(0.1), 1.2, math.inf, id="fixed-alone-over"),
        pytest.param([FIXED], per_day(1.0), 0.2, 1.0, id="nothing-adaptive"),
    ],
)
def test_the_plan_spends_at_most_the_budget_unless_fixed_rules_alone_exceed_it(
    jobs: list[Job], budget: Budget, cost: float, stretch: float
) -> None:
    plan = plan_budget(jobs, lambda source, target: QUIET, budget)
    assert plan.calls_per_second == pytest.approx(cost)
    assert plan.stretch_factor == pytest.approx(stretch)
    assert (stretch_warning(plan) is None) == (stretch == 1.0)


def test_a_busier_target_gets_more_polls_within_its_bounds() -> None:
    rates = {"a0": 1e-2, "a1": 1e-4}
    plan = plan_budget([ADAPTIVE], lambda source, target: rates.get(target, 0.0), per_day(2.0))
    intervals = dict(zip(ADAPTIVE.targets, plan.intervals[job_key(ADAPTIVE)], strict=True))
    assert 1.0 <= intervals["a0"] < intervals["a1"] <= intervals["a9"] == 10.0
    assert plan.calls_per_second <= 2.0 + 1e-9


def test_never_polled_targets_are_first_polled_at_the_jobs_allocated_rate() -> None:
    plan = plan_budget([ADAPTIVE], lambda source, target: QUIET, per_day(0.5))
    assert plan.first_polls_rate(ADAPTIVE) == pytest.approx(0.5)
    assert plan.first_polls_rate(FIXED) is None


@pytest.fixture
async def make_world(tmp_path: Path) -> AsyncIterator[Callable[..., World]]:
    async with daemon_worlds(tmp_path) as make:
        yield make


async def test_a_tight_budget_paces_the_baselines_and_says_how_far_intervals_stretch(
    make_world: Callable[..., World],
) -> None:
    addresses = [derived_pubkey(f"budget address {i}") for i in range(10)]
    [treasury, *_] = base_rules()
    rule = {**treasury, "addresses": addresses, "every": "1s", "max_every": "8s"}
    budget = "43.2k/day"  # 0.5 calls/s: max_every for all (1.25/s) does not fit
    world = make_world([rule], rpc={"budget": budget})
    assert world.daemon.settings.rpc.budget == parse_budget(budget)
    [job] = world.daemon.ruleset.jobs()
    polled = []
    with capture_logs() as logs:
        for _ in range(10):
            before = world.server_calls()
            await world.daemon.sweep(job)
            polled.append(world.server_calls() - before)
            world.now[0] += 1.0
    # Baselines at the budget's rate (half a call a second), not ten in the first sweep: each
    # is a signature page and its balance read, two calls, so one every 4 seconds.
    assert polled == [2, 0, 0, 0, 2, 0, 0, 0, 2, 0]
    [warning] = [line for line in logs if line["log_level"] == "warning"]
    assert "stretch 2.50x beyond max_every" in warning["event"]
    assert warning["stretch"] == 2.5


async def test_under_a_tight_budget_calls_stay_within_it_and_a_moving_target_comes_back(
    make_world: Callable[..., World],
) -> None:
    addresses = [derived_pubkey(f"budget address {i}") for i in range(10)]
    [treasury, *_] = base_rules()
    rule = {**treasury, "addresses": addresses, "every": "1s", "max_every": "8s"}
    world = make_world([rule], rpc={"budget": "43.2k/day"})  # 0.5 calls/s
    [job] = world.daemon.ruleset.jobs()

    async def sweep_for(seconds: int) -> int:
        before = world.server_calls()
        for _ in range(seconds):
            await world.daemon.sweep(job)
            world.now[0] += 1.0
        return world.server_calls() - before

    await sweep_for(40)  # the baselines, one every other second
    assert await sweep_for(60) <= 0.5 * 60 + 1  # each at 20 s: 2.5 times max_every
    assert world.daemon.cadences.get("signatures", addresses[0]) is not None
    world.ledger.add_transactions(addresses[0], 1)
    for _ in range(21):
        await sweep_for(1)
        moved = world.daemon.cadences.get("signatures", addresses[0])
        if await world.alerts():
            break
    assert len(await world.alerts()) == 1  # seen within its stretched interval
    # Back to every in its cadence, but the plan's polls of the others spend the whole budget:
    # activity brings it back only as far as the budget allows, so it keeps its planned 20 s
    # (and the others theirs) and the calls stay within the budget.
    assert moved is not None and moved.interval == 1.0
    polled_at = [moved.seen_at]
    calls = 0
    for _ in range(60):
        calls += await sweep_for(1)
        moved = world.daemon.cadences.get("signatures", addresses[0])
        assert moved is not None
        if moved.seen_at != polled_at[-1]:
            polled_at.append(moved.seen_at)
    assert calls <= 0.5 * 60 + 1
    gaps = [later - earlier for earlier, later in itertools.pairwise(polled_at)]
    assert len(polled_at) >= 3 and max(gaps) <= 2 * 20.0


async def test_the_balance_reads_of_addresses_that_move_are_paid_from_the_budget(
    make_world: Callable[..., World],
) -> None:
    addresses = [derived_pubkey(f"budget address {i}") for i in range(10)]
    [treasury, *_] = base_rules()
    rule = {**treasury, "addresses": addresses, "every": "1s", "max_every": "8s"}
    world = make_world([rule], rpc={"budget": "43.2k/day"})  # 0.5 calls/s
    [job] = world.daemon.ruleset.jobs()
    for _ in range(40):  # the baselines
        await world.daemon.sweep(job)
        world.now[0] += 1.0
    before, reads = world.server_calls(), 0
    for _ in range(120):  # every address moves all the time: each poll reads a balance
        for address in addresses:
            world.ledger.add_transactions(address, 1)
        with capture_logs() as logs:
            await world.daemon.sweep(job)
        reads += sum(line.get("balance_reads", 0) for line in logs if line["event"] == "round")
        world.now[0] += 1.0
    assert reads > 10
    # Half a call a second, signature pages and balance reads together (a sweep's burst over).
    assert world.server_calls() - before <= 0.5 * 120 + 4


async def test_after_a_restart_overdue_targets_are_polled_at_the_budgets_pace(
    make_world: Callable[..., World],
) -> None:
    addresses = [derived_pubkey(f"budget address {i}") for i in range(10)]
    [treasury, *_] = base_rules()
    rule = {**treasury, "addresses": addresses, "every": "1s", "max_every": "8s"}
    world = make_world([rule], rpc={"budget": "43.2k/day"})  # 0.5 calls/s
    [job] = world.daemon.ruleset.jobs()
    for _ in range(40):
        await world.daemon.sweep(job)
        world.now[0] += 1.0
    await world.daemon.close()

    again = make_world([rule], rpc={"budget": "43.2k/day"})
    again.now[0] = world.now[0] + 600  # every target overdue
    polled = []
    for _ in range(6):
        before = again.server_calls()
        await again.daemon.sweep(job)
        polled.append(again.server_calls() - before)
        again.now[0] += 1.0
    assert polled == [1, 0, 1, 0, 1, 0]  # not all ten in the first sweep
