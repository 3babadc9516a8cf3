"""The budget allocation: sqrt of the event rates, clamped to the bounds, summing to the budget."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from itertools import pairwise

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from watcher.budget.allocation import Allocation, TargetGroup, allocate, allocate_groups

EVERY = 30.0
MAX_EVERY = 900.0


def reference(
    event_rates: Sequence[float], every: Sequence[float], max_every: Sequence[float], budget: float
) -> list[float]:
    """The water-filling rates the slow, obvious way: bisection on the multiplier, each step
    a pass over all targets. Only for budgets between the floor and the ceiling."""

    def rates(scale: float) -> list[float]:
        return [
            min(1 / low, max(1 / high, scale * math.sqrt(rate)))
            for rate, low, high in zip(event_rates, every, max_every, strict=True)
        ]

    below, above = 0.0, 1.0
    while math.fsum(rates(above)) < budget and above < 1e300:
        above *= 2
    for _ in range(200):
        middle = (below + above) / 2
        below, above = (middle, above) if math.fsum(rates(middle)) <= budget else (below, middle)
    return rates(below)


# -- tables ------------------------------------------------------------------------------------


def test_without_a_budget_every_target_is_at_every() -> None:
    allocation = allocate([0.0, 1e-3, 5.0], [10.0, 30.0, 60.0], 900.0, None)
    assert allocation.rates == [0.1, 1 / 30, 1 / 60]
    assert allocation.calls_per_second == pytest.approx(0.15)
    assert (allocation.stretched, allocation.stretch_factor) == (False, 1.0)


@pytest.mark.parametrize("budget", [100.0, 1000 / 30, 1000 / 30 + 1e-9])
def test_a_budget_that_pays_for_every_leaves_every_target_at_every(budget: float) -> None:
    allocation = allocate([1e-6] * 1000, EVERY, MAX_EVERY, budget)
    assert allocation.rates == [1 / EVERY] * 1000
    assert not allocation.stretched and allocation.stretch_factor == 1.0


@pytest.mark.parametrize(
    ("targets", "budget", "stretch_factor"),
    [
        (10_000, 10_000 / 900 / 1.8, 1.8),  # 1.8x max_every
        (10_000, 10_000 / 900 / 14.4, 14.4),
        (1, 1 / 1800, 2.0),
    ],
)
def test_a_budget_below_the_floor_stretches_every_interval_alike(
    targets: int, budget: float, stretch_factor: float
) -> None:
    rates = [random.Random(targets).expovariate(1e3) for _ in range(targets)]
    for every, max_every in ((EVERY, MAX_EVERY), ([EVERY] * targets, [MAX_EVERY] * targets)):
        allocation = allocate(rates, every, max_every, budget)
        assert allocation.stretched
        assert allocation.stretch_factor == pytest.approx(stretch_factor)
        stretched = MAX_EVERY * stretch_factor
        assert all(math.isclose(seconds, stretched) for seconds in allocation.intervals)
        assert allocation.calls_per_second <= budget


def test_a_budget_exactly_at_the_floor_is_not_stretched() -> None:
    allocation = allocate([1e-3, 0.0], EVERY, MAX_EVERY, 2 / MAX_EVERY)
    assert allocation.intervals == pytest.approx([MAX_EVERY, MAX_EVERY])
    assert (allocation.stretched, allocation.stretch_factor) == (False, 1.0)


def test_stretching_keeps_each_rules_ratio_of_max_every() -> None:
    allocation = allocate([0.0, 0.0], [10.0, 10.0], [100.0, 400.0], (1 / 100 + 1 / 400) / 2)
    assert allocation.intervals == pytest.approx([200.0, 800.0])
    assert allocation.stretch_factor == pytest.approx(2.0)


def test_rates_follow_the_square_root_of_the_event_rates() -> None:
    # Bounds wide enough not to bind: a target 4 times busier gets twice the polls.
    allocation = allocate([1e-4, 4e-4, 16e-4], 1.0, 1e6, 0.07)
    low, middle, high = allocation.rates
    assert [middle / low, high / low] == pytest.approx([2.0, 4.0])
    assert allocation.calls_per_second == pytest.approx(0.07)


def test_a_target_clamped_at_every_leaves_its_share_to_the_others() -> None:
    # Unclamped, the busy target would take 10/11 of 0.2/s: more than 1/every = 0.1/s.
    allocation = allocate([100.0, 1.0], 10.0, 1e6, 0.2)
    assert allocation.rates == pytest.approx([0.1, 0.1])
    allocation = allocate([100.0, 1.0, 1.0], 10.0, 1e6, 0.15)
    assert allocation.rates == pytest.approx([0.1, 0.025, 0.025])


def test_targets_with_no_activity_stay_at_max_every_and_the_rest_share_the_budget() -> None:
    allocation = allocate([0.0, 0.0, 1e-4], 10.0, 100.0, 0.03)
    assert allocation.rates == pytest.approx([0.01, 0.01, 0.01])  # the budget is the floor
    allocation = allocate([0.0, 0.0, 1e-4], 10.0, 100.0, 0.05)
    assert allocation.rates == pytest.approx([0.01, 0.01, 0.03])


def test_no_activity_anywhere_leaves_everyone_at_max_every_under_the_budget() -> None:
    allocation = allocate([0.0] * 10, EVERY, MAX_EVERY, 1.0 / EVERY)
    assert allocation.rates == [1 / MAX_EVERY] * 10
    assert allocation.calls_per_second < 1.0 / EVERY


def test_no_targets_cost_nothing() -> None:
    assert allocate([], EVERY, MAX_EVERY, 1.0) == Allocation([], 0.0, False, 1.0)
    assert allocate([], [], [], None) == Allocation([], 0.0, False, 1.0)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (([-1.0], EVERY, MAX_EVERY, 1.0), "finite and not negative"),
        (([math.nan], EVERY, MAX_EVERY, 1.0), "finite and not negative"),
        (([math.inf], EVERY, MAX_EVERY, 1.0), "finite and not negative"),
        (([1.0], EVERY, MAX_EVERY, 0.0), "budget must be positive"),
        (([1.0], 60.0, 30.0, 1.0), "need 0 < every <= max_every"),
        (([1.0], 0.0, 30.0, 1.0), "need 0 < every <= max_every"),
        (([1.0], [60.0], [30.0], 1.0), "0 < every <= max_every for every target"),
        (([1.0], [0.0], MAX_EVERY, 1.0), "0 < every <= max_every for every target"),
        (([1.0, 2.0], [EVERY], MAX_EVERY, 1.0), "every: 1 values for 2 targets"),
        (([1.0], EVERY, [1.0, 2.0], 1.0), "max_every: 2 values for 1 targets"),
    ],
)
def test_nonsense_is_refused(arguments: tuple[object, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        allocate(*arguments)  # type: ignore[arg-type]


def test_many_rules_with_distinct_bounds_match_the_reference() -> None:
    rng = random.Random(7)
    count = 2000
    rates = [rng.paretovariate(1.1) * 1e-5 if rng.random() < 0.1 else 1e-7 for _ in range(count)]
    every = [float(rng.choice(range(5, 120, 5))) for _ in range(count)]  # 23 distinct values
    max_every = [seconds * rng.choice((4, 10, 30)) for seconds in every]
    budget = 0.4 * math.fsum(1 / seconds for seconds in every)
    allocation = allocate(rates, every, max_every, budget)
    assert allocation.rates == pytest.approx(reference(rates, every, max_every, budget), rel=1e-6)
    assert allocation.calls_per_second == pytest.approx(budget, rel=1e-9)


@pytest.mark.parametrize(
    ("every", "max_every"),
    [
        ([10.0, 20.0] * 50, [100.0] * 100),  # rules with one max_every, two every
        ([10.0] * 100, [100.0, 300.0] * 50),  # rules with one every, two max_every
        ([10.0, 20.0, 10.0, 20.0] * 25, [100.0, 100.0, 300.0, 300.0] * 25),
    ],
)
def test_rules_sharing_one_bound_are_told_apart_by_the_other(
    every: list[float], max_every: list[float]
) -> None:
    rates = [1e-6 * (index % 7) for index in range(100)]
    budget = 0.5 * math.fsum(1 / seconds for seconds in every)
    allocation = allocate(rates, every, max_every, budget)
    assert allocation.rates == pytest.approx(reference(rates, every, max_every, budget), rel=1e-6)


def test_groups_say_what_each_rule_costs() -> None:
    deposits = TargetGroup([1e-4] * 3 + [0.0] * 97, every=30.0, max_every=900.0)
    hot_wallets = TargetGroup([1e-2] * 2, every=5.0, max_every=60.0)
    idle = TargetGroup([], every=10.0, max_every=20.0)
    budget = 1.0
    first, second, third = allocate_groups([deposits, hot_wallets, idle], budget)
    assert second.rates == [0.2, 0.2]  # at their `every`: their share of sqrt(λ) is larger
    assert first.rates[:3] == pytest.approx([1 / 30] * 3)
    assert first.rates[3:] == pytest.approx([1 / 900] * 97)
    assert third == Allocation([], 0.0, False, 1.0)
    assert first.calls_per_second + second.calls_per_second <= budget
    assert second.calls_per_second == pytest.approx(0.4)


def test_groups_stretch_together() -> None:
    groups = [TargetGroup([0.0] * 10, 10.0, 100.0), TargetGroup([1.0] * 10, 10.0, 400.0)]
    budget = (10 / 100 + 10 / 400) / 2.5
    for allocation, max_every in zip(allocate_groups(groups, budget), (100.0, 400.0), strict=True):
        assert allocation.stretched
        assert allocation.stretch_factor == pytest.approx(2.5)
        assert allocation.intervals == pytest.approx([max_every * 2.5] * 10)


@pytest.mark.parametrize(
    ("group", "message"),
    [
        (TargetGroup([1.0], 60.0, 30.0), "need 0 < every <= max_every"),
        (TargetGroup([-1.0], 30.0, 60.0), "finite and not negative"),
    ],
)
def test_groups_refuse_nonsense(group: TargetGroup, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        allocate_groups([group], 1.0)


def test_100_000_targets_on_two_rules_spend_exactly_the_budget_both_ways() -> None:
    # (How fast: bench/, not here.)
    rng = random.Random(1)
    rates = [rng.paretovariate(1.2) * 1e-5 if rng.random() < 0.05 else 1e-7 for _ in range(100_000)]
    every = [30.0 if index % 3 else 60.0 for index in range(100_000)]
    max_every = [30 * seconds for seconds in every]
    groups = [
        TargetGroup([rate for index, rate in enumerate(rates) if index % 3], 30.0, 900.0),
        TargetGroup([rate for index, rate in enumerate(rates) if not index % 3], 60.0, 1800.0),
    ]
    allocation = allocate(rates, every, max_every, 300.0)
    per_group = allocate_groups(groups, 300.0)
    assert allocation.calls_per_second == pytest.approx(300.0)
    assert sum(group.calls_per_second for group in per_group) == pytest.approx(300.0)


# -- properties --------------------------------------------------------------------------------

event_rates = st.lists(
    st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=10.0)), min_size=1, max_size=60
)
intervals = st.floats(min_value=0.5, max_value=3600.0)
spans = st.floats(min_value=1.0, max_value=100.0)
shares = st.floats(min_value=0.01, max_value=2.0)  # the budget as a share of the ceiling


Problem = tuple[list[float], list[float], list[float], float]  # rates, every, max_every, budget


@st.composite
def problems(draw: st.DrawFn, alike: bool = False) -> Problem:
    rates = draw(event_rates)
    if alike:
        every = [draw(intervals)] * len(rates)
        span = draw(spans)
        max_every = [seconds * span for seconds in every]
    else:
        every = [draw(intervals) for _ in rates]
        max_every = [seconds * draw(spans) for seconds in every]
    budget = draw(shares) * math.fsum(1 / seconds for seconds in every)
    return rates, every, max_every, budget


@given(problems())
def test_the_budget_is_never_exceeded(problem: Problem) -> None:
    rates, every, max_every, budget = problem
    allocation = allocate(rates, every, max_every, budget)
    assert math.fsum(allocation.rates) <= budget * (1 + 1e-9)
    assert allocation.calls_per_second <= budget * (1 + 1e-9)
    assert len(allocation.rates) == len(rates)


@given(problems())
def test_bounds_hold_whenever_the_budget_pays_for_max_every(problem: Problem) -> None:
    rates, every, max_every, budget = problem
    floor = math.fsum(1 / seconds for seconds in max_every)
    allocation = allocate(rates, every, max_every, budget)
    if floor <= budget:
        assert not allocation.stretched
        for rate, low, high in zip(allocation.rates, every, max_every, strict=True):
            assert 1 / high * (1 - 1e-9) <= rate <= 1 / low * (1 + 1e-9)
        # No call is left unspent that a target could still use (one with no activity stays
        # at max_every while the budget is below the ceiling).
        ceiling = math.fsum(1 / seconds for seconds in every)
        usable = math.fsum(
            1 / low if rate else 1 / high
            for rate, low, high in zip(rates, every, max_every, strict=True)
        )
        spent = allocation.calls_per_second
        assert spent == pytest.approx(ceiling if ceiling <= budget else min(budget, usable))
    else:
        assert allocation.stretched
        assert allocation.stretch_factor == pytest.approx(floor / budget)
        assert allocation.intervals == pytest.approx(
            [seconds * allocation.stretch_factor for seconds in max_every]
        )


@given(problems(alike=True))
def test_a_busier_target_never_gets_fewer_polls(problem: Problem) -> None:
    rates, every, max_every, budget = problem
    for allocation in (
        allocate(rates, every, max_every, budget),
        allocate(rates, every[0], max_every[0], budget),
    ):
        ranked = sorted(zip(rates, allocation.rates, strict=True))
        polls = [poll_rate for _, poll_rate in ranked]
        assert all(a <= b * (1 + 1e-12) for a, b in pairwise(polls))


@given(problems())
def test_the_allocation_is_the_water_filling_optimum(problem: Problem) -> None:
    rates, every, max_every, budget = problem
    floor = math.fsum(1 / seconds for seconds in max_every)
    ceiling = math.fsum(1 / seconds for seconds in every)
    assume(floor < budget < ceiling and any(rates))
    allocation = allocate(rates, every, max_every, budget)
    expected = reference(rates, every, max_every, budget)
    assert allocation.rates == pytest.approx(expected, rel=1e-6)


@given(st.lists(problems(alike=True), min_size=1, max_size=4))
def test_groups_and_per_target_bounds_agree(problems: list[Problem]) -> None:
    budget = sum(problem[3] for problem in problems) / len(problems)
    groups = [TargetGroup(rates, every[0], max_every[0]) for rates, every, max_every, _ in problems]
    per_group = allocate_groups(groups, budget)
    flat = allocate(
        [rate for group in groups for rate in group.event_rates],
        [every for problem in problems for every in problem[1]],
        [max_every for problem in problems for max_every in problem[2]],
        budget,
    )
    assert [rate for group in per_group for rate in group.rates] == pytest.approx(
        flat.rates, rel=1e-9
    )
    assert math.fsum(group.calls_per_second for group in per_group) <= budget * (1 + 1e-9)
    for group in per_group:
        assert group.stretched == flat.stretched
        assert group.stretch_factor == pytest.approx(flat.stretch_factor)


@given(problems(alike=True))
def test_bounds_as_one_value_or_one_per_target_agree(problem: Problem) -> None:
    rates, every, max_every, budget = problem
    one = allocate(rates, every[0], max_every[0], budget)
    each = allocate(rates, every, max_every, budget)
    assert one.rates == pytest.approx(each.rates, rel=1e-9)
    assert one.stretched == each.stretched
    assert one.stretch_factor == pytest.approx(each.stretch_factor)


@given(problems(alike=True))
def test_no_even_spread_of_the_same_budget_detects_sooner(problem: Problem) -> None:
    # Expected detection delay, summed over events: an event waits half an interval on average.
    rates, every, max_every, budget = problem
    floor = math.fsum(1 / seconds for seconds in max_every)
    ceiling = math.fsum(1 / seconds for seconds in every)
    assume(floor < budget < ceiling)
    allocation = allocate(rates, every[0], max_every[0], budget)
    even = budget / len(rates)  # within the bounds, as they are alike
    delay = math.fsum(rate / (2 * poll) for rate, poll in zip(rates, allocation.rates, strict=True))
    assert delay <= math.fsum(rate / (2 * even) for rate in rates) * (1 + 1e-9)
