"""End to end with two endpoints: the real `watcher run` against two simulators on loopback that
serve one ledger, the first of them failing (HTTP 503) for a while. Nothing is lost, the first
endpoint is taken back once it answers again, and neither key ever shows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.simulator import FaultPlan, SimulatorServer
from watcher.testing.daemon import DaemonProcess, write_config
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import OUR_VOTE, TREASURY, rules, small_cluster

pytestmark = pytest.mark.e2e

KEY_A, KEY_B = "e2eAK3yTh4tMustN3v3rL3ak0ut", "e2eBK3yTh4tMustN3v3rL3ak0ut"


@pytest.mark.timeout(120)
def test_failover_loses_nothing_and_the_first_endpoint_is_taken_back(
    tmp_path: Path, sqlite_file_bytes: Any
) -> None:
    ledger = small_cluster()
    a_faults = FaultPlan()
    with (
        SimulatorServer(ledger, api_key=KEY_A, faults=a_faults) as a,
        SimulatorServer(ledger, api_key=KEY_B) as b,
        JsonReceiver() as receiver,
    ):
        config = write_config(
            tmp_path,
            rpc_url="unused",
            channels={"hooks": [receiver.url]},
            rules=rules()[::2],  # treasury and my-validator
        )
        data = yaml.safe_load(config.read_text())
        del data["rpc_url"]
        data["rpc_urls"] = [a.url, {"url": b.url, "max_rps": 10}]
        config.write_text(yaml.safe_dump(data))
        daemon = DaemonProcess(config)

        def notes(count: int) -> list[dict[str, Any]]:
            return wait_until(
                lambda: receiver.received if len(receiver.received) >= count else None,
                20.0,
                f"{count} notifications\n{daemon.output()[-3000:]}",
            )

        try:
            daemon.start()
            wait_until(lambda: a.count("getVoteAccounts") >= 2, 20.0, "baseline polls on A")
            assert b.count() == 0  # healthy: the first endpoint listed serves everything

            a_faults.inject("http_503_html", count=10_000)
            new_sigs = ledger.add_transactions(TREASURY, 3)
            ledger.mark_delinquent(OUR_VOTE)
            titles = sorted(note["title"] for note in notes(2))
            assert "treasury" in titles[1] and "3" in titles[1]
            assert all(sig in json.dumps(receiver.received) for sig in new_sigs)
            assert "my-validator" in titles[0] and "delinquent" in titles[0]
            assert b.count() > 0

            a_faults.clear()  # A answers again: a probe finds it and it serves again
            served = a.count()
            wait_until(lambda: a.count() > served + 4, 40.0, "A taken back")
            more = ledger.add_transactions(TREASURY, 2)
            assert all(sig in json.dumps(notes(3)[-1]) for sig in more)
            assert daemon.stop() == 0
        finally:
            daemon.kill()
        output = daemon.output()
        history = subprocess.run(
            [sys.executable, "-m", "watcher", "alerts", "--config", str(config), "--json"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
    assert "rpc failover" in output
    assert "rpc_unhealthy" not in json.dumps(receiver.received)  # B kept every round healthy
    database = tmp_path / "state" / "watcher.db"
    stored = sqlite_file_bytes(database, open_db=False)
    for key in (KEY_A, KEY_B):
        for text in (output, json.dumps(receiver.received), history.stdout, history.stderr):
            assert key not in text
        assert key.encode() not in stored
