"""End to end at a paid request rate: `watcher run` with rpc.max_rps R against a provider that
enforces R (429 beyond), batching the calls: not one 429, every transaction notified."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from watcher.simulator import Ledger, ProviderLimits, SimulatorServer
from watcher.simulator.keys import derived_pubkey
from watcher.testing.daemon import DaemonProcess, write_config
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import API_KEY

pytestmark = pytest.mark.e2e

RATE = 20  # requests/s the provider sells and enforces
ADDRESSES = [derived_pubkey(f"e2e deposit {i}") for i in range(60)]


@pytest.fixture
def provider() -> Iterator[tuple[Ledger, SimulatorServer]]:
    ledger = Ledger(seed=7)
    for address in ADDRESSES:
        ledger.add_transactions(address, 1)
    with SimulatorServer(
        ledger, api_key=API_KEY, limits=ProviderLimits(enforce_rps=RATE, latency=0.01)
    ) as server:
        yield ledger, server


def test_max_rps_against_a_provider_enforcing_it_no_429_every_transaction_notified(
    tmp_path: Path, provider: tuple[Ledger, SimulatorServer]
) -> None:
    ledger, server = provider
    rule = {
        "name": "deposits",
        "kind": "new_transactions",
        "addresses": ADDRESSES,
        "every": "200ms",
        "notify": ["hooks"],
    }
    with JsonReceiver() as receiver:
        config = write_config(
            tmp_path,
            rpc_url=server.url,
            channels={"hooks": [receiver.url]},
            rules=[rule],
            extra={"rpc": {"timeout": "2s", "max_attempts": 3, "max_rps": RATE, "batch_size": 10}},
        )
        daemon = DaemonProcess(config)
        try:
            daemon.start()
            # Two full sweeps: every address has its cursor.
            wait_until(
                lambda: server.count("getSignaturesForAddress") >= 2 * len(ADDRESSES),
                30,
                "two sweeps",
            )
            for address in ADDRESSES:
                ledger.add_transactions(address, 2)
            wait_until(
                lambda: notified(receiver) >= 2 * len(ADDRESSES),
                30,
                "every new transaction notified\n" + daemon.output()[-2000:],
            )
            wait_until(
                lambda: server.count("getSignaturesForAddress") >= 4 * len(ADDRESSES),
                30,
                "two more sweeps",
            )
            assert notified(receiver) == 2 * len(ADDRESSES)  # each once
            assert daemon.stop() == 0
        finally:
            daemon.kill()
    counts = server.counts()
    assert counts.too_many == 0, f"{counts.too_many} of {counts.requests} requests got 429"
    # Batched: getSignaturesForAddress, 10 to a request (the historical cap), not one each.
    sizes = {request.batch_size for request in server.requests}
    assert 10 in sizes and counts.requests < server.count("getSignaturesForAddress")
    # 6 requests a sweep at 20/s take 0.3 s, longer than every: 200ms: said once.
    lines = [json.loads(line) for line in daemon.output().splitlines() if line[:1] == "{"]
    warnings = [line["event"] for line in lines if line["level"] == "warning"]
    assert warnings == ["sweep of 60 addresses needs 0.3 s at 20 req/s, longer than every: 0.2s"]


def notified(receiver: JsonReceiver) -> int:
    """Transactions the notifications announce: "2 new transactions on ..." or a digest's
    "34 new transactions (17 addresses)"."""
    counts = (
        re.match(r"\[\w+\] deposits: (\d+) new transactions?", note["title"])
        for note in receiver.received
    )
    return sum(int(found.group(1)) for found in counts if found)
