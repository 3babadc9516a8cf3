"""Instructions per quiet poll, the daemon's against the lean batching poller's, as valgrind's
callgrind counts them: a figure that repeats to within about 1% on a shared machine whose CPU
time per poll moves by a third from run to run (bench/README.md).

    python bench/instructions.py                    # 2,000 addresses, 4 steady sweeps
    python bench/instructions.py --addresses 10000 --sweeps 2

Each side runs in a process of its own under ``valgrind --tool=callgrind``, against the
simulator (``watcher simulate``, a quiet ledger, no added latency) in another, and counts only
its steady sweeps (every poll quiet): the process switches the count on and off around them
with ``callgrind_control``. The daemon is ``watcher.app.Daemon`` built in-process from
``addresses_file`` rules (``bench/memory.py``'s), started, swept twice (the first polls, then
their first quiet sweep), its collector set as ``watcher run`` sets it, then swept
``--sweeps`` times; the lean poller is ``bench/bench.py``'s over the same addresses.

User-space instructions only: the kernel's part of each request (its send and receive) is
not counted, so this ratio reads higher than the CPU-time ratio of ``make bench``; the two
move together. Needs valgrind (Debian's ``valgrind``); about a minute at the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from memory import start_and_sweep, write_settings  # noqa: E402
from scale import Simulator, write_rules  # noqa: E402

from bench import lean_poller  # noqa: E402
from watcher.app import Daemon, settle_collector  # noqa: E402
from watcher.checks import load_config  # noqa: E402
from watcher.kinds.ruleset import RuleSet  # noqa: E402
from watcher.simulator.keys import derived_pubkey  # noqa: E402

COLLECTED = re.compile(r"Collected : (\d+)")


def counting(on: bool) -> None:
    """Switches callgrind's count for this process on or off (a no-op outside valgrind: the
    command finds no process to tell)."""
    subprocess.run(
        ["callgrind_control", "--instr=" + ("on" if on else "off"), str(os.getpid())],
        check=False,
        capture_output=True,
    )


async def daemon_side(folder: Path, sweeps: int) -> None:
    settings, rules = load_config(folder / "watcher.yaml")
    daemon = Daemon(settings, RuleSet(rules))
    try:
        await start_and_sweep(daemon, [], [])
        jobs = daemon.ruleset.jobs()
        for job in jobs:  # the first quiet sweep: its states read once from the database
            await daemon.sweep(job)
        settle_collector()
        counting(True)
        for _ in range(sweeps):
            for job in jobs:
                await daemon.sweep(job)
        counting(False)
    finally:
        await daemon.close()


def lean_side(url: str, addresses: list[str], sweeps: int) -> None:
    """The lean poller, counted over its measured sweeps: it reads the process time just
    before them and just after."""
    reads = 0
    real: Callable[[], float] = time.process_time

    def process_time() -> float:
        nonlocal reads
        reads += 1
        if reads <= 2:
            counting(reads == 1)
        return real()

    time.process_time = process_time
    try:
        asyncio.run(lean_poller(url, addresses, sweeps=sweeps))
    finally:
        time.process_time = real


def counted(side: str, folder: Path, url: str, sweeps: int) -> int:
    """Instructions ``side`` ran in its steady sweeps, in a process under callgrind."""
    out = folder / f"callgrind.{side}"
    run = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--side",
            side,
            "--folder",
            str(folder),
            "--url",
            url,
            "--sweeps",
            str(sweeps),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = COLLECTED.search(run.stderr)
    if found is None:
        raise SystemExit(f"callgrind counted nothing for the {side}:\n{run.stderr[-2000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--addresses", type=int, default=2000)
    parser.add_argument("--sweeps", type=int, default=4)
    parser.add_argument("--side", choices=("daemon", "lean"))
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.side == "daemon":
        asyncio.run(daemon_side(args.folder, args.sweeps))
        return 0
    if args.side == "lean":
        addresses = (args.folder / "addresses.txt").read_text().split()
        lean_side(args.url, addresses, args.sweeps)
        return 0
    if shutil.which("valgrind") is None:
        print("bench/instructions.py needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    addresses = [derived_pubkey(f"instructions {n}") for n in range(args.addresses)]
    sim = Simulator(latency=0.0)
    try:
        with tempfile.TemporaryDirectory(prefix="watcher-instructions-") as tmp:
            folder = Path(tmp)
            (folder / "rules").mkdir()
            write_rules(folder / "rules", addresses, "10m")
            write_settings(folder, sim.url)
            (folder / "addresses.txt").write_text("\n".join(addresses))
            polls = args.addresses * args.sweeps
            ours = counted("daemon", folder, sim.url, args.sweeps) / polls
            lean = counted("lean", folder, sim.url, args.sweeps) / polls
    finally:
        sim.stop()
    print(
        f"instructions per quiet poll, {args.addresses:,} addresses, {args.sweeps} sweeps: "
        f"daemon {ours:,.0f}, lean poller {lean:,.0f}: {ours / lean:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
