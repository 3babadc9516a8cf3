"""The simulator in time: a slot that follows the wall clock (``watcher simulate``, ``watcher
demo``), and faults that last a while."""

from __future__ import annotations

import io
import threading
import time

import httpx
import pytest

from watcher.simulator import Ledger, SimulatorServer, recorded, serve
from watcher.simulator.faults import FaultPlan
from watcher.testing.receivers import wait_until

from support.values import FakeClock, key

ADDRESS = key("clock address")
# A year after the recorded tip: 78,840,000 slots of 400 ms later.
A_YEAR_LATER = recorded.MAINNET_TIP_TIME + 365 * 86_400


def test_the_wall_clock_slot_counts_400_ms_slots_from_the_recorded_tip() -> None:
    assert recorded.wall_clock_slot(recorded.MAINNET_TIP_TIME) == recorded.MAINNET_TIP_SLOT
    assert recorded.wall_clock_slot(A_YEAR_LATER) == recorded.MAINNET_TIP_SLOT + 78_840_000
    assert recorded.wall_clock_slot(A_YEAR_LATER + 0.399) == recorded.wall_clock_slot(A_YEAR_LATER)
    assert (
        recorded.wall_clock_slot(A_YEAR_LATER + 0.4) == recorded.wall_clock_slot(A_YEAR_LATER) + 1
    )
    # Before the tip (a clock set wrong): the tip, not an older slot.
    assert recorded.wall_clock_slot(0) == recorded.MAINNET_TIP_SLOT


def test_a_ledger_following_the_wall_clock_moves_with_it_and_never_back() -> None:
    clock = FakeClock(A_YEAR_LATER)
    ledger = Ledger(clock=clock, seed=1)
    assert ledger.slot == recorded.MAINNET_TIP_SLOT  # its own slots, until told
    ledger.follow_wall_clock()
    start = recorded.wall_clock_slot(A_YEAR_LATER)
    assert ledger.slot == start
    revision = ledger.revision
    clock.advance(4.0)
    assert ledger.slot == start + 10
    assert ledger.revision > revision  # a slot passing is a change (cached answers renew)

    # Transactions land in new slots, even faster than the clock: it then waits for them.
    ledger.add_transactions(ADDRESS, 30)
    landed = [entry["slot"] for entry in reversed(ledger.signatures(ADDRESS))]
    assert landed == list(range(start + 11, start + 41))
    clock.advance(11.0)  # 15 s since the start: the clock (start + 37) is behind the ledger
    assert ledger.slot == start + 40
    clock.advance(10.0)  # 25 s: the clock leads again
    assert ledger.slot == start + 62


def test_a_restarted_simulator_answers_no_older_slot() -> None:
    clock = FakeClock(A_YEAR_LATER)
    first = Ledger(clock=clock, seed=1)
    first.follow_wall_clock()
    first.add_transactions(ADDRESS, 2)
    clock.advance(60.0)
    before_restart = first.slot
    restarted = Ledger(clock=clock, seed=1)  # a new process: nothing kept
    restarted.follow_wall_clock()
    assert restarted.slot >= before_restart


def test_a_halted_cluster_stands_still_then_goes_on_from_there() -> None:
    clock = FakeClock(A_YEAR_LATER)
    ledger = Ledger(clock=clock, seed=1)
    ledger.follow_wall_clock()
    clock.advance(2.0)
    ledger.halt()
    halted_at = ledger.slot
    clock.advance(60.0)
    assert ledger.slot == halted_at
    ledger.halt(False)
    assert ledger.slot == halted_at  # not 150 slots on at once
    clock.advance(0.8)
    assert ledger.slot == halted_at + 2


def test_a_ledger_of_its_own_keeps_its_fixed_slots() -> None:
    # The tests' ledgers (and rule tests) count from the recorded tip, whatever the time.
    ledger = Ledger(clock=FakeClock(A_YEAR_LATER), seed=1)
    ledger.add_transactions(ADDRESS)
    assert ledger.signatures(ADDRESS)[0]["slot"] == recorded.MAINNET_TIP_SLOT + 1
    ledger.tick(5)
    assert ledger.slot == recorded.MAINNET_TIP_SLOT + 6


def test_watcher_simulate_serves_the_wall_clock_slot() -> None:
    out, stop = io.StringIO(), threading.Event()
    worker = threading.Thread(target=lambda: serve(0, "quiet", out=out, stop=stop))
    floor = recorded.wall_clock_slot(time.time())
    worker.start()
    try:
        line = wait_until(
            lambda: next((w for w in out.getvalue().split() if w.startswith("http://")), None),
            what="the simulator's URL",
        )
        body = {"jsonrpc": "2.0", "id": 1, "method": "getTokenSupply"}
        body["params"] = ["EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"]  # the demo's mint
        first = httpx.post(line, json=body, timeout=10).json()["result"]["context"]["slot"]
        assert first >= floor
        # It moves on by itself (no scenario ticks it): a slot every 400 ms.
        wait_until(
            lambda: (
                httpx.post(line, json=body, timeout=10).json()["result"]["context"]["slot"] > first
            ),
            what="a later slot",
        )
    finally:
        stop.set()
        worker.join(10)


# -- faults that last a while ---------------------------------------------------------------


def test_a_timed_fault_spoils_every_matching_request_until_its_time_is_over() -> None:
    clock = FakeClock()
    plan = FaultPlan(clock=clock)
    plan.inject("http_503_html", for_seconds=30.0, method="getSlot")
    assert plan.take_http(["getBalance"]) is None  # another method's request goes through
    taken = [plan.take_http(["getSlot"]) for _ in range(5)]
    assert [fault.kind if fault else None for fault in taken] == ["http_503_html"] * 5
    assert plan.pending() == 1
    clock.advance(30.0)
    assert plan.take_http(["getSlot"]) is None and plan.pending() == 0


def test_a_timed_fault_refuses_a_non_positive_time() -> None:
    with pytest.raises(ValueError, match="for_seconds must be positive"):
        FaultPlan().inject("garbage", for_seconds=0)


def test_a_served_timed_fault_ends_by_itself() -> None:
    ledger = Ledger(seed=1)
    with SimulatorServer(ledger) as server:
        ledger.faults.inject("http_429", for_seconds=0.3)
        body = {"jsonrpc": "2.0", "id": 1, "method": "getSignaturesForAddress"}
        body["params"] = [ADDRESS]
        assert httpx.post(server.url, json=body, timeout=10).status_code == 429
        wait_until(
            lambda: httpx.post(server.url, json=body, timeout=10).status_code == 200,
            what="the endpoint answering again",
        )
