"""Figures measured inside one process, on the daemon's own poll path (`TargetPipeline.poll`)
against the simulator as a real HTTP server on loopback (no added latency):

1. A poll that finds 10,000 new transactions on one address: from the poll's start to its alert
   and outbox rows committed (target: under 1 s), and the alert's text names the newest
   signatures, each with its explorer link, then how many more.
2. The recorded mainnet answers (getClusterNodes: 6,455 nodes, 2.6 MB; getVoteAccounts: 1,088
   accounts, 420 KB), parsed and stepped: the event loop thread's CPU per poll (the simulator
   answers from threads of its own), target under 100 ms.

    python bench/inproc.py
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from watcher.app import Daemon  # noqa: E402
from watcher.checks import load_config  # noqa: E402
from watcher.kinds import SOURCES  # noqa: E402
from watcher.kinds.ruleset import RuleSet  # noqa: E402
from watcher.simulator import Ledger, SimulatorServer  # noqa: E402
from watcher.simulator.keys import derived_pubkey  # noqa: E402

KEY = "inpr0cK3y"
ADDRESS = derived_pubkey("inproc busy address")
# From the recorded cluster: an identity on the reference version, and a vote account.
IDENTITY = "PAWsME7oYbjt5TRNc11mBa33JhKnQr9AYherdr9YAZ6"
VOTE = "3ZUQekqiZoybB57y49eqtvSaoonqDwuNbeqEGwN88JkQ"


def daemon_for(folder: Path, url: str, rules: str) -> Daemon:
    (folder / "rules.yaml").write_text(rules)
    (folder / "watcher.yaml").write_text(
        json.dumps(
            {
                "rpc_url": url,
                "rules": ["rules.yaml"],
                "state_path": "state/watcher.db",
                "channels": {"ops": ["json://127.0.0.1:9/"]},
                "log_level": "warning",
            }
        )
    )
    settings, rules_loaded = load_config(folder / "watcher.yaml")
    return Daemon(settings, RuleSet(rules_loaded))


async def busy_address(folder: Path) -> bool:
    ledger = Ledger(seed=4)
    ledger.add_transactions(ADDRESS, 1)
    with SimulatorServer(ledger, api_key=KEY) as server:
        daemon = daemon_for(
            folder,
            server.url,
            (
                "rules:\n  - name: busy\n    kind: new_transactions\n    every: 60s\n"
                f"    addresses: [{ADDRESS}]\n    notify: [ops]\n"
            ),
        )
        source = SOURCES["signatures"]
        try:
            await daemon.pipeline.poll(source, ADDRESS)  # the baseline
            signatures = ledger.add_transactions(ADDRESS, 10_000)
            wall, cpu = time.perf_counter(), time.thread_time()
            await daemon.pipeline.poll(source, ADDRESS)
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        finally:
            await daemon.close()
    with sqlite3.connect(folder / "state" / "watcher.db") as db:
        alerts = db.execute("SELECT title, body FROM alerts").fetchall()
        deliveries = db.execute("SELECT count(*) FROM deliveries").fetchone()[0]
    title, body = alerts[0] if alerts else ("", "")
    links = re.findall(r"https://explorer\.solana\.com/tx/(\w+)", body)
    more = re.search(r"and ([\d,]+) more", body)
    names_newest = links == signatures[: len(links)] and len(links) >= 10
    counted = more is not None and int(more.group(1).replace(",", "")) + len(links) == 10_000
    ok = wall < 1.0 and len(alerts) == 1 and deliveries >= 1 and names_newest and counted
    print(
        f"  10,000 new transactions on one address, one poll -> outbox: {wall:.2f} s "
        f"(CPU {cpu:.2f} s); {len(alerts)} alert, {deliveries} delivery row(s); "
        f'"{title}"; names the newest {len(links)} with explorer links, then '
        f'"and {more.group(1) if more else "?"} more": {"PASS" if ok else "FAIL"}'
    )
    return ok


async def recorded_cluster(folder: Path, polls: int = 10) -> bool:
    ledger = Ledger.from_mainnet(seed=5)
    ok = True
    with SimulatorServer(ledger, api_key=KEY) as server:
        daemon = daemon_for(
            folder,
            server.url,
            (
                "rules:\n  - name: drift\n    kind: version_drift\n    every: 60s\n"
                f"    validators: [{IDENTITY}]\n    notify: [ops]\n"
                "  - name: down\n    kind: delinquent_validators\n    every: 60s\n"
                f"    validators: [{VOTE}]\n    notify: [ops]\n"
            ),
        )
        try:
            for source_name, target, what in (
                ("nodes", IDENTITY, "getClusterNodes, 2.6 MB"),
                ("votes", VOTE, "getVoteAccounts, 420 KB"),
            ):
                source = SOURCES[source_name]
                await daemon.pipeline.poll(source, target)  # the first: a baseline
                walls, cpus = [], []
                for _ in range(polls):
                    wall, cpu = time.perf_counter(), time.thread_time()
                    assert await daemon.pipeline.poll(source, target)
                    walls.append(time.perf_counter() - wall)
                    cpus.append(time.thread_time() - cpu)
                # The simulator answers from threads of this process: the daemon's own work
                # is the event loop's thread CPU (parse + step), the target's measure.
                passed = statistics.median(cpus) < 0.1
                ok = ok and passed
                median = 1000 * statistics.median(walls)
                print(
                    f"  {what}: parsed and stepped in {1000 * statistics.median(cpus):.0f} ms "
                    f"of CPU a poll (max {1000 * max(cpus):.0f}; with the in-process "
                    f"simulator's answer, {median:.0f} ms wall) < 100 ms: "
                    f"{'PASS' if passed else 'FAIL'}"
                )
        finally:
            await daemon.close()
    return ok


def main() -> int:
    print("in-process figures")
    with tempfile.TemporaryDirectory(prefix="watcher-inproc-") as a:
        busy = asyncio.run(busy_address(Path(a)))
    with tempfile.TemporaryDirectory(prefix="watcher-inproc-") as b:
        cluster = asyncio.run(recorded_cluster(Path(b)))
    return 0 if busy and cluster else 1


if __name__ == "__main__":
    raise SystemExit(main())
