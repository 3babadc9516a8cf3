"""What the daemon holds in memory per watched address (``make memory``; bench/README.md).

    python bench/memory.py                        # 10,000 and 100,000 addresses
    python bench/memory.py --sizes 1000000
    python bench/memory.py --trace                # and tracemalloc's top allocation sites
    python bench/memory.py --sizes 1000000 --max-rps 250 --latency 0.03

Each size runs in a fresh process: the real daemon (``watcher.app.Daemon``) built in-process
from a rules file listing N addresses (``addresses_file`` lists, one ``new_transactions`` rule
each, ``every: 10m``) on a SQLite state file, started as ``watcher run`` starts it (the store
opened, the lease round, the watches' start recorded) and each job swept once against the
simulator (``watcher simulate``, a quiet ledger, in a process of its own: its memory is not
counted). Printed per stage: the process's RSS, and what each stage added per address; the
peak RSS (VmHWM), of the measured process alone (the addresses are made and the rules written
by the parent); then two sweeps of quiet polls, the first quiet sweep and a steady one (a
sweep after a quiet one, as every sweep after the daemon's second): their time and CPU per
1,000 polls. At a million, the lean batching poller (``bench/bench.py``) then sweeps the same
million addresses against the same server (a first sweep, then one measured: about as long as
the daemon's run again), and the daemon's CPU per poll is weighed against its on the same polls
(goal: at most twice), with PASS or FAIL, as are the peak RSS and both sweeps' times. Its cost
over 10,000 of them is printed beside it: a poller's cost per poll grows with the list it holds
(at 30 ms, 27 ms per 1,000 polls over 10,000, 32 over the million, in one run). With
``--trace`` a second fresh process does the same under tracemalloc (one sweep) and prints the
allocation sites holding the most after the sweep, in bytes per address (tracemalloc slows the
run about twofold and its own bookkeeping inflates RSS, so RSS is read without it).

``--latency`` adds that many seconds to each answer (``make bench``'s ledger is 0.03 s away; the
default, 0, leaves the CPU alone to set the pace). ``--max-every 1h`` makes each rule adaptive
(``max_every``: the cadence book holds an entry per target). ``--max-rps R`` sets
``rpc.max_rps: R`` and has the simulator answer 429 beyond R requests a second: printed then,
each sweep's requests and their rate, and the 429s the daemon met (goal: none, the sweeps
within the interval).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from contextlib import nullcontext
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import yaml  # noqa: E402
from daemon_run import peak_rss_mb  # noqa: E402
from scale import Simulator, write_rules  # noqa: E402

from bench import LEAN_GOAL, LEAN_RUNS, lean_poller  # noqa: E402
from watcher.app import Daemon, settle_collector  # noqa: E402
from watcher.checks import load_config  # noqa: E402
from watcher.core.allocator import settle_allocator  # noqa: E402
from watcher.kinds.ruleset import RuleSet  # noqa: E402
from watcher.simulator.keys import derived_pubkey  # noqa: E402

EVERY = "10m"
EVERY_SECONDS = 600.0
MILLION = 1_000_000
PEAK_BAR_MB = 400.0
LEAN_SAMPLE = 10_000  # the lean poller's cost over a short list, printed beside
TOP_SITES = 15
# Each stage's name, RSS MB, and under tracemalloc the MB traced then and at the stage's peak.
Stages = list[tuple[str, tuple[float, float, float]]]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def settled() -> tuple[float, float, float]:
    """RSS now, and under tracemalloc the MB traced now and at the peak since the last stage."""
    gc.collect()
    current, peak = tracemalloc.get_traced_memory() if tracemalloc.is_tracing() else (0, 0)
    if tracemalloc.is_tracing():
        tracemalloc.reset_peak()
    return rss_mb(), current / 2**20, peak / 2**20


def write_settings(folder: Path, url: str, max_rps: float | None = None) -> Path:
    rpc: dict[str, Any] = {"batch_size": 10, "max_concurrency": 8}
    if max_rps is not None:
        rpc["max_rps"] = max_rps
    settings = {
        "rpc_url": url,
        "rules": ["rules/rules.yaml"],
        "state_path": "state/watcher.db",
        "channels": {"hooks": ["json://127.0.0.1:9/"]},  # nothing is sent: no history
        "rpc": rpc,
        "log_level": "warning",
    }
    path = folder / "watcher.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


async def start_and_sweep(daemon: Daemon, stages: Stages, requests: list[int]) -> None:
    """What ``Runtime.run`` does before its scheduler runs, then one sweep of each job."""
    await daemon.store.start()
    await daemon.leases.round()
    jobs = daemon.ruleset.jobs()
    await daemon.watch_starts.began(jobs)
    stages.append(("started", settled()))
    for job in jobs:
        await daemon.sweep(job)
    requests.append(sent(daemon))
    stages.append(("swept once", settled()))


def sent(daemon: Daemon) -> int:
    """HTTP requests the daemon's client has sent so far."""
    return 0 if daemon.client is None else daemon.client.stats.requests


