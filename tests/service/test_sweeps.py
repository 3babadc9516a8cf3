"""Sweeps: bounded observations in flight, and the one warning when max_rps stretches a sweep."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import pytest
import structlog

from watcher.core.errors import StateError
from watcher.kinds import SOURCES
from watcher.kinds.ruleset import Job
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.service.scheduler import Scheduler
from watcher.service.sweeps import (
    FirstCalls,
    run_batches,
    run_bounded,
    run_eagerly,
    stretch_for,
    stretch_warning,
    sweep_width,
)

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
    seen: list[list[int]] = []
    prepared: list[list[int]] = []

    async def poll_batch(batch: Sequence[int]) -> list[int]:
        seen.append(list(batch))
        await asyncio.sleep(0)
        return [target * 2 for target in batch]

    async def prepare(part: Sequence[int]) -> None:
        prepared.append(list(part))

    results = await run_batches(range(25), poll_batch, 2, batch=10, prepare=prepare, chunk=20)
    assert results == [target * 2 for target in range(25)]
    assert seen == [list(range(10)), list(range(10, 20)), list(range(20, 25))]
    assert prepared == [list(range(20)), list(range(20, 25))]
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
