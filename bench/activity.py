"""Pay for what moves: a fixed and an adaptive schedule over the same activity, side by side.

The workload: N addresses watched by one ``new_transactions`` rule (``every: 30s``,
``max_every: 15m``); 1% of them move in the measured hour, the others never. An active address
has a heavy-tailed number of bursts (Pareto, alpha 1.5, at most 20) starting at uniform
moments of the hour, each burst a heavy-tailed number of events (Pareto, alpha 1.2, at most
300) one after the other with exponential gaps (mean ``every / 6``). Everything is seeded: the
same events are replayed for every schedule.

An event is **idle** when it is the first of its burst (the first after quiet) and **busy**
when it follows another of the same burst. Its detection delay is the time from the event to
the first poll of its address at or after it; an event no poll saw by the end of the run is
**missed**.

The schedules are replayed on a simulated clock, an hour of quiet first (the daemon has
watched the list for an hour: baselines done, quiet addresses backed off), then the measured
hour, then a tail until every event is seen (or three hours). The adaptive ones run the
product's own scheduling code: the sweeper's due filter (``Sweeper._due``: the cadence book,
the budget plan every 5 minutes, first polls paced under a budget), the cadence update after
each poll (``CadenceBook.after_poll``, ``activity``, ``paced_state``), at sweep ticks every
``every`` seconds as the daemon's scheduler runs them. Only the ledger is a model: a poll
sees the events of its address since its previous poll, and costs one call. The fixed
schedules need no replay: every address is polled at each tick (``every``), or, for a fixed
schedule spending a budget, once per stretched interval at a phase of its own.

The scheduler's CPU is the process time spent in that scheduling code, per 1,000 polls.

    python bench/activity.py [--quick] [--addresses N] [--seed S]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import structlog  # noqa: E402

from watcher.alerting.ruleset import Job  # noqa: E402
from watcher.cadence import Budget  # noqa: E402
from watcher.service.cadences import CadenceBook, activity, paced_state  # noqa: E402
from watcher.service.rounds import Sweeper  # noqa: E402

HOUR = 3600.0
EVERY = 30.0
MAX_EVERY = 900.0
ACTIVE_SHARE = 0.01
BURST_ALPHA = 1.1  # events per burst: Pareto, at most 300
BURST_GAP = EVERY / 3  # seconds between the events of a burst, on average (exponential)
SOURCE = "signatures"
KEYS = ("cursor",)
# What bench/README.md reports as today's daemon CPU per 1,000 polls (fixed schedule).
TODAY_CPU_PER_1000 = 0.05


@dataclass
class Workload:
    addresses: int
    events: dict[int, list[float]]  # address -> event times (s from the hour's start), sorted

    @property
    def count(self) -> int:
        return sum(len(times) for times in self.events.values())


def workload(addresses: int, seed: int) -> Workload:
    rng = random.Random(seed)
    active = rng.sample(range(addresses), max(1, round(addresses * ACTIVE_SHARE)))
    events: dict[int, list[float]] = {}
    for address in active:
        times: list[float] = []
        for _ in range(min(int(rng.paretovariate(1.5)), 20)):
            moment = rng.uniform(0.0, HOUR)
            for _ in range(min(int(rng.paretovariate(BURST_ALPHA)), 300)):
                times.append(moment)
                moment += rng.expovariate(1.0 / BURST_GAP)
        times.sort()
        events[address] = times
    return Workload(addresses, events)


class Delays:
    """Detection delays by class: an address's first event after a quiet poll (idle), the
    events after a poll that found activity (busy), the others (later events of a burst that
    came before its first was seen: they wait with it)."""

    def __init__(self) -> None:
        self.idle: list[float] = []
        self.busy: list[float] = []
        self.waiting: list[float] = []

    def seen(self, poll: float, times: Sequence[float], active: bool) -> None:
        """The events ``times`` seen by a poll at ``poll``; ``active``: the address's previous
        poll found activity."""
        for index, moment in enumerate(times):
            delay = poll - moment
            if active:
                self.busy.append(delay)
            elif index == 0:
                self.idle.append(delay)
            else:
                self.waiting.append(delay)


@dataclass
class Outcome:
    name: str
    calls_in_hour: int
    delays: Delays
    missed: int
    max_window_calls: int  # the most calls in any 10 minutes of the whole run
    polls: int = 0
    scheduler_cpu_s: float = 0.0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def idle(self) -> list[float]:
        return self.delays.idle

    @property
    def busy(self) -> list[float]:
        return self.delays.busy

    @property
    def mean(self) -> float:
        every = self.delays.idle + self.delays.busy + self.delays.waiting
        return sum(every) / len(every) if every else 0.0


def percentile(values: Sequence[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def fixed(work: Workload, interval: float, spread: bool, name: str) -> Outcome:
    """Every address polled once per ``interval``: at the sweep ticks, or (``spread``) each at
    a phase of its own, the polls evenly spread over the interval."""
    delays = Delays()
    for address, times in work.events.items():
        phase = ((address * 0.6180339887498949) % 1.0) * interval if spread else 0.0
        found = False  # whether the address's previous poll found activity
        count = 0
        first = math.ceil((times[0] - phase) / interval)
        last = math.ceil((times[-1] - phase) / interval)
        for step in range(first, last + 1):
            poll = phase + step * interval
            upto = bisect.bisect_right(times, poll, lo=count)
            delays.seen(poll, times[count:upto], found)
            found, count = upto > count, upto
    calls = round(work.addresses * HOUR / interval)
    window = math.ceil(work.addresses * 600.0 / interval)
    return Outcome(name, calls, delays, 0, window)


class _Store:
    """What the sweeper's due filter reads of a store: no state stored yet."""

    commits = 0

    async def prefetch_states(self, source: str, targets: Sequence[str]) -> None:
        return None

    async def load_state(self, source: str, target: str) -> None:
        return None


