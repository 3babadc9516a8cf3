"""End to end with ``quorum: 2``: the real `watcher run` against two simulators on loopback with
their own ledgers, which come to disagree about a watched validator. A disagreement is not an
outage: the heartbeat goes on, ``/healthz`` stays healthy, no ``rpc_unhealthy``; the built-in
``rpc_disagreement`` says so once it lasted ``health.disagreement_for``, and resolves when the
endpoints agree again. Neither key ever shows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.simulator import SimulatorServer
from watcher.testing.daemon import DaemonProcess, write_config
from watcher.testing.net import free_port, get
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import OUR_VOTE, rules, small_cluster

pytestmark = pytest.mark.e2e

KEY_A, KEY_B = "e2eQu0rumAK3yTh4tMustN3v3rL3ak", "e2eQu0rumBK3yTh4tMustN3v3rL3ak"
DISAGREEMENTS = 'watcher_rpc_disagreements_total{source="votes"}'


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


class Pings:
    """A real local HTTP listener counting the GETs of a heartbeat (like healthchecks.io)."""

    def __init__(self) -> None:
        self.count = 0
        pings = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                pings.count += 1
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ping/quorum-beat"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def pings() -> Iterator[Pings]:
    receiver = Pings()
    yield receiver
    receiver.close()


@pytest.mark.timeout(120)
def test_endpoints_that_disagree_are_reported_not_taken_for_an_outage(
    tmp_path: Path, pings: Pings
) -> None:
    a, b = small_cluster(), small_cluster()
    with (
        SimulatorServer(a, api_key=KEY_A) as server_a,
        SimulatorServer(b, api_key=KEY_B) as server_b,
        JsonReceiver() as receiver,
    ):
        listen = f"127.0.0.1:{free_port()}"
        config = write_config(
            tmp_path,
            rpc_url="unused",
            channels={"hooks": [receiver.url]},
            rules=[rules()[2]],  # my-validator: delinquent_validators, every 200ms
            extra={
                "quorum": 2,
                "http": {"listen": listen},
                "heartbeat": {"url": pings.url, "every": "100ms"},
                "health": {"disagreement_for": "2s", "channels": ["hooks"]},
            },
        )
        data = yaml.safe_load(config.read_text())
        del data["rpc_url"]
        data["rpc_urls"] = [server_a.url, server_b.url]
        config.write_text(yaml.safe_dump(data))
        daemon = DaemonProcess(config)

        def titles() -> list[str]:
            return [note["title"] for note in receiver.received]

        def wait_title(start: str) -> dict[str, Any]:
            return wait_until(
                lambda: next((n for n in receiver.received if n["title"].startswith(start)), None),
                20.0,
                f"{start!r} (have {titles()})\n{daemon.output()[-3000:]}",
            )

        try:
            daemon.start()
            wait_until(lambda: pings.count >= 1, 20.0, "a first heartbeat")
            a.mark_delinquent(OUR_VOTE)  # only endpoint A sees it: they disagree from now on
            wait_until(
                lambda: metric(get(f"http://{listen}/metrics")[1], DISAGREEMENTS) >= 2,
                20.0,
                "disagreements counted",
            )
            beats = pings.count
            wait_until(lambda: pings.count > beats + 2, 20.0, "heartbeats while they disagree")
            assert get(f"http://{listen}/healthz")[0] == 200
            health = subprocess.run(
                [sys.executable, "-m", "watcher", "status", "--config", str(config), "--health"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert health.returncode == 0, health.stderr  # no round "failed every poll"

            fired = wait_title("[CRITICAL] rpc_disagreement:")
            assert fired["title"] == (
                "[CRITICAL] rpc_disagreement: the RPC endpoints disagree on votes cluster"
            )
            urls = [server_a.url.replace(KEY_A, "***"), server_b.url.replace(KEY_B, "***")]
            assert f"Endpoints: {urls[0]}, {urls[1]}" in fired["message"]
            assert f"my-validator {OUR_VOTE}: {urls[0]} says firing" in fired["message"]
            assert f"{urls[1]} says inactive" in fired["message"]
            assert get(f"http://{listen}/healthz")[0] == 200
            assert titles() == [fired["title"]]  # nothing about the validator: not evidence

            b.mark_delinquent(OUR_VOTE)  # now both do: they agree
            wait_title("[RESOLVED] rpc_disagreement: the RPC endpoints agree again on votes")
            wait_title("[CRITICAL] my-validator:")
            assert daemon.stop() == 0
        finally:
            daemon.kill()
    output = daemon.output()
    rounds = [json.loads(line) for line in output.splitlines() if '"event": "round"' in line]
    assert any(line["disagreed"] for line in rounds) and not any(r["failed"] for r in rounds)
    assert not any("rpc_unhealthy" in title for title in titles())
    for key in (KEY_A, KEY_B):
        assert key not in output and key not in json.dumps(receiver.received)
