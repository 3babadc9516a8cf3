"""``rpc.budget`` at run time: share the calls among the adaptive targets (pure).

Every ``ALLOCATE_EVERY`` seconds (and at the first sweep) the sweeper's admission
(``watcher.budget.admission``) plans the budget over all jobs: the rules without
``max_every`` spend what they spend (one call per target per interval); what is left is
allocated among the adaptive targets, one group per job, by their estimated event rates
(``allocation.allocate_groups``: rates proportional to the square root of each target's
event rate, within its bounds). The budget is the bill: when even ``max_every`` for every
target costs more, every interval stretches by one factor, and admission says so once.

Counted as the cadence package counts: one call per poll of a target (a busy address pages
further; ``accounts`` reads up to 100 keys a call, so those cost less than counted).

First polls (baselines) spend the budget too. A job's never-polled targets are first polled at
the job's allocated rate (``first_polls_rate``), one after the other, so a large new list is
baselined over about one allocated interval, not all in the first sweep; after its first poll
a target takes its allocated interval, so the first ones come back when the last are done.

The plan is an expectation; the bill is what was spent. Between two plans a burst brings its
targets back to ``every``, and sweeps tick at fixed moments, so the plan alone can run a few
percent over. ``SpendWindow`` makes each job's share hold over any ``BUDGET_WINDOW`` seconds:
the adaptive polls of a sweep are cut to what the window has left (``admitted`` says which),
and the others stay due for the next sweep (a later poll pages from the last seen signature:
nothing is skipped, only seen later).

Which polls a full window admits is what keeps the promise to quiet targets. The plan's polls
(a target whose planned interval has passed) add up to the job's share, so they always fit;
a poll that activity asked for sooner (``every``) is an extra, paid only from what the plan's
polls left. Among the plan's polls the earliest deadline (twice the planned interval after the
last poll) goes first, and one whose deadline would pass before the next sweep goes before
anything else: no target waits more than twice its planned interval, however busy the others
are (``tests/budget/test_budget_fairness.py`` checks it under any activity and budget).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from watcher.budget.allocation import TargetGroup, allocate_groups
from watcher.budget.backoff import Cadence
from watcher.config.call_budget import Budget
from watcher.kinds.ruleset import Job

ALLOCATE_EVERY: Final = 300.0  # seconds: bursts spend beyond the plan until the next one
# Seconds over which the budget holds, whatever the plan expected: short enough that a month's
# bill cannot be spent in a day, long enough that a sweep may spend what quiet ones left.
BUDGET_WINDOW: Final = 600.0


@dataclass(frozen=True)
class BudgetPlan:
    """One allocation of the budget."""

    budget: Budget
    fixed_per_second: float  # what the jobs without max_interval spend
    # Per adaptive job (by its key): its targets' intervals, in the job's order, and its cost.
    intervals: dict[tuple[str, float, float], list[float]]
    job_per_second: dict[tuple[str, float, float], float]
    stretched: bool  # even max_every for all did not fit
    stretch_factor: float  # adaptive intervals are this times max_every when stretched

    @property
    def calls_per_second(self) -> float:
        return self.fixed_per_second + sum(self.job_per_second.values())

    @property
    def adaptive_per_second(self) -> float | None:
        """What the budget leaves the adaptive targets; None when the rules without
        ``max_every`` alone spend it (the adaptive ones then stay at ``max_every``, uncapped:
        a budget cannot stop a fixed schedule, and the check says so)."""
        if math.isinf(self.stretch_factor):
            return None
        return spendable(self.budget) - self.fixed_per_second

    def first_polls_rate(self, job: Job) -> float | None:
        """Polls per second ``job``'s never-polled targets may spend on their first polls: the
        job's whole allocation (the targets first polled are not due again for about their
        allocated interval, by when the others have had theirs); None: no cap known (no
        budget, or a job newer than the plan)."""
        if job.max_interval is None:
            return None
        return self.job_per_second.get(job_key(job))


def spendable(budget: Budget) -> float:
    """Calls a second the plan may count on: the budget, less the fraction of a call that no
    ``BUDGET_WINDOW`` can spend (a window holds whole polls: 3.2 calls in ten minutes is 3, and
    a plan of 3.2 would leave one target unpolled for good). Nothing for a budget of a call a
    second or more; everything for a tiny one."""
    return math.floor(budget.per_second * BUDGET_WINDOW + 1e-9) / BUDGET_WINDOW


def job_key(job: Job) -> tuple[str, float, float]:
    assert job.max_interval is not None
    return (job.source, job.interval, job.max_interval)


def plan_budget(
    jobs: Sequence[Job], rate_of: Callable[[str, str], float], budget: Budget
) -> BudgetPlan:
    """The allocation of ``budget`` over ``jobs``; ``rate_of(source, target)``: the target's
    estimated events per second (a prior for a target never polled)."""
    fixed = math.fsum(len(job.targets) / job.interval for job in jobs if job.max_interval is None)
    adaptive = [job for job in jobs if job.max_interval is not None]
    left = spendable(budget) - fixed
    if not adaptive:
        return BudgetPlan(budget, fixed, {}, {}, stretched=False, stretch_factor=1.0)
    if left <= 0:
        # The rules without max_every alone spend the budget: the adaptive ones stay at
        # max_every (a budget cannot stop a fixed schedule; the check says so).
        return BudgetPlan(
            budget,
            fixed,
            {job_key(job): [_bound(job)] * len(job.targets) for job in adaptive},
            {job_key(job): len(job.targets) / _bound(job) for job in adaptive},
            stretched=True,
            stretch_factor=math.inf,
        )
    groups = [
        TargetGroup(
            [rate_of(job.source, target) for target in job.targets], job.interval, _bound(job)
        )
        for job in adaptive
    ]
    allocations = allocate_groups(groups, left)
    stretch = max((allocation.stretch_factor for allocation in allocations), default=1.0)
    return BudgetPlan(
        budget,
        fixed,
        {
            job_key(job): allocation.intervals
            for job, allocation in zip(adaptive, allocations, strict=True)
        },
        {
            job_key(job): allocation.calls_per_second
            for job, allocation in zip(adaptive, allocations, strict=True)
        },
        stretched=any(allocation.stretched for allocation in allocations),
        stretch_factor=stretch,
    )


def _bound(job: Job) -> float:
    assert job.max_interval is not None
    return job.max_interval


def stretch_warning(plan: BudgetPlan) -> str | None:
    """What to tell the user when the budget does not allow every target its max_every."""
    if not plan.stretched:
        return None
    if math.isinf(plan.stretch_factor):
        return (
            f"rpc.budget {plan.budget}: the rules without max_every alone spend it; the rules "
            "with max_every stay at max_every, over the budget"
        )
    return (
        f"rpc.budget {plan.budget} is below what max_every for every target costs: intervals "
        f"stretch {plan.stretch_factor:.2f}x beyond max_every"
    )


class SpendWindow:
    """The adaptive polls of the last ``window`` seconds, to keep them within the budget, and
    a pace: a sweep may spend what the budget earned since the last one, up to ``burst``
    seconds of it. The window alone would let a long overrun spend ten minutes' calls in a few
    sweeps and then poll nothing at all until they leave it; the pace spreads what is left."""

    def __init__(self, window: float = BUDGET_WINDOW) -> None:
        self.window = window
        self._spent: deque[tuple[float, int]] = deque()
        self._total = 0
        self._credit: float | None = None  # polls earned and not spent, at ``_at``
        self._at = 0.0

    def room(self, now: float, per_second: float, burst: float) -> int:
        """How many polls may start at ``now``: neither the last ``window`` seconds spending
        more than ``per_second`` a second, nor more than was earned at that rate since the
        last sweep, with at most ``burst`` seconds' worth saved."""
        spent = self._spent
        while spent and (spent[0][0] <= now - self.window or spent[0][0] > now):
            # Out of the window (or ahead of a clock stepped back: counted as gone).
            self._total -= spent.popleft()[1]
        # One poll more than the burst: a budget slower than a poll a sweep saves across sweeps
        # up to a whole poll without losing the fraction it earned beyond (a cap of exactly one
        # poll would drop it, and such a budget would spend less than it allows).
        cap = per_second * burst + 1.0
        if self._credit is None:
            credit = cap
        else:
            credit = min(self._credit + per_second * max(0.0, now - self._at), cap)
        self._credit, self._at = credit, now
        in_window = math.floor(per_second * self.window + 1e-9) - self._total
        return max(0, min(in_window, math.floor(credit + 1e-9)))

    def spend(self, now: float, polls: int) -> None:
        if polls:
            self._spent.append((now, polls))
            self._total += polls
            if self._credit is not None:
                self._credit -= polls


