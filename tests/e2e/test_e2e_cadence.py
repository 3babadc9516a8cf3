"""End to end, pay for what moves: `watcher run` with `max_every` polls an idle address less and
less often; a transaction to it is notified at its next poll (within max_every), brings it
back to `every`, and the next one is notified within every and a little."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey
from watcher.testing.daemon import DaemonProcess, write_config
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import API_KEY

pytestmark = pytest.mark.e2e

IDLE = derived_pubkey("e2e idle deposit address")
EVERY, MAX_EVERY = 0.5, 4.0
SLACK = 2.0  # a sweep's own time, the delivery, a loaded machine


@pytest.fixture
def provider() -> Iterator[tuple[Ledger, SimulatorServer]]:
    ledger = Ledger(seed=5)
    ledger.add_transactions(IDLE, 1, ago=60)  # history: before the watch, never notified
    with SimulatorServer(ledger, api_key=API_KEY) as server:
        yield ledger, server


def polls(server: SimulatorServer) -> list[float]:
    """When the simulator was asked for the idle address's signatures."""
    return [
        request.at
        for request in server.requests
        if request.method == "getSignaturesForAddress" and request.params[0] == IDLE
    ]


def gaps(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in pairwise(times)]


def test_an_idle_address_backs_off_and_a_transaction_brings_it_back(
    tmp_path: Path, provider: tuple[Ledger, SimulatorServer]
) -> None:
    ledger, server = provider
    rule = {
        "name": "deposits",
        "kind": "new_transactions",
        "addresses": [IDLE],
        "every": "500ms",
        "max_every": "4s",
        "group_wait": "0s",
        "notify": ["hooks"],
    }
    with JsonReceiver() as receiver:
        config = write_config(
            tmp_path,
            rpc_url=server.url,
            channels={"hooks": [receiver.url]},
            rules=[rule],
            extra={"rpc": {"timeout": "2s", "max_attempts": 3}},
        )
        daemon = DaemonProcess(config)
        try:
            daemon.start()
            # The baseline, then quiet polls about 0.5, 1, 2 and 4 s apart.
            wait_until(lambda: len(polls(server)) >= 5, 30, "five polls of the idle address")
            backing_off = gaps(polls(server))
            assert backing_off[-1] >= 3 * backing_off[0], backing_off  # backed off
            assert backing_off[-1] <= MAX_EVERY + SLACK, backing_off  # but never past max_every

            ledger.add_transactions(IDLE, 1)
            added_at = time.time()
            wait_until(lambda: receiver.received, MAX_EVERY + SLACK, "the first transaction")

            # Activity: back to every; the next transaction is notified at the next quick poll.
            ledger.add_transactions(IDLE, 1)
            wait_until(lambda: len(receiver.received) >= 2, EVERY + SLACK, "the second one")
            # The poll that saw the first one was followed by the next at about every.
            after = [at for at in polls(server) if at > added_at]
            assert len(after) >= 2 and after[1] - after[0] < MAX_EVERY / 2, gaps(after)
            assert daemon.stop() == 0
        finally:
            daemon.kill()
    titles = [note["title"] for note in receiver.received]
    assert len(titles) == 2 and all("deposits: 1 new transaction" in t for t in titles), titles
