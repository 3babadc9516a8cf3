"""A real Prometheus Alertmanager for tests: ``with Alertmanager(webhook_url) as am: am.url``.

Debian's ``prometheus-alertmanager`` on loopback, in a temporary folder of its own (its storage
there), without gossip (``--cluster.listen-address=``), with one receiver: a webhook to a local
listener of the test (``watcher.testing.receivers.JsonReceiver``), every alert grouped on its own
and sent after a short ``group_wait``/``group_interval``, resolutions too. ``restart(empty=True)``
stops it, deletes its storage and starts it again on the same port: an Alertmanager that
forgot every alert. Every wait is on a condition (its readiness, an alert), never a fixed sleep.
``Alertmanager(settings=...)`` runs it with a configuration of the test's own instead (the
shipped example's, ``deploy/alertmanager/alertmanager.yml``, pointed at local receivers).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Self

import yaml

from watcher.testing.net import free_port
from watcher.testing.receivers import Running, wait_until

BINARY = "prometheus-alertmanager"
AMTOOL = "amtool"  # its command-line tool, in the same Debian package
START_SECONDS = 30.0


def binary(name: str = BINARY) -> str | None:
    """The Alertmanager binary (or ``amtool``) on this machine, or None."""
    return shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)


def config(webhook_url: str) -> dict[str, Any]:
    return {
        "route": {
            "receiver": "test",
            "group_by": ["alertname", "subject"],
            "group_wait": "1s",
            "group_interval": "1s",
            "repeat_interval": "1h",
        },
        "receivers": [
            {"name": "test", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}
        ],
    }


class Alertmanager(Running):
    """One Alertmanager process on 127.0.0.1, its config and storage in a temporary folder."""

    def __init__(self, webhook_url: str = "", *, settings: dict[str, Any] | None = None) -> None:
        found = binary()
        if found is None:
            raise RuntimeError(
                f"{BINARY} is not installed: run deploy/ensure-monitoring (apt-get install "
                "prometheus-alertmanager), as `make test` does"
            )
        self.binary = found
        self.folder = Path(tempfile.mkdtemp(prefix="watcher-alertmanager-"))
        self.config_path = self.folder / "alertmanager.yml"
        self.config_path.write_text(yaml.safe_dump(settings or config(webhook_url)))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.folder / "alertmanager.log"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v2"

    @property
    def url(self) -> str:
        """The watcher channel URL of this Alertmanager."""
        return f"alertmanager://127.0.0.1:{self.port}"

    def start(self) -> Self:
        storage = self.folder / "data"
        storage.mkdir(exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config_path}",
                    f"--storage.path={storage}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--cluster.listen-address=",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._ready, START_SECONDS, f"Alertmanager ready\n{self.output()[-2000:]}")
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"Alertmanager exited:\n{self.output()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def restart(self, *, empty: bool = True) -> None:
        """Stop it and start it again on the same port; ``empty``: with its storage deleted."""
        self.stop()
        if empty:
            shutil.rmtree(self.folder / "data", ignore_errors=True)
        self.start()

    def alerts(self) -> list[dict[str, Any]]:
        """``GET /api/v2/alerts``: the alerts it holds now (active, silenced or not)."""
        with urllib.request.urlopen(f"{self.api}/alerts", timeout=5) as answer:
            found: list[dict[str, Any]] = json.loads(answer.read())
        return found

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        """Stops it and deletes its folder (config, storage and log)."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
