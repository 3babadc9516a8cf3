"""Sweeps: bounded observations in flight, and the one warning when max_rps stretches a sweep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, cast

import pytest
import structlog

from watcher.alerting.builtin import RoundHealth, StateHealth
from watcher.core.errors import StateError
from watcher.core.tally import count_balance_read, count_call
from watcher.kinds import SOURCES
from watcher.kinds.ruleset import Job
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.service.metrics import Metrics
from watcher.service.rounds import Fanout, RoundReports, Sweeper
from watcher.service.scheduler import Scheduler
from watcher.service.sweeps import (
    FirstCalls,
    Primed,
    quiet_sweep,
    run_batches,
    run_bounded,
    run_eagerly,
    stretch_for,
    stretch_warning,
    sweep_width,
)
from watcher.service.target_pipeline import LastErrors, PollFaults

URL = "https://rpc.example.com/v3/SeCrEtKeY-0123456789abcdefXYZ"


def _addresses(count: int) -> tuple[str, ...]:
    return tuple(f"address{i}" for i in range(count))


async def test_run_bounded_keeps_order_and_never_exceeds_its_width() -> None:
    in_flight, peak = 0, 0

    async def poll(target: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0)
        in_flight -= 1
        return target * 2

    assert await run_bounded(range(1000), poll, 7) == [i * 2 for i in range(1000)]
    assert peak == 7
    assert await run_bounded([], poll, 7) == []
    assert sweep_width(8, 10) == 640  # every request slot filled with a batch, eight times over


def test_stretch_warning_says_by_how_much() -> None:
    job = Job("signatures", 60.0, _addresses(10000))
    assert stretch_warning(job, max_rps=10, calls_per_request=1) == (
        "sweep of 10000 addresses needs 1000 s at 10 req/s, longer than every: 60s"
    )
    assert stretch_warning(job, max_rps=10, calls_per_request=10) == (
        "sweep of 10000 addresses needs 100 s at 10 req/s, longer than every: 60s"
    )
    assert stretch_warning(job, max_rps=200, calls_per_request=1) is None  # 50 s fits
    assert stretch_warning(job, max_rps=None, calls_per_request=1) is None  # no limit
    votes = Job("votes", 1.0, ("cluster", "other"))
    assert stretch_warning(votes, max_rps=1, calls_per_request=1) == (
        "sweep of 2 targets needs 2 s at 1 req/s, longer than every: 1s"
    )


async def test_stretch_for_a_client_counts_its_batches_and_method_cap() -> None:
    job = Job("signatures", 30.0, _addresses(5000))
    async with RpcClient(URL, RpcSettings(max_rps=5, batch_size=50)) as client:
        # getSignaturesForAddress: 10 per batch whatever batch_size says.
        assert stretch_for(client, job) == (
            "sweep of 5000 addresses needs 100 s at 5 req/s, longer than every: 30s"
        )
    async with RpcClient(URL, RpcSettings(batch_size=50)) as unlimited:
        assert stretch_for(unlimited, job) is None


async def test_scheduler_warns_once_per_scheduled_job() -> None:
    ran = asyncio.Event()

    async def sweep(job: Job) -> None:
        ran.set()

    def stretch(job: Job) -> str | None:
        return f"too slow: {job.source}" if job.source == "signatures" else None

    scheduler = Scheduler(sweep, stretch=stretch)
    with structlog.testing.capture_logs() as logs:
        scheduler.start([Job("signatures", 60.0, ("a",)), Job("votes", 60.0, ("cluster",))])
        await asyncio.wait_for(ran.wait(), timeout=10)
        scheduler.replace([Job("signatures", 60.0, ("a",)), Job("votes", 60.0, ("cluster",))])
        await scheduler.stop(grace=5)
    warnings = [(e["event"], e["job"]) for e in logs if e["log_level"] == "warning"]
    assert warnings == [("too slow: signatures", "signatures@60")]


async def test_a_sweep_that_overran_its_interval_is_followed_at_once() -> None:
    loop = asyncio.get_running_loop()
    runs: list[tuple[float, float]] = []  # (start, end) of each sweep, loop time
    second = asyncio.Event()

    async def sweep(job: Job) -> None:
        start = loop.time()
        if not runs:
            await asyncio.sleep(1.4)  # the first sweep's work outlasts its 1 s interval
        runs.append((start, loop.time()))
        if len(runs) == 2:
            second.set()

    scheduler = Scheduler(sweep)
    scheduler.start([Job("signatures", 1.0, ("a",))])
    await asyncio.wait_for(second.wait(), timeout=10)
    await scheduler.stop(grace=5)
    (_, first_end), (second_start, _) = runs
    # Not at the next tick (2 s after the first start, 0.6 s after its end): at once.
    assert second_start - first_end < 0.3


async def test_run_batches_hands_each_batch_its_targets_in_order_and_prepares_whole_batches() -> (
    None
):
    seen: list[tuple[int, list[int]]] = []
    prepared: list[tuple[int, int]] = []

    async def poll_batch(start: int, batch: Sequence[int]) -> list[int]:
        seen.append((start, list(batch)))
        await asyncio.sleep(0)
        return [target * 2 for target in batch]

    async def prepare(start: int, stop: int) -> None:
        prepared.append((start, stop))

    targets = range(100, 125)
    results = await run_batches(targets, poll_batch, 2, batch=10, prepare=prepare, chunk=20)
    assert results == [target * 2 for target in targets]
    assert seen == [(0, list(range(100, 110))), (10, list(range(110, 120))), (20, [*targets[20:]])]
    assert prepared == [(0, 20), (20, 25)]  # positions of the targets, a chunk at a time
    assert await run_batches([], poll_batch, 2, batch=10) == []


async def test_run_eagerly_finishes_what_does_not_wait_in_the_callers_task() -> None:
    caller = asyncio.current_task()
    ran_in: dict[int, asyncio.Task[Any] | None] = {}
    gate = asyncio.Event()

    async def poll(index: int) -> int:
        ran_in[index] = asyncio.current_task()
        if index % 2:
            await gate.wait()  # this one waits: it goes on as a task of its own
        return index * 10

    asyncio.get_running_loop().call_soon(gate.set)  # once the polls wait
    assert await run_eagerly([poll(index) for index in range(5)]) == [0, 10, 20, 30, 40]
    assert [ran_in[index] is caller for index in range(5)] == [True, True, True, True, True]


async def test_run_eagerly_cancelled_cancels_the_polls_that_wait_and_closes_the_rest() -> None:
    cleaned: list[str] = []
    never, waiting = asyncio.Event(), asyncio.Event()

    async def waits() -> None:
        try:
            waiting.set()
            await never.wait()
        finally:
            cleaned.append("waited")

    async def quick() -> None:
        cleaned.append("quick")

    running = asyncio.ensure_future(run_eagerly([waits(), quick(), quick()]))
    await waiting.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert cleaned == ["quick", "quick", "waited"]


class UnreadableStates:
    """A store whose reads fail (a locked or lost database)."""

    def __init__(self) -> None:
        self.asked: list[Sequence[str]] = []

    async def load_states(self, source: str, targets: Sequence[str]) -> list[Any]:
        self.asked.append(targets)
        raise StateError("database is locked", operation="load states")


async def test_a_batch_whose_states_cannot_be_read_leaves_each_poll_to_read_its_own() -> None:
    store = UnreadableStates()
    async with RpcClient(URL, RpcSettings(batch_size=10)) as client:
        primed = await FirstCalls(client, cast(Any, store)).prime(
            SOURCES["signatures"], _addresses(3)
        )
    # Nothing made of the batch, no call sent: each poll reads its state and meets the error.
    assert primed == [None, None, None]
    assert store.asked == [_addresses(3)]


# -- the width of a sweep after a quiet one ----------------------------------------------------


@pytest.mark.parametrize(
    ("targets", "calls", "balance_reads", "quiet"),
    [
        (1000, 1000, 0, True),  # every poll ended at its batch's answer
        (1000, 1100, 100, True),  # a tenth went on
        (1000, 1101, 0, False),
        (1000, 1000, 101, False),  # the first sweep: a balance read each
        (0, 0, 0, True),
    ],
)
def test_a_sweep_is_quiet_when_nearly_every_poll_ended_at_its_first_answer(
    targets: int, calls: int, balance_reads: int, quiet: bool
) -> None:
    assert quiet_sweep(targets, calls, balance_reads) is quiet


class CountedBatches:
    """First calls that answer after a few turns of the loop, counting the batches under way
    at once; each poll reads its balance too while ``busy`` (its first answer was news)."""

    def __init__(self) -> None:
        self.in_flight = self.peak = 0
        self.busy = False

    def batch(self, source: Any) -> int:
        return 10

    async def prime(self, source: Any, targets: Sequence[str], rests: Any) -> list[Primed]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        count_call(len(targets))
        for _ in range(5):
            await asyncio.sleep(0)
        if self.busy:
            for _ in targets:
                count_balance_read()
        self.in_flight -= 1
        return [Primed(None, cast(Any, "call"), []) for _ in targets]


class QuietPolls:
    def quiet(self, source: Any, polls: Sequence[tuple[str, Primed]], *_: Any) -> list[bool]:
        return [True] * len(polls)


class Unlimited:
    def spent(self, job: Job, now: float, calls: int) -> None:
        return None


class OneInstance:
    commits = 0

    def shards_held(self) -> None:
        return None

    def holds(self, source: str, target: str) -> bool:
        return True

    async def prefetch_states(self, source: str, targets: Sequence[str]) -> None:
        return None

    async def flush_states(self) -> int:
        return 0

    async def record_round(self, done: Any) -> None:
        return None


async def test_a_sweep_after_a_quiet_one_keeps_two_batches_a_slot_not_eight() -> None:
    job = Job("signatures", 60.0, _addresses(200))
    batches = CountedBatches()
    sweeper = Sweeper(
        polls=cast(Any, QuietPolls()),
        store=cast(Any, OneInstance()),
        admission=cast(Any, Unlimited()),  # a fixed job: the budget only hears what it spent
        reports=RoundReports(
            RoundHealth(), StateHealth(), Metrics(time.time), PollFaults(), LastErrors(), None
        ),
        rpc_health=cast(Any, None),
        fanout=Fanout(sweep_width(1, 10), cast(Any, batches), sweep_width(1, 10, quiet=True)),
        stopping=asyncio.Event(),
        clock=time.time,
    )
    peaks = []
    for busy in (False, False, True, False):
        batches.busy, batches.peak = busy, 0
        await sweeper.sweep(job)
        peaks.append(batches.peak)
    # The first sweep wide; after a quiet one, two batches a slot; after a busy one, wide again.
    assert peaks == [8, 2, 2, 8]
    assert sweep_width(8, 10, quiet=True) == 160