async def adaptive(work: Workload, budget: float | None, name: str) -> Outcome:
    """The product's scheduling over ``work``: a quiet hour, the measured hour, a tail."""
    wall = time.monotonic()
    targets = tuple(str(address) for address in range(work.addresses))
    job = Job(SOURCE, EVERY, targets, MAX_EVERY)
    jobs = (job,)
    plan_budget = None if budget is None else Budget(budget * 86400.0, 86400.0)
    book = CadenceBook()
    unused = cast(Any, None)
    sweeper = Sweeper(
        poll=unused,
        commit=unused,
        builtins=unused,
        store=cast(Any, _Store()),
        health=unused,
        state_health=unused,
        metrics=unused,
        poll_faults=unused,
        cadences=book,
        budget=lambda: (plan_budget, jobs),
        last_errors={},
        heartbeat=None,
        width=8,
        stopping=asyncio.Event(),
        clock=time.monotonic,
    )
    states: dict[str, dict[str, object]] = {}
    seen = [0] * work.addresses  # events already seen, per address
    pending = work.count
    delays = Delays()
    found: set[int] = set()  # addresses whose last poll found activity
    calls_per_tick: list[int] = []
    calls_in_hour = polls = 0
    cpu = 0.0
    tick = -HOUR
    while tick < HOUR or (pending and tick < 4 * HOUR):
        started = time.process_time()
        due = await sweeper._due(job, targets, tick)
        cpu += time.process_time() - started
        counts = []
        for target in due:
            address = int(target)
            times = work.events.get(address)
            count = seen[address]
            if times:
                upto = bisect.bisect_right(times, tick, lo=count)
                delays.seen(tick, times[count:upto], address in found)
                if upto > count:
                    found.add(address)
                else:
                    found.discard(address)
                pending -= upto - count
                count = seen[address] = upto
            counts.append(count)
        started = time.process_time()
        for target, count in zip(due, counts, strict=True):
            previous = states.get(target)
            new = {"cursor": count}
            events = activity(previous, new, KEYS)
            cadence = book.after_poll(
                SOURCE, target, None, now=tick, events=events, every=EVERY, max_every=MAX_EVERY
            )
            states[target] = paced_state(previous, new, cadence, events)
        cpu += time.process_time() - started
        polls += len(due)
        calls_per_tick.append(len(due))
        if 0.0 <= tick < HOUR:
            calls_in_hour += len(due)
        tick += EVERY
    per_window = round(600.0 / EVERY)
    windows = [
        sum(calls_per_tick[start : start + per_window])
        for start in range(max(1, len(calls_per_tick) - per_window + 1))
    ]
    outcome = Outcome(name, calls_in_hour, delays, pending, max(windows), polls, cpu)
    outcome.seconds = time.monotonic() - wall
    return outcome


