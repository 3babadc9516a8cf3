"""What the rules will cost at the provider: RPC calls per second and per month, for each method,
at the configured intervals, against ``rpc.max_rps`` (``watcher check`` prints it), so that a
user sees before deploying that "100 addresses every 30 s = 8.6 M calls a month".

With ``max_every`` (adaptive rules) or ``rpc.budget``, ``cadence_lines`` says per rule what it
costs at ``every`` (the worst case: every target busy) and at ``max_every`` (the floor: every
target quiet), their shares of the budget, and whether the floor fits it, or by how much the
intervals will stretch beyond ``max_every`` (as the daemon's plan will,
``watcher.budget.planning``).

Pure: jobs in (one per source and interval, ``watcher.kinds.ruleset.Job``), lines out. What one
poll of a target of each source calls is the source's own declaration (``SourceFacts``: its
methods, the keys one call serves, whether a target is a rule's keys), read from the
registry's sources (``watcher.kinds.SOURCES``). The figures are the quiet
minimum: one call per target per poll (a busy address pages further, a large token-account
listing takes more pages); the ``accounts`` source asks for up to 100 keys per call; one
getVoteAccounts per tick serves every source reading it (``per_tick``), whatever its targets.

It sits beside ``watcher check`` rather than among the settings (``watcher.config``) because the
facts it counts are the kinds' (``watcher.kinds``, above the settings).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from watcher.config.call_budget import MONTH_SECONDS, Budget
from watcher.config.rule_models import RuleBase, max_every_of
from watcher.kinds import KINDS, SOURCES
from watcher.kinds.base import SourceFacts
from watcher.kinds.nonce_accounts import NONCE_METHOD
from watcher.kinds.ruleset import Job


@dataclass(frozen=True)
class MethodCost:
    method: str
    targets: int
    per_second: float

    @property
    def per_month(self) -> float:
        return self.per_second * MONTH_SECONDS


def method_costs(jobs: Iterable[Job]) -> list[MethodCost]:
    """Calls per second of each method, summed over the jobs, most expensive first."""
    targets: dict[str, int] = {}
    rates: dict[str, float] = {}
    ticks: dict[str, set[float]] = {}  # a method called once per tick: the intervals calling it
    for job in jobs:
        facts = _facts(job.source)
        keys = _keys(job, facts)
        calls = math.ceil(keys / facts.keys_per_call)
        for method in facts.methods:
            targets[method] = targets.get(method, 0) + keys
            if method in facts.per_tick:
                ticks.setdefault(method, set()).add(job.interval)
            else:
                rates[method] = rates.get(method, 0.0) + calls / job.interval
    for method, intervals in ticks.items():
        rates[method] = rates.get(method, 0.0) + tick_rate(intervals)
    costs = [MethodCost(method, targets[method], rates[method]) for method in rates]
    return sorted(costs, key=lambda cost: (-cost.per_second, cost.method))


def tick_rate(intervals: Iterable[float]) -> float:
    """Ticks a second of jobs at these intervals, one call each (``SourceFacts.per_tick``):
    the jobs start together, so every tick of an interval that is a multiple of a shorter one
    is a tick of that one too; other intervals count in full (at most what they call)."""
    distinct = sorted(set(intervals))
    own = [
        interval
        for index, interval in enumerate(distinct)
        if not any(_multiple(interval, shorter) for shorter in distinct[:index])
    ]
    return math.fsum(1.0 / interval for interval in own)


def _multiple(interval: float, of: float) -> bool:
    ratio = interval / of
    return abs(ratio - round(ratio)) < 1e-9


def _facts(name: str) -> SourceFacts:
    """The facts of the source ``name`` (one unknown here: one call of a method of its name)."""
    source = SOURCES.get(name)
    return source.facts if source is not None else SourceFacts((name,))


def _keys(job: Job, facts: SourceFacts) -> int:
    """What a job's polls ask for: its targets, or the keys they hold (``nonces``)."""
    if facts.joined:
        return sum(target.count(",") + 1 for target in job.targets)
    return len(job.targets)


def _count(value: float) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:.1f} {suffix}"
    return f"{value:.0f}"


