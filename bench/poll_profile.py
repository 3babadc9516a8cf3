"""Where a steady sweep's time goes: py-spy on the bench's daemon, its samples split by area.

    python bench/poll_profile.py                       # 10,000 addresses every 15 s, 60 s
    python bench/poll_profile.py --addresses 100000 --every 60 --seconds 120

The real daemon (``watcher run``, bench/bench.py's settings: an ``addresses_file``, batches of 10,
``max_concurrency: 8``) against the simulator in a process of its own, 30 ms away. After its
third sweep (the first polls every address, the second finds them quiet and keeps their rests,
the third on are steady), ``py-spy record --gil --native`` samples it at 200 Hz for
``--seconds``; each sample is charged to the first frame from the leaf up that belongs to an
area (the event loop's own frames only when no other area's frame is on the stack). Prints the
daemon's CPU over the window and one line per area with its largest functions (bench/README.md,
"Where the time goes now"). Needs py-spy (``pip install py-spy``) and the right to attach to a
child process (root, or ``ptrace_scope`` 0).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemon_run import Simulator, _rounds, _spawn, cpu_seconds, free_port, write_settings

from bench import LATENCY, RPC, addresses_for

# Areas by the frame's file (or native library), in the order they are tried for each frame.
AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("aiohttp", ("aiohttp/", "yarl/", "multidict/", "aiohappyeyeballs", "propcache")),
    ("batcher", ("watcher/ledger/batching.py",)),
    ("the client's layers", ("watcher/ledger/",)),
    ("decoding and validation", ("watcher/core/fastjson", "pydantic", "orjson")),
    ("rests", ("watcher/service/rests.py",)),
    ("the sweep and its batches", ("watcher/service/",)),
    ("the kind's first call and verdict", ("watcher/kinds/", "watcher/alerting/")),
    ("packed addresses", ("watcher/config/packed_keys",)),
    ("the state", ("watcher/state/", "sqlite3", "psycopg")),
    ("metrics", ("prometheus_client",)),
    ("logging", ("structlog", "logging/")),
    ("garbage collector", ("gc_collect", "gcmodule")),
)
LOOP = ("asyncio/", "selectors.py", "_asyncio", "selectmodule")
ROUNDS_BEFORE = 3


def area_of(frames: list[str]) -> tuple[str, str]:
    """The area a sample is charged to and the frame that decided it."""
    for frame in reversed(frames):
        for name, marks in AREAS:
            if any(mark in frame for mark in marks):
                return name, frame
    for frame in reversed(frames):
        if any(mark in frame for mark in LOOP):
            return "event loop and selector", frame
    return "other", frames[-1]


def function_of(frame: str) -> str:
    """``name (file.py)`` of py-spy's ``name (path/file.py:line)``."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.split(':')[0].rsplit('/', 1)[-1].rstrip(')')})"


def split(raw: Path) -> tuple[int, Counter[str], dict[str, Counter[str]]]:
    total, areas, functions = 0, Counter[str](), defaultdict[str, Counter[str]](Counter)
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        samples = int(count)
        area, frame = area_of(stack.split(";"))
        total += samples
        areas[area] += samples
        functions[area][function_of(frame)] += samples
    return total, areas, functions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--addresses", type=int, default=10_000)
    parser.add_argument("--every", type=float, default=15.0, help="the rule's interval (s)")
    parser.add_argument("--seconds", type=int, default=60, help="py-spy's sampling time")
    args = parser.parse_args(argv)
    if shutil.which("py-spy") is None:
        print("bench/poll_profile.py needs py-spy: pip install py-spy", file=sys.stderr)
        return 2
    addresses = addresses_for(args.addresses)
    with tempfile.TemporaryDirectory(prefix="watcher-profile-") as tmp:
        folder = Path(tmp)
        simulator = Simulator(folder, addresses, LATENCY)
        settings = write_settings(folder, simulator.url, addresses, RPC, args.every, free_port())
        daemon, log, _ = _spawn(settings, "daemon.log")
        raw = folder / "samples.txt"
        try:
            while len(_rounds(log)[1]) < ROUNDS_BEFORE:
                if daemon.poll() is not None:
                    print(log.read_text()[-2000:], file=sys.stderr)
                    return 1
                time.sleep(0.2)
            before = _rounds(log)[1]
            cpu = cpu_seconds(daemon.pid)
            spy = [
                *("py-spy", "record", "-p", str(daemon.pid), "-d", str(args.seconds)),
                *("-r", "200", "--gil", "--native", "-f", "raw", "-o", str(raw)),
            ]
            subprocess.run(spy, check=True, capture_output=True)
            cpu = cpu_seconds(daemon.pid) - cpu
            polls = sum(int(r["targets"]) for r in _rounds(log)[1][len(before) :])
        finally:
            daemon.terminate()
            daemon.wait(30)
            simulator.stop()
        total, areas, functions = split(raw)
    print(
        f"{args.addresses:,} addresses every {args.every:g} s, {args.seconds} s sampled: "
        f"{polls:,} polls, {cpu:.2f} s of CPU ({1e6 * cpu / max(1, polls):.0f} ms per 1,000 "
        f"polls with py-spy attached), {total:,} samples holding the GIL"
    )
    for area, samples in areas.most_common():
        top = ", ".join(
            f"{name} {100 * n / total:.1f}%" for name, n in functions[area].most_common(5)
        )
        print(f"  {area:<34} {100 * samples / total:4.0f}%  {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