async def steady_sweep(daemon: Daemon) -> tuple[float, float]:
    """A sweep of each job (every poll quiet, as most are): its wall time and the process's
    CPU seconds."""
    cpu, wall = process_cpu(), time.perf_counter()
    for job in daemon.ruleset.jobs():
        await daemon.sweep(job)
    return time.perf_counter() - wall, process_cpu() - cpu


async def run(
    daemon: Daemon, stages: Stages, steady: list[float] | None, requests: list[int]
) -> None:
    try:
        await start_and_sweep(daemon, stages, requests)
        if steady is not None:
            # The first quiet sweep, then the steady state: a sweep after a quiet one (as
            # every sweep after the daemon's second; ``Fanout.quiet_width``).
            steady.extend(await steady_sweep(daemon))
            requests.append(sent(daemon) - requests[0])
            steady[:0] = await steady_sweep(daemon)
    finally:
        await daemon.close()


def process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(size: int, folder: Path, trace: bool) -> dict[str, Any]:
    """One size in this process, its rules and settings in ``folder`` (written by the parent:
    the N addresses made to write them would be this process's peak): RSS by stage, and with
    ``trace`` the top allocation sites."""
    config = folder / "watcher.yaml"
    if trace:
        tracemalloc.start()
    stages: Stages = [("imported", settled())]
    settle_allocator()  # as ``watcher run``, before its rules are read
    settings, rules = load_config(config)
    ruleset = RuleSet(rules)
    del rules
    stages.append(("rules read", settled()))
    daemon = Daemon(settings, ruleset)
    del settings, ruleset
    settle_collector()  # as ``watcher run``
    stages.append(("daemon built", settled()))
    started = time.perf_counter()

    steady: list[float] | None = None if trace else []  # tracemalloc's figures: one sweep
    requests: list[int] = []  # the first sweep's, then the steady one's
    asyncio.run(run(daemon, stages, steady, requests))
    too_many = 0 if daemon.client is None else daemon.client.stats.errors["RateLimited"]
    sweep_s = time.perf_counter() - started - (steady[0] + steady[2] if steady else 0.0)
    sites: list[tuple[str, int, int]] = []
    if trace:
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        for stat in snapshot.statistics("lineno")[:TOP_SITES]:
            frame = stat.traceback[0]
            where = f"{Path(frame.filename).name}:{frame.lineno}"
            with contextlib.suppress(ValueError):  # outside the repository: its name
                where = f"{Path(frame.filename).relative_to(BENCH.parent)}:{frame.lineno}"
            sites.append((where, stat.size, stat.count))
    return {
        "size": size,
        "stages": stages,
        "peak_mb": peak_rss_mb(os.getpid()),
        "sweep_s": sweep_s,
        "steady_s": steady[0] if steady else None,
        "steady_cpu_per_1000": 1000 * steady[1] / size if steady else None,
        "first_quiet_s": steady[2] if steady else None,
        "first_quiet_cpu_per_1000": 1000 * steady[3] / size if steady else None,
        "sites": sites,
        "requests": requests,
        "too_many": too_many,
    }


def child(
    size: int,
    url: str,
    trace: bool,
    max_rps: float | None = None,
    max_every: str | None = None,
) -> dict[str, Any]:
    """``measure`` in a fresh process (nothing of another size in its heap, nor the addresses
    made to write its rules)."""
    with tempfile.TemporaryDirectory(prefix="watcher-memory-") as tmp:
        folder = Path(tmp)
        (folder / "rules").mkdir()
        addresses = [derived_pubkey(f"memory {n}") for n in range(size)]
        adaptive = None if max_every is None else {"max_every": max_every}
        write_rules(folder / "rules", addresses, EVERY, adaptive)
        del addresses
        write_settings(folder, url, max_rps)
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(size), "--folder", str(folder)]
            + (["--trace"] if trace else []),
            check=True,
            capture_output=True,
            text=True,
        )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def report(result: dict[str, Any], max_rps: float | None = None) -> None:
    size = result["size"]
    if result["sites"]:
        print(f"  tracemalloc ({size:,}): traced now / peak during the stage, bytes per address")
        for name, (_, now, peak) in result["stages"][1:]:
            print(f"    {name:<15} {now * 2**20 / size:8.0f} {peak * 2**20 / size:8.0f}")
        print("  after the sweep, the top sites (bytes per address, blocks)")
        for where, size_b, count in result["sites"]:
            print(f"    {size_b / size:8.1f} B/addr {count:>10,} blocks  {where}")
        return
    stages = result["stages"]
    base = stages[0][1][0]
    print(f"\n{size:,} addresses (sweep {result['sweep_s']:.1f} s)")
    print("  stage            RSS MB   added MB   bytes/address (since imported)")
    previous = base
    for name, (rss, _, _) in stages:
        added = rss - previous
        per = (rss - base) * 1024 * 1024 / size
        print(f"  {name:<15} {rss:8.1f} {added:+10.1f} {per:12.0f}")
        previous = rss
    print(f"  peak RSS (VmHWM) {result['peak_mb']:.1f} MB")
    if result["steady_s"] is not None:
        print(
            f"  the first quiet sweep: {result['first_quiet_s']:.1f} s, "
            f"{1000 * result['first_quiet_cpu_per_1000']:.0f} ms of CPU per 1,000 polls"
        )
        print(
            f"  a steady sweep (after a quiet one): {result['steady_s']:.1f} s, "
            f"{1000 * result['steady_cpu_per_1000']:.0f} ms of CPU per 1,000 polls"
        )
    if max_rps is not None:
        report_paced(result, max_rps)
    if size >= MILLION:
        # Issue figures for one instance at a million: under 400 MB, its first sweep (the
        # start and every first poll) and a steady one inside the interval.
        rss_ok = result["peak_mb"] < PEAK_BAR_MB
        sweep_ok = result["sweep_s"] < EVERY_SECONDS and result["steady_s"] < EVERY_SECONDS
        print(f"  peak under {PEAK_BAR_MB} MB: {'PASS' if rss_ok else 'FAIL'}")
        print(f"  sweeps within every: {EVERY}: {'PASS' if sweep_ok else 'FAIL'}")