def cost_lines(
    jobs: Iterable[Job],
    max_rps: float | None,
    batch_size: int,
    rules: Iterable[RuleBase] = (),
) -> list[str]:
    """The lines ``watcher check`` prints: one per method, the total, the reads made only on
    change (``change_lines``, of ``rules``), and the share of ``max_rps`` the requests take
    (calls grouped ``batch_size`` to a request, those on change included)."""
    costs = method_costs(jobs)
    if not costs:
        return []
    width = max(len(cost.method) for cost in costs)
    out = ["RPC calls at the configured intervals (quiet minimum: busy targets page further):"]
    for cost in costs:
        out.append(
            f"  {cost.method:<{width}}  {cost.targets:>7} targets  {cost.per_second:9.2f}/s  "
            f"{_count(cost.per_month):>8} a month"
        )
    total = sum(cost.per_second for cost in costs)
    out.append(
        f"  {'total':<{width}}  {'':>15}  {total:9.2f}/s  {_count(total * MONTH_SECONDS):>8}"
        " a month"
    )
    nonces = next((cost for cost in costs if cost.method == NONCE_METHOD), None)
    if nonces is not None:
        out.append(
            f"  the nonce rules: one getProgramAccounts over the System program per key and "
            f"interval ({nonces.targets} keys), among the heaviest calls a node serves; a "
            "provider that refuses it makes them say the keys cannot be verified"
        )
    changes = change_costs(rules)
    out += change_lines(changes)
    total += sum(cost.per_second for cost in changes)
    if max_rps is not None:
        requests = total / max(1, batch_size)
        share = f"{requests / max_rps:.0%}"
        verdict = "fits" if requests <= max_rps else "does NOT fit: sweeps will stretch"
        out.append(
            f"  about {requests:.2f} requests/s with batch_size {batch_size}: {share} of "
            f"max_rps {max_rps:g} ({verdict})"
        )
    return out


# The share of polls assumed to find something new (a watched address moving), for the reads
# made only then (``SourceFacts.on_change``): 1 in 20 polls. Said on the line that counts them.
CHANGE_SHARE: Final = 0.05
BATCHED_KEYS: Final = 100  # getMultipleAccounts' keys a call


def change_costs(rules: Iterable[RuleBase]) -> list[MethodCost]:
    """Calls a second of the reads made only when a poll finds something new, assuming
    ``CHANGE_SHARE`` of the polls do: per method, most expensive first. The moving targets
    of one round share getMultipleAccounts calls (a round of one mover still pays a call)."""
    targets: dict[str, int] = {}
    rates: dict[str, float] = {}
    for rule in rules:
        source = SOURCES.get(_source_name(rule))
        if source is None or not source.facts.on_change:
            continue
        count = len(rule.targets)
        moving = count * CHANGE_SHARE  # per round
        for method in source.facts.on_change:
            calls = max(moving / BATCHED_KEYS, min(moving, 1.0))
            targets[method] = targets.get(method, 0) + count
            rates[method] = rates.get(method, 0.0) + calls / rule.every
        for field, method in source.facts.on_change_by_field:
            if getattr(rule, field, False):
                targets[method] = targets.get(method, 0) + count
                rates[method] = rates.get(method, 0.0) + moving / rule.every
    costs = [MethodCost(method, targets[method], rates[method]) for method in rates]
    return sorted(costs, key=lambda cost: (-cost.per_second, cost.method))


def _source_name(rule: RuleBase) -> str:
    kind = KINDS.get(rule.kind)
    return "" if kind is None else kind.source.name


def change_lines(costs: Sequence[MethodCost]) -> list[str]:
    """The lines ``watcher check`` prints for the reads made only on change."""
    if not costs:
        return []
    width = max(len(cost.method) for cost in costs)
    out = [
        f"Balance reads of addresses that moved (new_transactions; assumed: {CHANGE_SHARE:.0%} "
        "of polls find new signatures; and one getMultipleAccounts key per address at its "
        "first poll):"
    ]
    for cost in costs:
        out.append(
            f"  {cost.method:<{width}}  {cost.targets:>7} targets  {cost.per_second:9.2f}/s  "
            f"{_count(cost.per_month):>8} a month"
        )
    return out


@dataclass(frozen=True)
class BudgetFit:
    """The rules' floor against a budget: what the rules without max_every spend, what the
    others spend at max_every, and how far their intervals stretch (1.0: they fit)."""

    fixed_per_second: float
    floor_per_second: float
    stretch_factor: float


