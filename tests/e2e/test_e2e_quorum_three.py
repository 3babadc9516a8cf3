"""End to end with ``quorum: 2`` and three endpoints: the real `watcher run` against three
simulators on loopback, each with its own ledger. One lies about a watched validator: no false
alert, and ``rpc_disagreement`` names it (its key masked); two that agree on the delinquency
fire it; all three recovered resolve it. No key ever shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.simulator import SimulatorServer
from watcher.testing.daemon import DaemonProcess, write_config
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import OUR_VOTE, rules, small_cluster

pytestmark = pytest.mark.e2e

KEYS = ("e2eThr3eAK3yTh4tMustN3v3rL3ak", "e2eThr3eBK3yTh4tMustN3v3rL3ak", "e2eThr3eCK3yTh4tMust")


@pytest.mark.timeout(120)
def test_a_majority_of_three_outvotes_a_liar_and_decides(tmp_path: Path) -> None:
    ledgers = (small_cluster(), small_cluster(), small_cluster())
    with (
        SimulatorServer(ledgers[0], api_key=KEYS[0]) as a,
        SimulatorServer(ledgers[1], api_key=KEYS[1]) as b,
        SimulatorServer(ledgers[2], api_key=KEYS[2]) as c,
        JsonReceiver() as receiver,
    ):
        config = write_config(
            tmp_path,
            rpc_url="unused",
            channels={"hooks": [receiver.url]},
            rules=[rules()[2]],  # my-validator: delinquent_validators, every 200ms
            extra={"quorum": 2, "health": {"disagreement_for": "1s", "channels": ["hooks"]}},
        )
        data = yaml.safe_load(config.read_text())
        del data["rpc_url"]
        data["rpc_urls"] = [a.url, b.url, c.url]  # the liar first: asked on every poll
        config.write_text(yaml.safe_dump(data))
        daemon = DaemonProcess(config)
        liar_url = a.url.replace(KEYS[0], "***")

        def titles() -> list[str]:
            return [note["title"] for note in receiver.received]

        def wait_title(start: str) -> dict[str, Any]:
            found: dict[str, Any] = wait_until(
                lambda: next((n for n in receiver.received if n["title"].startswith(start)), None),
                20.0,
                f"{start!r} (have {titles()})\n{daemon.output()[-3000:]}",
            )
            return found

        try:
            daemon.start()
            wait_until(lambda: b.count("getVoteAccounts") >= 2, 20.0, "first polls")
            ledgers[0].mark_delinquent(OUR_VOTE)  # the liar
            named = wait_title("[CRITICAL] rpc_disagreement:")
            assert named["title"].endswith(f"disagree on votes cluster: {liar_url} outvoted")
            assert f"Outvoted: {liar_url}" in named["message"]
            wait_until(lambda: c.count("getVoteAccounts") >= 10, 20.0, "the third asked")
            assert not any("my-validator" in title for title in titles()), titles()

            # The liar turns honest as the other two see the delinquency: two agree, it fires.
            ledgers[0].mark_current(OUR_VOTE)
            ledgers[1].mark_delinquent(OUR_VOTE)
            ledgers[2].mark_delinquent(OUR_VOTE)
            wait_title("[CRITICAL] my-validator:")

            for ledger in ledgers:
                ledger.mark_current(OUR_VOTE)
            wait_title("[RESOLVED] my-validator:")
            wait_title("[RESOLVED] rpc_disagreement:")
            assert daemon.stop() == 0
        finally:
            daemon.kill()
    output = daemon.output()
    assert [t for t in titles() if "my-validator" in t and "delinquent" in t]
    for key in KEYS:
        assert key not in output and key not in json.dumps(receiver.received)
