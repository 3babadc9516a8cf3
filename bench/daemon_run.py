"""The real daemon measured from outside: `watcher run` and `watcher simulate` as processes.

``Simulator`` is `watcher simulate --ledger ... --latency` in a process of its own, seeded with
one transaction per address. ``measure_daemon`` runs `watcher run` over an addresses_file until
its second round, reading its log lines, its /proc figures and its own /metrics; then starts it
again on the same state database (start-up time); ``check_time`` times `watcher check`.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from common import drain

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Simulator:
    """`watcher simulate` in its own process, seeded with one transaction per address (or with
    ``ledger_section``, a rule test's ``ledger:``: validators, accounts ...)."""

    def __init__(
        self,
        folder: Path,
        addresses: list[str],
        latency: float,
        enforce_rps: float | None = None,
        batches: bool = True,
        ledger_section: dict[str, Any] | None = None,
    ) -> None:
        self.port = free_port()
        ledger = folder / "ledger.yaml"
        if ledger_section is None:
            seeds = "".join(f"    {address}: 1\n" for address in addresses)
            ledger.write_text("ledger:\n  transactions:\n" + seeds)
        else:  # a rule test's ``ledger:`` section (JSON is YAML)
            ledger.write_text(json.dumps({"ledger": ledger_section}))
        args = [
            sys.executable,
            "-m",
            "watcher",
            "simulate",
            "--port",
            str(self.port),
            "--ledger",
            str(ledger),
            "--latency",
            str(latency),
        ]
        if enforce_rps:
            args += ["--enforce-rps", str(enforce_rps)]
        if not batches:
            args += ["--no-batches"]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if "serving" in line:
                break
        drain(self.proc.stdout)
        self.url = f"http://127.0.0.1:{self.port}/v3/sim-key"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@dataclass
class DaemonFigures:
    addresses: int
    every: float
    first_sweep_s: float | None = None
    steady_sweep_s: float | None = None
    calls: int = 0  # RPC calls of the first sweep (its round line)
    requests: int = 0  # HTTP requests of the sweeps measured (/metrics)
    rounds: int = 0  # sweeps measured
    too_many: int = 0  # 429s received (/metrics)
    first_cpu_s: float = 0.0  # CPU from "started" to the first round line
    # CPU of one interval, steady: from the second round line (the sweeps after it follow a
    # quiet one, as every sweep after the daemon's second) to the last, over the intervals
    # between them (the kernel counts CPU in 10 ms ticks: one 5 s interval of 1,000 polls is a
    # handful of them, so one reading alone is off by a tenth or two)
    steady_cpu_s: float = 0.0
    rss_mb: float = 0.0
    ready_s: float = 0.0  # spawn -> "watcher started", empty state database
    restart_ready_s: float = 0.0  # the same with the state of the first run
    check_s: float = 0.0
    check_rss_mb: float = 0.0

    def requests_per_sweep(self) -> int:
        return round(self.requests / max(1, self.rounds))

    def cpu_per_1000(self) -> float:
        """Steady (the intervals from the second sweep's end) when measured, else the first
        sweep's."""
        return self.steady_cpu_per_1000() if self.steady_cpu_s else self.first_cpu_per_1000()

    def first_cpu_per_1000(self) -> float:
        return 1000 * self.first_cpu_s / max(1, self.addresses)

    def steady_cpu_per_1000(self) -> float:
        return 1000 * self.steady_cpu_s / max(1, self.addresses)

    def core_share(self) -> float:
        """The daemon's average share of one core over one interval, steady state."""
        return self.steady_cpu_s / self.every


def write_settings(
    folder: Path, url: str, addresses: list[str], rpc: dict[str, Any], every: float, http_port: int
) -> Path:
    (folder / "deposits.txt").write_text("\n".join(addresses) + "\n")
    (folder / "rules.yaml").write_text(
        f"rules:\n  - name: deposits\n    kind: new_transactions\n    every: {every:g}s\n"
        "    addresses_file: deposits.txt\n    notify: [ops]\n"
    )
    settings = folder / "watcher.yaml"
    settings.write_text(
        json.dumps(
            {
                "rpc_url": url,
                "rules": ["rules.yaml"],
                "state_path": "state/watcher.db",
                "channels": {"ops": ["json://127.0.0.1:9/"]},
                "log_format": "json",
                "rpc": rpc,
                "http": {"listen": f"127.0.0.1:{http_port}"},
            }
        )
    )
    return settings


def _rounds(log: Path) -> tuple[float | None, list[dict[str, Any]]]:
    started, rounds = None, []
    for line in log.read_text().splitlines():
        if '"watcher started"' in line and started is None:
            started = 0.0
        if '"event": "round"' in line or '"event":"round"' in line:
            rounds.append(json.loads(line))
    return started, rounds


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            match = re.match(rf"{re.escape(name)}(\{{[^}}]*\}})? (\S+)", line)
            if match:
                total += float(match.group(2))
    return total


def _spawn(settings: Path, log_name: str) -> tuple[subprocess.Popen[bytes], Path, float]:
    log = settings.parent / log_name
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "watcher", "run", "--config", str(settings)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return proc, log, time.monotonic()


def measure_daemon(
    folder: Path,
    sim: Simulator,
    addresses: list[str],
    rpc: dict[str, Any],
    every: float,
    rounds_wanted: int = 3,
) -> DaemonFigures:
    figures = DaemonFigures(len(addresses), every)
    port = free_port()
    settings = write_settings(folder, sim.url, addresses, rpc, every, port)
    proc, log, spawned = _spawn(settings, "daemon.log")
    ready_cpu = first_cpu = steady_from = 0.0
    try:
        deadline = time.monotonic() + 600
        rounds: list[dict[str, Any]] = []
        while time.monotonic() < deadline and len(rounds) < rounds_wanted:
            time.sleep(0.02)
            started, rounds = _rounds(log)
            if started is not None and not figures.ready_s:
                figures.ready_s, ready_cpu = time.monotonic() - spawned, cpu_seconds(proc.pid)
            if len(rounds) >= 1 and not first_cpu:
                first_cpu = cpu_seconds(proc.pid)
            if len(rounds) >= 2 and not steady_from:
                steady_from = cpu_seconds(proc.pid)
        end_cpu, intervals = cpu_seconds(proc.pid), len(rounds) - 2
        figures.rss_mb = peak_rss_mb(proc.pid)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        proc.terminate()
        proc.wait(30)
    figures.rounds = min(len(rounds), rounds_wanted)
    if rounds:
        figures.first_sweep_s, figures.calls = float(rounds[0]["duration"]), int(rounds[0]["calls"])
        figures.first_cpu_s = first_cpu - ready_cpu
    if len(rounds) >= 3:
        figures.steady_sweep_s = float(rounds[2]["duration"])
        figures.steady_cpu_s = (end_cpu - steady_from) / intervals
    figures.requests = int(_metric(metrics, "watcher_rpc_latency_seconds_count"))
    figures.too_many = int(
        _metric(metrics, "watcher_rpc_rate_limited_total")
        or _metric(metrics, "watcher_rpc_rate_limited")
    )
    figures.restart_ready_s = restart_time(settings)
    figures.check_s, figures.check_rss_mb = check_time(settings)
    return figures


def restart_time(settings: Path) -> float:
    """Spawn -> "watcher started" with the state database the first run left."""
    proc, log, spawned = _spawn(settings, "restart.log")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if '"watcher started"' in log.read_text():
                return time.monotonic() - spawned
            time.sleep(0.01)
        return float("nan")
    finally:
        proc.terminate()
        proc.wait(30)


_CHECK = """
import resource, sys, time
sys.argv = ["watcher", "check", "--config", sys.argv[1]]
from watcher.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
print("RSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def check_time(settings: Path) -> tuple[float, float]:
    """`watcher check` of the settings and the address list: seconds and peak RSS (MB)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _CHECK, str(settings)],
        capture_output=True,
        text=True,
        cwd=settings.parent,
    )
    seconds = time.monotonic() - started
    rss = re.search(r"RSS (\d+)", done.stderr)
    return seconds, int(rss.group(1)) / 1024 if rss else 0.0
