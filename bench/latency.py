"""Detection latency: a transaction made visible in the simulator -> the notification naming its
signature accepted by a local receiver.

The daemon sweeps N addresses back to back (``every: 1s``: the next sweep starts as soon as the
last one ends), `group_wait: 0s`, a real json:// receiver as the channel. After the first sweep,
``count`` transactions land on random addresses at random moments over about two sweeps (the
simulator's control endpoint); each one's signature is read back with one getSignaturesForAddress
and the receiver's bodies are watched for it.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from daemon_run import Simulator, free_port

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from watcher.ruletest.control import send_action  # noqa: E402
from watcher.testing.receivers import JsonReceiver  # noqa: E402


@dataclass
class Latency:
    addresses: int
    sweep_s: float
    samples: list[float]
    missed: int

    def percentile(self, share: float) -> float:
        if not self.samples:
            return float("nan")
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure_latency(folder: Path, addresses: list[str], latency: float, count: int) -> Latency:
    sim = Simulator(folder, addresses, latency)
    rng = random.Random(9)
    try:
        with JsonReceiver() as receiver:
            (folder / "deposits.txt").write_text("\n".join(addresses) + "\n")
            (folder / "rules.yaml").write_text(
                "rules:\n  - name: deposits\n    kind: new_transactions\n    every: 1s\n"
                "    group_wait: 0s\n    addresses_file: deposits.txt\n    notify: [ops]\n"
            )
            settings = folder / "watcher.yaml"
            settings.write_text(
                json.dumps(
                    {
                        "rpc_url": sim.url,
                        "rules": ["rules.yaml"],
                        "state_path": "state/watcher.db",
                        "channels": {"ops": [receiver.url]},
                        "log_format": "json",
                        "rpc": {"batch_size": 10, "max_concurrency": 8},
                        "http": {"listen": f"127.0.0.1:{free_port()}"},
                    }
                )
            )
            log = folder / "latency.log"
            with log.open("w") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "watcher", "run", "--config", str(settings)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            try:
                sweeps = _wait_rounds(log, 1, 600)
                sweep_s = float(sweeps[0]["duration"])
                made: dict[str, float] = {}
                seen_at: list[tuple[float, str]] = []
                watcher = threading.Thread(target=_watch, args=(receiver, seen_at), daemon=True)
                watcher.start()
                spread = 2 * max(sweep_s, 1.0)
                moments = sorted(rng.uniform(0, spread) for _ in range(count))
                begin = time.monotonic()
                for moment in moments:
                    time.sleep(max(0.0, begin + moment - time.monotonic()))
                    address = rng.choice(addresses)
                    send_action(sim.port, {"add_transactions": {"address": address}})
                    at = time.monotonic()
                    made[_newest(sim.url, address)] = at
                deadline = time.monotonic() + 4 * sweep_s + 30
                found: dict[str, float] = {}
                while time.monotonic() < deadline and len(found) < len(made):
                    time.sleep(0.05)
                    found = {
                        sig: seen for sig in made if (seen := _first_seen(seen_at, sig)) is not None
                    }
                sweeps = _wait_rounds(log, 1, 1)
                steady = [float(r["duration"]) for r in sweeps[1:]] or [sweep_s]
            finally:
                proc.terminate()
                proc.wait(30)
        samples = [found[sig] - made[sig] for sig in made if sig in found]
        return Latency(len(addresses), statistics.median(steady), samples, len(made) - len(samples))
    finally:
        sim.stop()


def _newest(url: str, address: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "getSignaturesForAddress",
        "params": [address, {"limit": 1}],
    }
    return str(httpx.post(url, json=body, timeout=10).json()["result"][0]["signature"])


def _watch(receiver: JsonReceiver, seen_at: list[tuple[float, str]]) -> None:
    """Notes when each body was first seen (a body may arrive before its signature is known)."""
    while True:
        bodies = receiver.received
        now = time.monotonic()
        seen_at.extend((now, json.dumps(body)) for body in bodies[len(seen_at) :])
        time.sleep(0.01)


def _first_seen(seen_at: list[tuple[float, str]], signature: str) -> float | None:
    return next((at for at, text in list(seen_at) if signature[:8] in text), None)


def _wait_rounds(log: Path, count: int, timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    rounds: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        rounds = [
            json.loads(line)
            for line in log.read_text().splitlines()
            if '"event": "round"' in line or '"event":"round"' in line
        ]
        if len(rounds) >= count:
            break
        time.sleep(0.02)
    return rounds