def report_paced(result: dict[str, Any], max_rps: float) -> None:
    """Each sweep's requests and their rate under ``max_rps``, and the 429s met (goal: none)."""
    timed = [("first sweep", result["sweep_s"]), ("first quiet sweep", result["first_quiet_s"])]
    for (name, seconds), requests in zip(timed, result["requests"], strict=False):
        print(
            f"  {name}: {requests:,} requests in {seconds:.1f} s, "
            f"{requests / seconds:.0f} a second (max_rps {max_rps:g})"
        )
    too_many = result["too_many"]
    print(f"  429s met under max_rps: {too_many}: {'PASS' if too_many == 0 else 'FAIL'}")


def lean_beside(result: dict[str, Any], url: str) -> bool:
    """The lean batching poller (bench/bench.py) over the same addresses, against the same
    server right after the daemon's run (one measured sweep after its first), and over
    ``LEAN_SAMPLE`` of them (its cheapest of ``LEAN_RUNS`` runs, for reference): whether the
    daemon's steady sweep cost at most ``LEAN_GOAL`` times its CPU per poll on the same polls."""
    size = result["size"]
    sample = [derived_pubkey(f"memory {n}") for n in range(LEAN_SAMPLE)]
    runs = [asyncio.run(lean_poller(url, sample)) for _ in range(LEAN_RUNS)]
    short = min(peer.cpu_per_1000() for peer in runs)  # as bench/bench.py: its cheapest
    addresses = sample + [derived_pubkey(f"memory {n}") for n in range(LEAN_SAMPLE, size)]
    lean = asyncio.run(lean_poller(url, addresses, sweeps=1)).cpu_per_1000()
    ours = result["steady_cpu_per_1000"]
    ok = bool(ours <= LEAN_GOAL * lean)
    print(
        f"  the lean poller over {LEAN_SAMPLE:,} of the addresses: "
        f"{1000 * short:.0f} ms per 1,000 polls; over all {size:,}: {1000 * lean:.0f}"
    )
    print(
        f"  beside the lean poller (the same {size:,} addresses, same server): "
        f"{1000 * ours:.0f} against {1000 * lean:.0f} ms per 1,000 polls, "
        f"{ours / lean:.2f}x (goal {LEAN_GOAL:g}x): {'PASS' if ok else 'FAIL'}"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated sizes")
    parser.add_argument("--trace", action="store_true", help="also tracemalloc's top sites")
    parser.add_argument("--latency", type=float, default=0.0, help="added to each answer (s)")
    parser.add_argument(
        "--max-rps", type=float, help="rpc.max_rps, the simulator answering 429 beyond it"
    )
    parser.add_argument("--max-every", help="each rule adaptive, up to this interval (e.g. 1h)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one, args.folder, args.trace)))
        return 0
    with Simulator(latency=args.latency, enforce_rps=args.max_rps) as simulator:
        paced = "" if args.max_rps is None else f", max_rps {args.max_rps:g}"
        paced += "" if args.max_every is None else f", max_every {args.max_every}"
        print(
            f"memory per watched address (every {EVERY}, SQLite, one sweep, "
            f"{1000 * args.latency:g} ms latency{paced})"
        )
        failed = False
        for size in (int(s) for s in args.sizes.split(",")):
            result = child(size, simulator.url, False, args.max_rps, args.max_every)
            report(result, args.max_rps)
            failed |= args.max_rps is not None and result["too_many"] > 0
            if size >= MILLION:
                # The lean poller is not paced: under max_rps, a server of its own without it.
                beside = Simulator(args.latency) if args.max_rps else nullcontext(simulator)
                with beside as lean:
                    failed |= not lean_beside(result, lean.url)
            if args.trace:
                report(child(size, simulator.url, True, args.max_rps, args.max_every))
    return int(failed)


if __name__ == "__main__":
    raise SystemExit(main())