def fmt_delays(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{percentile(values, 0.5):.0f} / {percentile(values, 0.99):.0f} / {max(values):.0f}"


def table(outcomes: Sequence[Outcome], base_calls: int) -> None:
    print(
        f"  {'schedule':<38} {'calls/hour':>11} {'share':>6} {'idle p50/p99/max s':>19} "
        f"{'busy p50/p99/max s':>19} {'mean s':>7} {'missed':>6} {'max/10min':>10}"
    )
    for o in outcomes:
        print(
            f"  {o.name:<38} {o.calls_in_hour:>11,} {100 * o.calls_in_hour / base_calls:>5.1f}% "
            f"{fmt_delays(o.idle):>19} {fmt_delays(o.busy):>19} {o.mean:>7.1f} {o.missed:>6} "
            f"{o.max_window_calls:>10,}"
        )


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


async def run(addresses: int, seed: int) -> bool:
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(40), cache_logger_on_first_use=False
    )
    work = workload(addresses, seed)
    print(
        f"\npay for what moves: {addresses:,} addresses, {len(work.events):,} of them active in "
        f"the hour, {work.count:,} events; every {EVERY:g}s, max_every {MAX_EVERY / 60:g}m "
        f"(simulated clock, the product's scheduling code; {os.cpu_count()} cores)"
    )
    base = fixed(work, EVERY, spread=False, name=f"fixed, every {EVERY:g}s")
    backoff = await adaptive(work, None, f"adaptive, max_every {MAX_EVERY / 60:g}m")
    tenth = base.calls_in_hour * 0.10 / HOUR  # calls per second
    stretched = EVERY / 0.10
    fixed_tenth = fixed(work, stretched, spread=True, name=f"fixed at 10% (every {stretched:g}s)")
    budget_tenth = await adaptive(work, tenth, f"adaptive, budget 10% ({tenth * 86400:,.0f}/day)")
    low = 0.5 * backoff.calls_in_hour / HOUR
    low_interval = work.addresses / low
    fixed_low = fixed(work, low_interval, spread=True, name=f"fixed at {low_interval:.0f}s")
    budget_low = await adaptive(
        work, low, f"adaptive, budget {low * 86400:,.0f}/day (1/2 back-off)"
    )
    outcomes = [base, backoff, fixed_tenth, budget_tenth, fixed_low, budget_low]
    table(outcomes, base.calls_in_hour)
    print(
        "  (calls in the measured hour; idle: an address's first event after quiet, busy: the "
        "following ones of its burst; max/10min: most calls in any 10 minutes of the run)"
    )
    cpu_per_1000 = 1000 * backoff.scheduler_cpu_s / max(1, backoff.polls)
    cpu_budget_per_1000 = 1000 * budget_tenth.scheduler_cpu_s / max(1, budget_tenth.polls)
    print(
        f"  scheduler CPU: {cpu_per_1000 * 1000:.1f} ms per 1,000 polls with back-off "
        f"({backoff.polls:,} polls), {cpu_budget_per_1000 * 1000:.1f} ms under the budget "
        f"({budget_tenth.polls:,}); replays took {backoff.seconds:.0f}, "
        f"{budget_tenth.seconds:.0f} and {budget_low.seconds:.0f} s"
    )
    checks = [
        (
            f"adaptive calls {100 * backoff.calls_in_hour / base.calls_in_hour:.1f}% of fixed "
            "<= 10%",
            backoff.calls_in_hour <= 0.10 * base.calls_in_hour,
        ),
        (
            f"idle p99 {percentile(backoff.idle, 0.99):.0f} s <= max_every {MAX_EVERY:g} s",
            percentile(backoff.idle, 0.99) <= MAX_EVERY,
        ),
        (
            f"busy p99 {percentile(backoff.busy, 0.99):.0f} s <= every + 5 = {EVERY + 5:g} s",
            percentile(backoff.busy, 0.99) <= EVERY + 5,
        ),
        (f"missed {backoff.missed}, budgets {budget_tenth.missed}, {budget_low.missed}", False),
        (
            f"budget 10%: mean {budget_tenth.mean:.1f} s <= half of fixed's {fixed_tenth.mean:.1f}"
            f" s",
            budget_tenth.mean <= fixed_tenth.mean / 2,
        ),
        (
            f"budget below back-off: most calls in 10 min {budget_low.max_window_calls:,} <= "
            f"{low * 600:,.0f}",
            budget_low.max_window_calls <= low * 600 + 1e-9,
        ),
        (
            f"scheduler CPU {cpu_per_1000 * 1000:.1f} ms per 1,000 polls <= 10% of today's "
            f"{TODAY_CPU_PER_1000 * 1000:.0f} ms",
            cpu_per_1000 <= 0.10 * TODAY_CPU_PER_1000,
        ),
    ]
    missed = backoff.missed + budget_tenth.missed + budget_low.missed
    checks[3] = (checks[3][0], missed == 0)
    print("  targets")
    for text, ok in checks:
        print(f"    {text}: {verdict(ok)}")
    return all(ok for _, ok in checks)


def main(quick: bool = False, addresses: int | None = None, seed: int = 6) -> int:
    count = addresses or (10_000 if quick else 100_000)
    return 0 if asyncio.run(run(count, seed)) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--addresses", type=int)
    parser.add_argument("--seed", type=int, default=6)
    args = parser.parse_args()
    raise SystemExit(main(args.quick, args.addresses, args.seed))
