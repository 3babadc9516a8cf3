"""API keys that are short or sit in an odd place of the RPC URL's path never show: not in the
logs, the rpc_unhealthy notification, the state database or ``watcher alerts --json``.

The real daemon runs against the simulator, which refuses these paths (HTTP 401): every call
fails, so rpc_unhealthy fires and its message names the endpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from watcher.simulator import SimulatorServer
from watcher.testing.daemon import DaemonProcess, write_config
from watcher.testing.receivers import JsonReceiver

from support.world import rules, small_cluster

pytestmark = pytest.mark.e2e

TWELVE = "Sh0rtK3y12ab"  # a 12-character key
ODD = "0dd1yPl4c3dK3y"


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("path", "key", "shown"),
    [
        (f"/{TWELVE}", TWELVE, "/***"),
        (f"/{ODD}/solana", ODD, "/***/solana"),
    ],
    ids=["12-char-key-alone", "key-before-solana"],
)
def test_the_key_never_shows(
    tmp_path: Path, sqlite_file_bytes: Any, path: str, key: str, shown: str
) -> None:
    with SimulatorServer(small_cluster()) as server, JsonReceiver() as receiver:
        base = f"http://{server.host}:{server.port}"
        config = write_config(
            tmp_path,
            rpc_url=base + path,
            channels={"hooks": [receiver.url]},
            rules=rules(),
            extra={"rpc": {"timeout": "2s", "max_attempts": 1}, "health": {"unhealthy_after": 2}},
        )
        daemon = DaemonProcess(config)
        try:
            daemon.start()
            [note] = receiver.wait_for(1, timeout=30)
            assert note["title"] == "[CRITICAL] rpc_unhealthy: the RPC endpoint is failing"
            assert f"Endpoint: {base}{shown}" in note["message"]
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
    assert "rpc_unhealthy" in history.stdout
    # The failures were logged with their detail (the round's summary line), without the key.
    assert "round failed" in output and '"failed": 1' in output and '"error": "' in output
    for text in (output, json.dumps(receiver.received), history.stdout, history.stderr):
        assert key not in text
    database = tmp_path / "state" / "watcher.db"
    assert key.encode() not in sqlite_file_bytes(database, open_db=False)
