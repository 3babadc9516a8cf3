"""Budgets as users write them, and the cost arithmetic ``watcher check`` will print."""

from __future__ import annotations

from typing import Annotated

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, BeforeValidator, ValidationError

from watcher.budget.cost import budget_share, cadence_cost, calls_per_second, monthly_calls
from watcher.config.call_budget import DAY_SECONDS, MONTH_SECONDS, Budget, parse_budget


@pytest.mark.parametrize(
    ("text", "calls", "period"),
    [
        ("20M/month", 20e6, MONTH_SECONDS),
        ("500k/day", 500e3, DAY_SECONDS),
        ("500K/day", 500e3, DAY_SECONDS),
        ("1.5M/month", 1.5e6, MONTH_SECONDS),
        ("20000000/month", 20e6, MONTH_SECONDS),
        ("2G/month", 2e9, MONTH_SECONDS),
        (" 20M / month ", 20e6, MONTH_SECONDS),
        ("0.5k/day", 500.0, DAY_SECONDS),
    ],
)
def test_budget_text_parses_to_calls_per_period(text: str, calls: float, period: float) -> None:
    assert parse_budget(text) == Budget(calls, period)


def test_a_month_is_30_days() -> None:
    assert MONTH_SECONDS == 30 * 86400
    assert parse_budget("2592000/month").per_second == 1.0
    assert parse_budget("86400/day").per_second == 1.0
    assert parse_budget("1k/day").per_month == 30_000


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "20X/month",
            'budget "20X/month": expected a number with k, M or G and /month or /day',
        ),
        ("20m/month", 'budget "20m/month": expected a number with k, M or G'),
        ("20M/week", 'budget "20M/week": expected a number with k, M or G and /month or /day'),
        ("-5M/month", 'budget "-5M/month": expected a number'),
        ("M/month", 'budget "M/month": expected a number'),
        ("20M", 'budget "20M": say per what, e.g. 20M/month or 20M/day'),
        (20000000, 'budget "20000000": say per what, e.g. 20000000/month'),
        ("0/month", 'budget "0/month": must allow at least one call'),
        ("0.1/day", 'budget "0.1/day": must allow at least one call'),
        ("", 'budget "": expected a number'),
        (None, "not a budget: expected text such as 20M/month"),
        (True, "not a budget"),
        ("9" * 50 + "/month", "is too long"),
    ],
)
def test_bad_budgets_are_refused_with_a_message_for_the_user(value: object, message: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_budget(value)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("20M/month", "20M/month"),
        ("1.5M/month", "1.5M/month"),
        ("500k/day", "500k/day"),
        ("20000000/month", "20M/month"),
        ("750/day", "750/day"),
        ("3G/month", "3G/month"),
    ],
)
def test_a_budget_is_written_back_as_a_user_would(text: str, written: str) -> None:
    assert str(parse_budget(text)) == written


def test_a_budget_of_another_period_is_written_per_month() -> None:
    assert str(Budget(1e6, 7 * DAY_SECONDS)) == "4.286M/month"


@given(
    number=st.integers(min_value=1, max_value=10**6),
    suffix=st.sampled_from(["", "k", "K", "M", "G"]),
    period=st.sampled_from(["month", "day"]),
)
def test_written_budgets_parse_back_to_the_same_rate(number: int, suffix: str, period: str) -> None:
    budget = parse_budget(f"{number}{suffix}/{period}")
    again = parse_budget(str(budget))
    assert again.per_second == pytest.approx(budget.per_second, rel=1e-3)


class _Rpc(BaseModel):
    budget: Annotated[Budget, BeforeValidator(parse_budget)] | None = None


def test_parse_budget_serves_as_a_pydantic_before_validator() -> None:
    assert _Rpc.model_validate({"budget": "20M/month"}).budget == Budget(20e6, MONTH_SECONDS)
    assert _Rpc.model_validate({}).budget is None
    assert _Rpc(budget=Budget(5.0, DAY_SECONDS)).budget == Budget(5.0, DAY_SECONDS)
    with pytest.raises(ValidationError) as error:
        _Rpc.model_validate({"budget": "20X/month"})
    assert 'budget "20X/month": expected a number' in str(error.value)


def test_100_addresses_every_30s_cost_8_6_million_calls_a_month() -> None:
    assert round(monthly_calls(calls_per_second(100, 30.0)) / 1e6, 1) == 8.6


def test_cadence_cost_gives_the_worst_case_and_the_floor_and_their_shares() -> None:
    cost = cadence_cost(100_000, every=30.0, max_every=900.0)
    assert cost.at_every_per_second == pytest.approx(100_000 / 30)
    assert cost.at_max_every_per_second == pytest.approx(100_000 / 900)
    assert round(cost.at_every_per_month / 1e9, 2) == 8.64
    assert round(cost.at_max_every_per_month / 1e6) == 288
    worst, floor = cost.shares(parse_budget("20M/month"))
    assert (round(worst, 1), round(floor, 1)) == (432.0, 14.4)  # even the floor: 14x the bill
    assert budget_share(1.0, parse_budget("86400/day")) == 1.0


def test_a_non_positive_interval_has_no_cost() -> None:
    with pytest.raises(ValueError, match="interval must be positive"):
        calls_per_second(10, 0.0)
