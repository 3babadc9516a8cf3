"""The simulator's provider limits: latency, enforce_rps (429 + Retry-After), batches refused."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from watcher.cli import app
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.limits import HttpCounts, ProviderLimits, RateWindow

CALL = {"jsonrpc": "2.0", "id": 1, "method": "getClusterNodes"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0  # seconds

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5) as client:
        yield client


def _admit_at(window: RateWindow, clock: FakeClock, *times: float) -> list[int | None]:
    answers = []
    for at in times:
        clock.now = at
        answers.append(window.admit())
    return answers


def test_rate_window_slides_and_names_the_wait() -> None:
    clock = FakeClock()
    window = RateWindow(3, clock)
    assert _admit_at(window, clock, 0.0, 0.1, 0.2) == [None, None, None]
    assert _admit_at(window, clock, 0.3, 0.99) == [1, 1]  # the oldest leaves at 1.0
    # 0.0 left: (0.0, 1.0] holds 0.1, 0.2 and this one
    assert _admit_at(window, clock, 1.0, 1.05, 1.1, 5.0) == [None, 1, None, None]
    with pytest.raises(ValueError, match="positive"):
        RateWindow(0)


def test_rate_window_counts_requests_by_when_they_arrived() -> None:
    # The server's threads ask in any order: each request counts at its arrival.
    window = RateWindow(2, FakeClock())
    assert window.admit(0.5) is None
    assert window.admit(0.2) is None  # arrived earlier, asked later: (-0.8, 0.2] held none
    assert window.admit(0.9) == 1  # (-0.1, 0.9] holds 0.2 and 0.5
    assert window.admit(1.3) is None  # (0.3, 1.3] holds 0.5 alone


def test_rate_window_fractional_rates() -> None:
    clock = FakeClock()
    assert _admit_at(RateWindow(0.5, clock), clock, 0.0, 0.2) == [None, 1]  # at most 1
    assert _admit_at(RateWindow(2.5, clock), clock, 0.0, 0.4, 0.8, 0.9) == [None, None, None, 1]


def test_enforce_rps_answers_429_with_retry_after_and_counts(http: httpx.Client) -> None:
    clock = FakeClock()
    with SimulatorServer(
        Ledger(seed=7), limits=ProviderLimits(enforce_rps=2), clock=clock
    ) as server:
        answers = [http.post(server.url, json=CALL) for _ in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 429, 429]
        assert answers[2].headers["Retry-After"] == "1"
        assert answers[2].json()["error"]["code"] == 429
        clock.now += 1.0
        assert http.post(server.url, json=[CALL, CALL]).status_code == 200  # a batch is one
        assert server.counts() == HttpCounts(requests=5, too_many=2, batches_refused=0)
        assert server.count("getClusterNodes") == 6  # every call is still recorded
        server.clear()
        assert server.counts() == HttpCounts(0, 0, 0)


def test_no_limit_by_default(http: httpx.Client) -> None:
    with SimulatorServer(Ledger(seed=7)) as server:
        assert all(http.post(server.url, json=CALL).status_code == 200 for _ in range(20))
        assert server.counts() == HttpCounts(requests=20, too_many=0, batches_refused=0)


def test_batches_false_refuses_batches_as_providers_do(http: httpx.Client) -> None:
    with SimulatorServer(Ledger(seed=7), limits=ProviderLimits(batches=False)) as server:
        refused = http.post(server.url, json=[CALL, CALL])
        assert refused.status_code == 400
        assert refused.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "batch requests are not supported"},
        }
        single = http.post(server.url, json=CALL)
        assert single.status_code == 200 and "result" in single.json()
        assert server.counts() == HttpCounts(requests=2, too_many=0, batches_refused=1)


def test_latency_holds_each_answer_without_blocking_the_others() -> None:
    # Answers wait a minute: all three requests still reach the server, each in its own thread.
    server = SimulatorServer(Ledger(seed=7), limits=ProviderLimits(latency=60.0))
    server.start()
    outcomes: list[Any] = []

    def post() -> None:
        with httpx.Client(timeout=30) as client:
            try:
                outcomes.append(client.post(server.url, json=CALL).status_code)
            except httpx.HTTPError as exc:
                outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=post) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        assert server.wait_for_calls("getClusterNodes", 3, timeout=10)
        assert outcomes == []  # no answer yet: each waits out its latency
    finally:
        server.stop()  # wakes the waiting handlers; their connections close unanswered
    for thread in threads:
        thread.join(timeout=10)
    assert len(outcomes) == 3 and 200 not in outcomes


def test_simulate_command_offers_the_limits() -> None:
    result = CliRunner().invoke(app, ["simulate", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for option in ("--latency", "--enforce-rps", "--no-batches"):
        assert option in result.output
