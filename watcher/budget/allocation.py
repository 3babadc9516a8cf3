"""Share a call budget among targets: poll rates proportional to the square root of each
target's event rate, within each target's bounds, summing to the budget.

Target ``i`` has an estimated event rate ``λ_i`` and bounds ``every_i <= interval <=
max_every_i``, i.e. a poll rate in ``[lo_i, hi_i] = [1/max_every_i, 1/every_i]``. Its poll rate
is ``r_i(c) = clamp(c * sqrt(λ_i), lo_i, hi_i)``, with one multiplier ``c`` for all targets.
The total ``S(c) = Σ r_i(c)`` is continuous and non-decreasing in ``c`` (water-filling), so:

* ``Σ hi_i <= budget``: every target at ``every`` (nothing to save);
* ``Σ lo_i > budget``: the bounds cannot hold; every rate is ``lo_i`` scaled down by the same
  factor, so every interval is ``max_every`` times ``stretch_factor`` (the budget wins);
* otherwise the ``c`` with ``S(c) = budget``, found by bisection on ``c``. Targets sharing
  bounds (one rule's targets) form a group whose ``sqrt(λ)`` values are sorted once, with
  prefix sums: ``S(c)`` is then a few binary searches per group, and the per-target work is
  a sort and a few passes over the list (100,000 targets: tens of milliseconds).

``allocate`` takes the bounds as one value for all targets or one per target;
``allocate_groups`` takes the targets already grouped by bounds (a rule's targets share them),
the faster form, and says what each group costs.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, compress, repeat
from typing import Final

_FEW_GROUPS: Final = 16  # up to this many distinct pairs of bounds, grouped by passes in C
_BISECTION_STEPS: Final = 200  # far more than the ~70 halvings of log(c) to float precision


@dataclass(frozen=True)
class Allocation:
    rates: list[float]  # poll rate of each target (polls per second), in the input's order
    calls_per_second: float  # their sum: at most the budget
    stretched: bool  # the budget did not allow every target its max_every
    stretch_factor: float  # intervals are this times max_every when stretched, else 1.0

    @property
    def intervals(self) -> list[float]:
        """Seconds between polls of each target."""
        return [1.0 / rate for rate in self.rates]


@dataclass(frozen=True)
class TargetGroup:
    """Targets sharing one pair of bounds (a rule's targets), with their event rates."""

    event_rates: Sequence[float]
    every: float
    max_every: float


@dataclass(frozen=True)
class _Group:
    """The targets sharing one pair of bounds, their sqrt(rate)s sorted, with prefix sums."""

    lo: float
    hi: float
    roots: list[float]  # ascending
    prefix: list[float]  # prefix[k] = sum(roots[:k])

    def total(self, scale: float) -> float:
        """Σ clamp(scale * root, lo, hi) over the group."""
        # Below lo: root < lo/scale; above hi: root > hi/scale; in between: scale * root.
        low = bisect_left(self.roots, self.lo / scale)
        high = bisect_right(self.roots, self.hi / scale)
        middle = self.prefix[high] - self.prefix[low]
        return self.lo * low + scale * middle + self.hi * (len(self.roots) - high)


def allocate(
    event_rates: Sequence[float],
    every: float | Sequence[float],
    max_every: float | Sequence[float],
    budget: float | None,
) -> Allocation:
    """Poll rates for targets with ``event_rates`` (events per second) between their bounds
    (seconds; one value for all targets or one per target) within ``budget`` calls per second.

    ``budget`` None: no cap, every target at ``every`` (without a budget the backoff, not the
    allocation, decides; this is the worst case ``watcher check`` prints).
    """
    count = len(event_rates)
    if budget is not None and not budget > 0:
        raise ValueError(f"budget must be positive calls per second, got {budget}")
    if isinstance(every, int | float) and isinstance(max_every, int | float):
        [allocation] = allocate_groups([TargetGroup(event_rates, every, max_every)], budget)
        return allocation
    _check_rates(event_rates)
    shortest = _per_target(every, count, "every")
    longest = _per_target(max_every, count, "max_every")
    if count and (min(shortest) <= 0 or any(map(operator.gt, shortest, longest))):
        raise ValueError("bounds must satisfy 0 < every <= max_every for every target")
    ceilings = list(map(operator.truediv, repeat(1.0), shortest))
    ceiling = math.fsum(ceilings)
    if budget is None or ceiling <= budget:
        return Allocation(ceilings, ceiling, stretched=False, stretch_factor=1.0)
    floors = list(map(operator.truediv, repeat(1.0), longest))
    floor = math.fsum(floors)
    if floor >= budget:
        # Not even max_every for all fits: the bill wins, every interval stretches alike.
        rates = list(map(operator.mul, repeat(budget / floor), floors))
        return _capped(rates, budget, stretched=floor > budget, stretch_factor=floor / budget)
    roots = list(map(math.sqrt, event_rates))
    scale = _multiplier(_groups(roots, floors, ceilings), budget)
    # Conditionals, not min()/max(): see _clamped.
    rates = [
        high if rate >= high else (low if rate <= low else rate)
        for rate, low, high in zip(map(scale.__mul__, roots), floors, ceilings, strict=True)
    ]
    return _capped(rates, budget, stretched=False, stretch_factor=1.0)


def allocate_groups(groups: Sequence[TargetGroup], budget: float | None) -> list[Allocation]:
    """``allocate`` for targets given by groups of shared bounds, one ``Allocation`` per group
    (its ``calls_per_second``: that group's cost; ``stretched`` and ``stretch_factor`` the same
    in all). The fast form: no per-target bounds to build, compare or group."""
    if budget is not None and not budget > 0:
        raise ValueError(f"budget must be positive calls per second, got {budget}")
    for group in groups:
        if not 0 < group.every <= group.max_every:
            raise ValueError(
                f"need 0 < every <= max_every, got every={group.every}, max_every={group.max_every}"
            )
        _check_rates(group.event_rates)
    # n * (1 / every), not n / every: the sum of the n per-target rates ``allocate`` adds up,
    # so that both forms tell "fits" from "stretched" alike at the boundary, to the ulp.
    ceiling = math.fsum(len(group.event_rates) * (1.0 / group.every) for group in groups)
    if budget is None or ceiling <= budget:
        return [_alike(group.event_rates, 1.0 / group.every) for group in groups]
    floor = math.fsum(len(group.event_rates) * (1.0 / group.max_every) for group in groups)
    if floor >= budget:
        # Not even max_every for all fits: the bill wins, every interval stretches alike.
        shrink, stretch_factor = budget / floor, floor / budget
        return [
            _alike(group.event_rates, shrink / group.max_every, stretch_factor) for group in groups
        ]
    roots = [list(map(math.sqrt, group.event_rates)) for group in groups]
    bounded = [
        _group(1.0 / group.max_every, 1.0 / group.every, group_roots)
        for group, group_roots in zip(groups, roots, strict=True)
        if group_roots
    ]
    scale = _multiplier(bounded, budget)
    allocated = [
        _clamped(group_roots, scale, 1.0 / group.max_every, 1.0 / group.every)
        for group, group_roots in zip(groups, roots, strict=True)
    ]
    # Should rounding still leave the total above the budget, scale it away.
    totals = [math.fsum(rates) for rates in allocated]
    if math.fsum(totals) > budget:
        shrink = budget / math.fsum(totals)
        allocated = [list(map(operator.mul, repeat(shrink), rates)) for rates in allocated]
        totals = [math.fsum(rates) for rates in allocated]
    return [
        Allocation(rates, total, stretched=False, stretch_factor=1.0)
        for rates, total in zip(allocated, totals, strict=True)
    ]


def _alike(targets: Sequence[float], rate: float, stretch_factor: float = 1.0) -> Allocation:
    """Every target of a group at the same poll rate."""
    return Allocation(
        [rate] * len(targets),
        len(targets) * rate,
        stretched=stretch_factor > 1.0,
        stretch_factor=stretch_factor,
    )


def _clamped(roots: list[float], scale: float, low: float, high: float) -> list[float]:
    if scale == 0.0:  # no activity anywhere: all at max_every
        return [low] * len(roots)
    # Compare the root with the thresholds: one multiplication only for targets in between;
    # conditionals, not min()/max(): a builtin call per target would cost five times as much.
    above, below = high / scale, low / scale
    return [high if root >= above else (low if root <= below else scale * root) for root in roots]


def _check_rates(event_rates: Sequence[float]) -> None:
    if event_rates and (min(event_rates) < 0 or not math.isfinite(sum(event_rates))):
        raise ValueError("event rates must be finite and not negative")


def _per_target(value: float | Sequence[float], count: int, name: str) -> Sequence[float]:
    if isinstance(value, int | float):
        return [float(value)] * count
    if len(value) != count:
        raise ValueError(f"{name}: {len(value)} values for {count} targets")
    return value


def _groups(roots: list[float], floors: list[float], ceilings: list[float]) -> list[_Group]:
    """The targets grouped by their bounds (usually one group per rule)."""
    distinct = set(zip(floors, ceilings, strict=True))
    if len(distinct) > _FEW_GROUPS:
        by_bounds: dict[tuple[float, float], list[float]] = {}
        for root, bounds in zip(roots, zip(floors, ceilings, strict=True), strict=True):
            by_bounds.setdefault(bounds, []).append(root)
        return [_group(low, high, group) for (low, high), group in by_bounds.items()]
    # A pass over the targets in C per group, not a loop in Python over all of them; when the
    # floors alone tell the groups apart (the usual case), one comparison a target.
    by_floor = len({low for low, _ in distinct}) == len(distinct)
    groups = []
    for low, high in distinct:
        members = map(operator.eq, floors, repeat(low))
        if not by_floor:
            members = map(operator.and_, members, map(operator.eq, ceilings, repeat(high)))
        groups.append(_group(low, high, list(compress(roots, members))))
    return groups


def _group(low: float, high: float, roots: list[float]) -> _Group:
    ordered = sorted(roots)
    return _Group(low, high, ordered, list(accumulate(ordered, initial=0.0)))


def _multiplier(groups: list[_Group], budget: float) -> float:
    """The largest ``c`` (to float precision) with Σ clamp(c * root, lo, hi) <= budget,
    given Σ lo < budget < Σ hi."""
    # S(c) reaches Σ hi once c * root >= hi for every target with a positive root; targets
    # with root 0 stay at lo whatever c. Bisect on log c: the span may be many decades.
    positive = [group.roots[bisect_right(group.roots, 0.0)] for group in groups if group.roots[-1]]
    if not positive:  # no target has shown any activity: nothing to weigh, all stay at lo
        return 0.0
    below = min(group.lo for group in groups) / max(group.roots[-1] for group in groups)
    above = max(group.hi for group in groups) / min(positive)
    # Aim a rounding error below the budget: the prefix sums may be off by an ulp a target,
    # and rates summing a hair above the budget would need another pass to scale them down.
    target = budget * (1.0 - sum(len(group.roots) for group in groups) * 2.0**-52)
    for _ in range(_BISECTION_STEPS):
        middle = math.sqrt(below) * math.sqrt(above)  # the product alone may overflow
        if not below < middle < above:
            break
        if sum(group.total(middle) for group in groups) <= target:
            below = middle
        else:
            above = middle
    return below


def _capped(
    rates: list[float], budget: float, *, stretched: bool, stretch_factor: float
) -> Allocation:
    # Rounding in the sums may leave the total a few ulps above the budget: scale those away.
    total = math.fsum(rates)
    if total > budget:
        rates = list(map(operator.mul, repeat(budget / total), rates))
        total = min(math.fsum(rates), budget)
    return Allocation(rates, total, stretched=stretched, stretch_factor=stretch_factor)
