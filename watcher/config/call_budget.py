"""A call budget as users write it (``20M/month``, ``500k/day``): the value of ``rpc.budget``.

A budget is a number of calls, with an optional suffix ``k``/``K`` (thousand), ``M`` (million)
or ``G`` (billion), then ``/month`` or ``/day``. A month is 30 days (as in ``watcher check``'s
figures): a fixed month keeps every figure (the allocation, the projection in ``watcher
status``) the same whatever the date. Spending a month's budget at its steady rate, a 31-day
calendar month takes 3 % more than the budget (February 7 % less): a plan with a hard cap
wants a budget set that much below it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

DAY_SECONDS: Final = 86400.0
MONTH_SECONDS: Final = 30 * DAY_SECONDS
PERIOD_SECONDS: Final = {"month": MONTH_SECONDS, "day": DAY_SECONDS}
# Case matters for M (mega, not milli) and G; k is the SI spelling, K what people also write.
SUFFIX_FACTORS: Final = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}
_BUDGET = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kKMG]?)\s*/\s*(month|day)")
_EXAMPLES = "e.g. 20M/month, 1.5M/month, 500k/day"
_MAX_TEXT_LENGTH = 40  # longer text is no budget: refused before any number is read


@dataclass(frozen=True)
class Budget:
    """At most ``calls`` RPC calls per ``period_seconds``, all rules together."""

    calls: float
    period_seconds: float

    @property
    def per_second(self) -> float:
        return self.calls / self.period_seconds

    @property
    def per_month(self) -> float:
        return self.per_second * MONTH_SECONDS

    def __str__(self) -> str:
        """``Budget(2e7, MONTH_SECONDS)`` -> ``20M/month``: how a user would write it."""
        period = next(
            (name for name, seconds in PERIOD_SECONDS.items() if seconds == self.period_seconds),
            None,
        )
        if period is None:
            return f"{_count(self.per_month)}/month"
        return f"{_count(self.calls)}/{period}"


def _count(calls: float) -> str:
    for suffix, factor in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if calls >= factor:
            return f"{_number(calls / factor)}{suffix}"
    return _number(calls)


def _number(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")  # 4.286, 1.5, 20: never an exponent


def parse_budget(value: object) -> Budget:
    """``"20M/month"`` -> ``Budget(20e6, 30 days)``. Raises ``ValueError`` meant for the user.

    A ``Budget`` passes through unchanged, so that settings built in code validate too.
    """
    if isinstance(value, Budget):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError("not a budget: expected text such as 20M/month or 500k/day")
    text = str(value).strip()
    if len(text) > _MAX_TEXT_LENGTH:
        raise ValueError(f"budget {text[:20]!r}... is too long")
    if isinstance(value, int | float) or re.fullmatch(r"[\d.]+\s*[kKMG]?", text):
        raise ValueError(f'budget "{text}": say per what, e.g. {text}/month or {text}/day')
    match = _BUDGET.fullmatch(text)
    if match is None:
        raise ValueError(
            f'budget "{text}": expected a number with k, M or G and /month or /day ({_EXAMPLES})'
        )
    number, suffix, period = match.groups()
    calls = float(number) * SUFFIX_FACTORS[suffix]
    if not math.isfinite(calls) or calls < 1:
        raise ValueError(f'budget "{text}": must allow at least one call')
    return Budget(calls, PERIOD_SECONDS[period])
