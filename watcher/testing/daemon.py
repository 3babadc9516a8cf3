"""Runs the real `watcher run` as a subprocess, the way a user or systemd does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml


def write_config(
    folder: Path,
    *,
    rpc_url: str,
    channels: Mapping[str, Sequence[str]],
    rules: Sequence[Mapping[str, Any]],
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """A settings file plus one rule file, as a user would write them."""
    (folder / "rules").mkdir(parents=True, exist_ok=True)
    (folder / "rules" / "rules.yaml").write_text(yaml.safe_dump({"rules": list(rules)}))
    settings: dict[str, Any] = {
        "rpc_url": rpc_url,
        "state_path": "state/watcher.db",
        "rules": ["rules/"],
        "channels": {name: list(urls) for name, urls in channels.items()},
        # Fast retries so that tests of delivery and RPC faults finish in seconds.
        "rpc": {"timeout": "2s", "max_attempts": 3},
        "delivery": {"first_retry": "300ms", "max_backoff": "1s"},
        "log_format": "json",
    }
    settings.update(extra or {})
    path = folder / "watcher.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


# `watcher run` started with its wall clock set to sys.argv[1] (freezegun, ticking from there);
# the event loop keeps the real monotonic clock (real_asyncio), so its timers run as usual.
_FROM_WALL_CLOCK = """
import sys
from freezegun import freeze_time
freeze_time(sys.argv.pop(1), tick=True, real_asyncio=True).start()
from watcher.entry import main
main()
"""


class DaemonProcess:
    """`python -m watcher run --config PATH`, with its output kept in a file for assertions.
    ``started_at`` (e.g. ``"2026-11-21 12:00:00"``, UTC), set before ``start``: the daemon's
    wall clock starts there, so that what it decides against "now" (the retention horizon) is
    exact."""

    def __init__(self, config: Path, env: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.started_at: str | None = None
        self.env = {**os.environ, **(env or {})}
        self.log_path = config.parent / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> DaemonProcess:
        self.runs += 1
        log = self.log_path.open("ab")
        log.write(f"--- run {self.runs} ---\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            [*self._watcher(), "run", "--config", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.config.parent,
        )
        log.close()
        return self

    def _watcher(self) -> list[str]:
        if self.started_at is None:
            return [sys.executable, "-m", "watcher"]
        return [sys.executable, "-c", _FROM_WALL_CLOCK, self.started_at]

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then wait; returns the exit code (a clean stop exits 0 within 10 s)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            message = f"daemon did not stop within {timeout}s:\n{self.output()}"
            raise AssertionError(message) from None

    def catches(self, signum: signal.Signals) -> bool:
        """Whether the process has a handler of its own for ``signum`` (Linux: ``SigCgt`` in
        /proc/PID/status): from then on that signal no longer kills it."""
        assert self.proc is not None
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except FileNotFoundError:  # already gone
            return False
        caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
        return bool(int(caught.split()[1], 16) & (1 << (signum - 1)))

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def assert_alive(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, (
            f"daemon exited with {self.proc and self.proc.returncode}:\n{self.output()}"
        )


def tx_rule(*addresses: str) -> dict[str, Any]:
    """A fast rule on ``addresses``, its alerts sent at once (``group_wait: 0s``): a test adds
    transactions and waits for their message, with no company to wait for."""
    return {
        "name": "treasury",
        "kind": "new_transactions",
        "addresses": list(addresses),
        "every": "200ms",
        "group_wait": "0s",
        "notify": ["hooks"],
    }


def alert_history(config: Path, limit: int = 100_000) -> list[dict[str, Any]]:
    """The alert history as an operator reads it: ``watcher alerts --json``, newest first."""
    command = ["alerts", "--json", "--limit", str(limit), "--config", str(config)]
    shown = subprocess.run(
        [sys.executable, "-m", "watcher", *command],
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in shown.stdout.splitlines()]