# A plan's interval is a float the allocation worked out: a plan of every sweep (5 s) may come
# out a hair over (5.000001 s), which must not mean every other sweep.
_TICK_TOLERANCE = 0.99


def admitted(
    due: Sequence[str],
    cadences: Mapping[str, Cadence | None],
    planned: Callable[[str], float | None],
    *,
    now: float,
    every: float,
    horizon: float,
    room: int,
) -> list[str]:
    """The polls of ``due`` that a sweep at ``now`` with ``room`` for that many polls makes,
    the rest staying due. In this order:

    1. a target owed a poll (below) whose gap would pass twice its planned interval before
       ``now + horizon`` (the next sweep, and the time the budget takes to earn a poll): the
       fairness bound, earliest deadline first;
    2. first polls (``None`` cadence): their pace has paid for them already;
    3. the plan's polls: the planned interval since the last poll has passed, counted in the
       sweeps' ticks (``every`` apart), earliest deadline first;
    4. extras: activity brought the target back under its planned interval; the most events
       expected since its last poll (estimated rate times the time since) first.

    ``planned(target)``: the target's interval in the budget's plan (None: not planned yet;
    its cadence's interval stands in)."""
    if len(due) <= room:
        return list(due)
    if room <= 0:
        return []
    urgent_by = now + horizon

    def rank(target: str) -> tuple[int, float]:
        cadence = cadences.get(target)
        if cadence is None:
            return (1, 0.0)
        interval = planned(target) or cadence.interval
        # Polls happen at sweeps, and a poll's answer comes a little after its sweep's tick:
        # the time since, rounded to the ticks, against the plan. A target planned every 6.6 s,
        # swept every 5 s, is owed every 10 s: owed at the nearer tick, it would spend a third
        # more than its plan, and the targets it crowded out would all fall due at their bound.
        if every * round((now - cadence.seen_at) / every) < interval * _TICK_TOLERANCE:
            # Not owed yet: an extra, however near its deadline (a busy target polled early
            # and often would otherwise always look urgent, and take every poll).
            return (3, -cadence.rate * (now - cadence.seen_at))
        deadline = cadence.seen_at + 2.0 * interval
        return (0 if deadline <= urgent_by else 2, deadline)

    ranked = sorted(due, key=rank)  # stable: ties keep the job's order
    return ranked[:room]
