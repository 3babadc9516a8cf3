"""``rpc.budget``'s admission: which of an adaptive job's due targets a sweep may poll.

Two questions per adaptive sweep: ``due`` (once the budget is planned when a plan is due, the
cadence book's due targets with the never-polled ones paced at the job's first-polls rate) and
``admit`` (those cut to what the job's share of the budget's window has left). The plan and the
arithmetic are pure, in ``watcher.budget.planning``; this class keeps what they need between
sweeps: the last plan and when it was made, each job's first-polls credit and each job's
spending window.

Several instances on one database each spend their share of the shards' part of the budget:
each polls only its shards' targets, so the plan's intervals, made over all of them, hold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import structlog

from watcher.budget.cadences import CadenceBook
from watcher.budget.planning import (
    ALLOCATE_EVERY,
    BudgetPlan,
    SpendWindow,
    admitted,
    job_key,
    plan_budget,
    stretch_warning,
)
from watcher.config.call_budget import Budget
from watcher.config.current import Current
from watcher.kinds.ruleset import Job
from watcher.state.shards import SHARDS

log = structlog.get_logger("watcher.app")

JobKey = tuple[str, float, float]


class BudgetInForce(Protocol):
    """What admission reads of the configuration in force (``watcher.service.configuration``):
    ``rpc.budget`` and every job (a reload changes both)."""

    @property
    def budget(self) -> Budget | None: ...

    @property
    def jobs(self) -> Sequence[Job]: ...


class HeldShards(Protocol):
    """The shards this instance holds (``Store.shards_held``; None: one instance, all)."""

    def shards_held(self) -> frozenset[int] | None: ...


class DeferredPolls(Protocol):
    """Counts the due polls a full window put off (``Metrics.budget_deferred_polls``)."""

    def budget_deferred_polls(self, source: str, polls: int) -> None: ...


class Admission:
    """The budget's plan in force and what each adaptive job has spent of its share."""

    def __init__(
        self,
        *,
        config: Current[BudgetInForce],
        cadences: CadenceBook,
        shards: HeldShards,
        metrics: DeferredPolls,
    ) -> None:
        self.config, self.cadences, self.shards, self.metrics = config, cadences, shards, metrics
        # The last plan of the budget, with when it was made and over which jobs.
        self.plan: BudgetPlan | None = None
        self._planned_at: float | None = None
        self._planned_jobs: Sequence[Job] = ()
        self._stretch_said: str | None = None
        # Per adaptive job: the first polls its share of the budget has paid for, and when.
        self._first_credit: dict[JobKey, tuple[float, float]] = {}
        # Per adaptive job: its polls in the budget's window (each job spends its share, so
        # that one job's extras never take what another's plan needs).
        self._spending: dict[JobKey, SpendWindow] = {}
        # Per job: the first polls its last sweep made (their balance reads are paid from the
        # first-polls credit, ``spent``).
        self._firsts_made: dict[JobKey, int] = {}

    def due(self, job: Job, held: Sequence[str], now: float) -> list[str]:
        """The targets of an adaptive job due now (the cadence book's), under a budget with as
        many never-polled ones as the job's share has paid for."""
        self._replan(now)
        due = self.cadences.due(job.source, held, now, slack=job.interval / 2)
        if self.plan is not None:
            due = self._first_polls_paced(job, due, now)
        return due

    def admit(self, job: Job, due: list[str], now: float) -> list[str]:
        """``due`` cut to what the job's share of the budget allows now (``SpendWindow``),
        chosen by ``admitted`` (the fairness bound first, then first polls, the plan's polls,
        and extras last); the others stay due."""
        if self.plan is None:
            return due
        per_second = self.plan.adaptive_per_second
        share = self.plan.job_per_second.get(job_key(job))
        if per_second is None or share is None:
            # The fixed rules alone spend the budget, or a job newer than the plan.
            return self._first_polls_made(job, due)
        # A sweep may spend two of its intervals' worth (a minute at least) that quiet sweeps
        # saved; beyond the plan, polls are spread rather than spent in a few sweeps.
        burst = 2 * job.interval
        window = self._spending.get(job_key(job))
        if window is None:
            window = self._spending[job_key(job)] = SpendWindow()
        rate = share * self._share()
        room = window.room(now, rate, burst)
        if len(due) > room:
            log.debug("budget window full", source=job.source, due=len(due), room=room)
            self.metrics.budget_deferred_polls(job.source, len(due) - room)
            due = admitted(
                due,
                self.cadences.cadences(job.source),
                self.cadences.planned(job.source).get,
                now=now,
                every=job.interval,
                # Urgent early enough that an extra cannot spend the poll it needs: within the
                # next sweep and the time the budget takes to earn one poll.
                horizon=1.5 * job.interval + 1.0 / max(rate, 1e-9),
                room=room,
            )
        window.spend(now, len(due))
        return self._first_polls_made(job, due)

    def spent(self, job: Job, now: float, calls: int) -> None:
        """Calls a sweep of ``job`` made beyond one per poll that the budget pays too (the
        balance reads of addresses that moved): spent from the job's window like polls."""
        if job.max_interval is None:
            return  # a rule without max_every spends what it spends (the plan's estimate)
        key = job_key(job)
        window = self._spending.get(key)
        if window is not None:
            window.spend(now, calls)
        if key in self._first_credit:
            # A first poll reads the baseline's balance too: its credit pays for that read.
            credit, at = self._first_credit[key]
            self._first_credit[key] = (credit - min(calls, self._firsts_made.get(key, 0)), at)

    def _first_polls_made(self, job: Job, admitted: list[str]) -> list[str]:
        """``admitted``, its first polls paid from the job's first-poll credit: only those
        made, not those a full window put off (paying for those as well, a credit earned in
        step with the window's would always be spent at the sweeps the window had no room)."""
        key = job_key(job)
        if key in self._first_credit:
            firsts = self.cadences.never_polled(job.source, admitted)
            credit, at = self._first_credit[key]
            self._first_credit[key] = (credit - firsts, at)
            self._firsts_made[key] = firsts
        return admitted

    def _share(self) -> float:
        """This instance's part of the budget's calls: its share of the shards."""
        held = self.shards.shards_held()
        return 1.0 if held is None else max(len(held), 1) / SHARDS

    def _first_polls_paced(self, job: Job, due: list[str], now: float) -> list[str]:
        """``due`` with as many never-polled targets as the job's share of the budget has paid
        for since its last sweep (``watcher.budget.planning``); the first sweep may take
        one."""
        assert self.plan is not None
        rate = self.plan.first_polls_rate(job)
        if rate is None or not self.cadences.never_polled(job.source, due):
            return due
        rate *= self._share()
        key = job_key(job)
        credit, last = self._first_credit.get(key, (1.0, now))
        # Capped at a sweep's worth and one poll: credit left unspent does not pile up into a
        # burst, and a rate slower than a poll a sweep keeps the fraction it earned.
        credit = min(credit + rate * max(0.0, now - last), rate * job.interval + 1.0)
        self._first_credit[key] = (credit, now)  # spent by ``admit``, as polls are made
        return self.cadences.first_polls_limited(job.source, due, math.floor(credit))

    def _replan(self, now: float) -> None:
        """Plans the budget over every job at the first adaptive sweep, every
        ``ALLOCATE_EVERY`` seconds after, and at once when a reload changed the budget or the
        jobs; says once when it stretches intervals."""
        config = self.config.current
        budget, every_job = config.budget, config.jobs
        if budget is None:
            if self.plan is not None:
                self.cadences.drop_allocation()
                self.plan = self._planned_at = None
            return
        if (
            self.plan is not None
            and self._planned_at is not None
            and now - self._planned_at < ALLOCATE_EVERY
            and self.plan.budget == budget
            and self._planned_jobs is every_job
        ):
            return
        plan = plan_budget(every_job, self.cadences.rate, budget)
        self._planned_jobs = every_job
        by_source: dict[str, dict[str, float]] = {}
        for job in every_job:
            if job.adaptive:
                by_target = zip(job.targets, plan.intervals[job_key(job)], strict=True)
                by_source.setdefault(job.source, {}).update(by_target)
        self.cadences.allocate(by_source)
        self.plan, self._planned_at = plan, now
        warning = stretch_warning(plan)
        if warning is not None and warning != self._stretch_said:
            log.warning(warning, stretch=round(plan.stretch_factor, 2))
        self._stretch_said = warning
