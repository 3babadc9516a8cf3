"""End to end, a call budget that busy addresses alone would spend: `watcher run` over 100
addresses (every 500 ms, max_every 5 s) under 12 calls a second (max_every for all would cost
20: intervals stretch 1.67x, to 8.3 s), 10 of them seeing a transaction at about every poll (at
every they alone would cost 20 calls a second). A transaction on a quiet address is still notified
within twice the stretched interval: quiet addresses are not starved by busy ones."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey
from watcher.testing.daemon import DaemonProcess, write_config
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import API_KEY

pytestmark = pytest.mark.e2e

ADDRESSES = [derived_pubkey(f"e2e budget address {index}") for index in range(100)]
BUSY, QUIET = ADDRESSES[:10], ADDRESSES[10:]
IDLE_EVENTS = QUIET[:10]  # quiet addresses that each see one transaction after the baselines
STRETCHED = 5.0 * 20.0 / 12.0  # max_every x (what max_every for all costs / the budget)
SLACK = 2.0  # a sweep's own time, the batch's answer, a loaded machine


@pytest.fixture
def provider() -> Iterator[tuple[Ledger, SimulatorServer]]:
    ledger = Ledger(seed=25)
    with SimulatorServer(ledger, api_key=API_KEY) as server:
        yield ledger, server


def polled_at(server: SimulatorServer, address: str) -> list[float]:
    return [
        request.at
        for request in list(server.requests)
        if request.method == "getSignaturesForAddress" and request.params[0] == address
    ]


def test_busy_addresses_beyond_the_budget_do_not_starve_quiet_ones(
    tmp_path: Path, provider: tuple[Ledger, SimulatorServer]
) -> None:
    ledger, server = provider
    # Two rules with the same bounds are one job, one budget plan: the quiet addresses notify
    # their own receiver, so that a digest of busy ones never hides an idle one's name.
    rule = {
        "name": "deposits",
        "kind": "new_transactions",
        "addresses": QUIET,
        "every": "500ms",
        "max_every": "5s",
        "group_wait": "0s",
        "notify": ["hooks"],
    }
    busy_rule = {**rule, "name": "busy-deposits", "addresses": BUSY, "notify": ["busy"]}
    stop = threading.Event()

    def busy_ledger() -> None:
        rng = random.Random(25)
        due = {address: time.monotonic() + rng.uniform(0.0, 0.5) for address in BUSY}
        while not stop.wait(0.05):
            for address, at in due.items():
                if time.monotonic() >= at:
                    ledger.add_transactions(address, 1)
                    due[address] = at + rng.uniform(0.3, 0.6)

    with JsonReceiver() as receiver, JsonReceiver() as busy_receiver:
        config = write_config(
            tmp_path,
            rpc_url=server.url,
            channels={"hooks": [receiver.url], "busy": [busy_receiver.url]},
            rules=[rule, busy_rule],
            extra={"rpc": {"timeout": "2s", "max_attempts": 3, "budget": "1036.8k/day"}},
        )
        daemon = DaemonProcess(config)
        mover = threading.Thread(target=busy_ledger, daemon=True)
        try:
            daemon.start()
            mover.start()
            # The baselines, paced at the budget: about 8 s for 100 addresses.
            wait_until(
                lambda: all(polled_at(server, address) for address in ADDRESSES),
                30,
                "every address's baseline",
            )
            added: dict[str, float] = {}
            for address in IDLE_EVENTS:
                ledger.add_transactions(address, 1)
                added[address] = time.time()
                time.sleep(0.5)  # spread over five seconds, as transactions come

            def notified(address: str) -> bool:
                return any(address in json.dumps(note) for note in receiver.received)

            wait_until(
                lambda: all(map(notified, IDLE_EVENTS)),
                2 * STRETCHED + SLACK + 5,
                "every quiet address's transaction notified",
            )
            for address, at in added.items():
                seen = min(moment for moment in polled_at(server, address) if moment >= at)
                assert seen - at <= 2 * STRETCHED + SLACK, (address, seen - at)
            assert daemon.stop() == 0
        finally:
            stop.set()
            daemon.kill()
    # The busy addresses were notified too, and the round lines said what the budget put off.
    assert len(receiver.received) <= len(IDLE_EVENTS)  # no baseline was taken for news
    assert busy_receiver.received
    rounds = [json.loads(line) for line in daemon.output().splitlines() if '"round"' in line]
    assert any(line.get("deferred", 0) > 0 for line in rounds)
