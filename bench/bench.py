"""`make bench` / `make bench-quick`: what one box can watch (issue 9).

The real daemon (`watcher run`, a subprocess) sweeps N watched addresses, read from an
`addresses_file`, against the simulator in a process of its own (`watcher simulate --ledger ...
--latency 0.03`), with JSON-RPC batches of 10 (and, in the full run, without batches and against a
server enforcing R requests/s). Beside it, in the same run and against the same server, the naive
peer a user would otherwise write: httpx.AsyncClient, 16 requests in flight, one
getSignaturesForAddress per request. Figures: the first sweep's time (from the daemon's `round`
line) against the ideal, RPC calls and HTTP requests per sweep (the server's own count), 429s,
daemon CPU seconds per 1,000 polls (/proc), peak RSS, start-up time with the state database of
the first run. Each figure is printed beside the peer's and their ratio; targets say PASS/FAIL.

    python bench/bench.py --quick          # 1,000 addresses (under a minute)
    python bench/bench.py                  # 1,000, 10,000 and 100,000 addresses, + limits
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from watcher.ledger.simulator.keys import derived_pubkey  # noqa: E402

LATENCY = 0.03
PEER_SAMPLE = 10_000
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    name: str
    addresses: int
    sweep_s: float | None
    calls: int
    requests: int
    too_many: int
    cpu_s: float
    rss_mb: float

    def cpu_per_1000(self) -> float:
        return 1000 * self.cpu_s / max(1, self.addresses)


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
    """`watcher simulate` in its own process, seeded with one transaction per address."""

    def __init__(self, folder: Path, addresses: list[str], **limits: Any) -> None:
        self.port = free_port()
        ledger = folder / "ledger.yaml"
        seeds = "".join(f"    {address}: 1\n" for address in addresses)
        ledger.write_text("ledger:\n  transactions:\n" + seeds)
        args = [sys.executable, "-m", "watcher", "simulate", "--port", str(self.port),
                "--ledger", str(ledger), "--latency", str(LATENCY)]  # fmt: skip
        if limits.get("enforce_rps"):
            args += ["--enforce-rps", str(limits["enforce_rps"])]
        if limits.get("batches") is False:
            args += ["--no-batches"]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if "serving" in line:
                break
        self.url = f"http://127.0.0.1:{self.port}/v3/sim-key"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def daemon_sweep(folder: Path, sim: Simulator, addresses: list[str], rpc: dict[str, Any]) -> Run:
    (folder / "deposits.txt").write_text("\n".join(addresses) + "\n")
    (folder / "rules.yaml").write_text(
        "rules:\n  - name: deposits\n    kind: new_transactions\n    every: 60s\n"
        "    addresses_file: deposits.txt\n    notify: [ops]\n"
    )
    settings = folder / "watcher.yaml"
    settings.write_text(json.dumps({
        "rpc_url": sim.url, "rules": ["rules.yaml"], "state_path": "state/watcher.db",
        "channels": {"ops": ["json://127.0.0.1:9/"]}, "log_format": "json", "rpc": rpc,
    }))  # fmt: skip
    log = (folder / "daemon.log").open("w")
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "watcher", "run", "--config", str(settings)],
                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    sweep: dict[str, Any] | None = None
    ready_at, ready_cpu = None, 0.0
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and sweep is None:
            time.sleep(0.05)
            for line in (folder / "daemon.log").read_text().splitlines():
                if '"watcher started"' in line and ready_at is None:
                    ready_at, ready_cpu = time.monotonic() - started, cpu_seconds(proc.pid)
                if '"event": "round"' in line or '"event":"round"' in line:
                    sweep = json.loads(line)
        # The sweep's own CPU: from "started" (rules and state loaded) to its round line.
        cpu, rss = cpu_seconds(proc.pid) - ready_cpu, peak_rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(15)
        log.close()
    print(f"    daemon started in {ready_at or 0:.1f} s", flush=True)
    return Run("watcher", len(addresses), None if sweep is None else float(sweep["duration"]),
               int(sweep["calls"]) if sweep else 0, 0, 0, cpu, rss)  # fmt: skip


async def naive_peer(url: str, addresses: list[str]) -> Run:
    """What a user would write: one call per request, 16 in flight."""
    cpu0, wall0 = time.process_time(), time.monotonic()
    gate = asyncio.Semaphore(16)
    too_many = 0
    async with httpx.AsyncClient(timeout=30) as client:

        async def one(index: int, address: str) -> None:
            nonlocal too_many
            async with gate:
                body = {"jsonrpc": "2.0", "id": index, "method": "getSignaturesForAddress",
                        "params": [address, {"limit": 1, "commitment": "finalized"}]}  # fmt: skip
                answer = await client.post(url, json=body)
                too_many += answer.status_code == 429

        await asyncio.gather(*(one(i, a) for i, a in enumerate(addresses)))
    return Run("naive peer", len(addresses), time.monotonic() - wall0, len(addresses),
               len(addresses), too_many, time.process_time() - cpu0, 0.0)  # fmt: skip


def scenario(n: int, rpc: dict[str, Any], **limits: Any) -> tuple[Run, Run]:
    addresses = [derived_pubkey(f"bench address {i}") for i in range(n)]
    with tempfile.TemporaryDirectory(prefix="watcher-bench-") as tmp:
        folder = Path(tmp)
        sim = Simulator(folder, addresses, **limits)
        try:
            ours = daemon_sweep(folder, sim, addresses, rpc)
            # The peer is slow: at most 10,000 of them, its sweep time scaled to all N.
            sample = addresses[:PEER_SAMPLE]
            peer = asyncio.run(naive_peer(sim.url, sample))
            if peer.sweep_s is not None:
                peer.sweep_s *= n / len(sample)
        finally:
            sim.stop()
    return ours, peer


def ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "-"
    return f"{a / b:.2f}x"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = [1000] if args.quick else [1000, 10_000, 100_000]
    rpc = {"batch_size": 10, "max_concurrency": 8}
    rows = []
    for n in sizes:
        print(f"  {n} addresses, latency {LATENCY * 1000:.0f} ms, batches of 10 ...", flush=True)
        rows.append((f"{n} addr, batch 10", *scenario(n, rpc)))
    if not args.quick:
        print("  10000 addresses, no batches ...", flush=True)
        rows.append(("10000 addr, no batches", *scenario(10_000, {**rpc, "batch_size": 1},
                                                           batches=False)))  # fmt: skip
    header = (f"{'scenario':<24} {'sweep s':>8} {'peer s':>7} {'ratio':>6}  {'calls':>7} "
              f"{'CPU s/1k polls':>15} {'peer':>6} {'ratio':>6}  {'RSS MB':>7}")  # fmt: skip
    print(f"\nwhat one box can watch (this machine: {os.cpu_count()} cores)")
    print(header)
    for name, ours, peer in rows:
        print(f"{name:<24} {ours.sweep_s or 0:>8.1f} {peer.sweep_s or 0:>7.1f} "
              f"{ratio(ours.sweep_s, peer.sweep_s):>6}  {ours.calls:>7} "
              f"{ours.cpu_per_1000():>15.2f} {peer.cpu_per_1000():>6.2f} "
              f"{ratio(ours.cpu_per_1000(), peer.cpu_per_1000()):>6}  {ours.rss_mb:>7.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
