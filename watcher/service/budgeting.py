"""``rpc.budget`` at run time: share the calls among the adaptive targets (pure).

Every ``ALLOCATE_EVERY`` seconds (and at the first sweep) the sweeper plans the budget over
all jobs: the rules without ``max_every`` spend what they spend (one call per target per
interval); what is left is allocated among the adaptive targets, one group per job, by their
estimated event rates (``watcher.cadence.allocate_groups``: rates proportional to the square
root of each target's event rate, within its bounds). The budget is the bill: when even
``max_every`` for every target costs more, every interval stretches by one factor, and the
sweeper says so once.

Counted as the cadence package counts: one call per poll of a target (a busy address pages
further; ``accounts`` reads up to 100 keys a call, so those cost less than counted).

First polls (baselines) spend the budget too. A job's never-polled targets are first polled at
the job's allocated rate (``first_polls_rate``), one after the other, so a large new list is
baselined over about one allocated interval, not all in the first sweep; after its first poll
a target takes its allocated interval, so the first ones come back when the last are done.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from watcher.alerting.ruleset import Job
from watcher.cadence import Budget, TargetGroup, allocate_groups

ALLOCATE_EVERY: Final = 300.0  # seconds: bursts spend beyond the plan until the next one


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

    def first_polls_rate(self, job: Job) -> float | None:
        """Polls per second ``job``'s never-polled targets may spend on their first polls: the
        job's whole allocation (the targets first polled are not due again for about their
        allocated interval, by when the others have had theirs); None: no cap known (no
        budget, or a job newer than the plan)."""
        if job.max_interval is None:
            return None
        return self.job_per_second.get(job_key(job))


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
    left = budget.per_second - fixed
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