def budget_fit(jobs: Iterable[Job], budget: Budget) -> BudgetFit:
    fixed = floor = 0.0
    for job in jobs:
        if job.max_interval is None:
            fixed += len(job.targets) / job.interval
        else:
            floor += len(job.targets) / job.max_interval
    left = budget.per_second - fixed
    # The budget wins: the adaptive rules' intervals stretch by what their floor overruns it.
    if floor <= left:
        return BudgetFit(fixed, floor, 1.0)
    return BudgetFit(fixed, floor, math.inf if left <= 0 else floor / left)


def cadence_lines(
    rules: Iterable[RuleBase], jobs: Iterable[Job], budget: Budget | None
) -> list[str]:
    """Per rule, its calls a month at ``every`` and at ``max_every`` (and their shares of
    ``budget``); then whether the floor of all rules fits the budget. Nothing when no rule has
    ``max_every`` and there is no budget."""
    rules = list(rules)
    if budget is None and all(max_every_of(rule) is None for rule in rules):
        return []
    out = ["Calls a month per rule, at every (worst case) and at max_every (floor):"]
    width = max((len(rule.name) for rule in rules), default=0)
    for rule in rules:
        longest = max_every_of(rule)
        cost = cadence_cost(len(rule.targets), rule.every, longest or rule.every)
        line = (
            f"  {rule.name:<{width}}  {len(rule.targets):>7} targets  at every "
            f"{_count(cost.at_every_per_month):>8}"
        )
        line += (
            f"  at max_every {_count(cost.at_max_every_per_month):>8}"
            if longest is not None
            else f"  {'(no max_every)':>22}"
        )
        if budget is not None:
            worst, floor = cost.shares(budget)
            line += f"  {worst:.0%} / {floor:.0%} of the budget"
        out.append(line)
    if budget is not None:
        fit = budget_fit(jobs, budget)
        fixed_share = budget_share(fit.fixed_per_second, budget)
        floor_share = budget_share(fit.floor_per_second, budget)
        head = (
            f"  rpc.budget {budget}: rules without max_every {fixed_share:.0%}, "
            f"the others at max_every {floor_share:.0%}"
        )
        if math.isinf(fit.stretch_factor):
            out.append(head + ": the rules without max_every alone exceed it")
        elif fit.stretch_factor > 1.0:
            out.append(
                head + f": does NOT fit, intervals stretch {fit.stretch_factor:.2f}x beyond"
                " max_every"
            )
        else:
            out.append(head + ": fits (intervals follow activity between every and max_every)")
    return out


# The arithmetic of a steady rate of calls.


def monthly_calls(calls_per_second: float) -> float:
    """Calls in a (30-day) month at a steady rate."""
    return calls_per_second * MONTH_SECONDS


def calls_per_second(targets: int, interval: float) -> float:
    """Calls per second of ``targets`` each polled once every ``interval`` seconds."""
    if interval <= 0:
        raise ValueError(f"interval must be positive, got {interval}")
    return targets / interval


def budget_share(calls_per_second: float, budget: Budget) -> float:
    """Fraction of the budget a steady rate spends: 0.5 is half, 2.0 twice the budget."""
    return calls_per_second / budget.per_second


@dataclass(frozen=True)
class CadenceCost:
    """What ``targets`` cost between their bounds: the worst case, every target at ``every``,
    and the floor, every target at ``max_every`` (what stays when all of them are quiet)."""

    at_every_per_second: float
    at_max_every_per_second: float

    @property
    def at_every_per_month(self) -> float:
        return monthly_calls(self.at_every_per_second)

    @property
    def at_max_every_per_month(self) -> float:
        return monthly_calls(self.at_max_every_per_second)

    def shares(self, budget: Budget) -> tuple[float, float]:
        """(worst case, floor) as fractions of the budget; a floor above 1 means intervals
        will stretch beyond ``max_every``."""
        return (
            budget_share(self.at_every_per_second, budget),
            budget_share(self.at_max_every_per_second, budget),
        )


def cadence_cost(targets: int, every: float, max_every: float) -> CadenceCost:
    """The cost of ``targets`` polled between ``every`` and ``max_every`` seconds."""
    return CadenceCost(calls_per_second(targets, every), calls_per_second(targets, max_every))
