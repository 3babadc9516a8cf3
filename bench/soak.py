"""The long randomized runs of the watcher, outside `make test` (see bench/README.md).

    python bench/soak.py kills --kills 30      # kill -9 loop: 0 lost, <= 1 duplicate per kill
    python bench/soak.py fuzz --corpus 300     # garbage answers: 0 false alerts, 0 wedged
    python bench/soak.py soak --minutes 10     # 5 % random faults: 0 lost, 0 false alerts
    python bench/soak.py all --quick           # all three, small (make soak-quick)

Each run prints one plain-text table of figures; the exit code is 1 when any run failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz
import stream
from common import Table


def kills_run(args: argparse.Namespace) -> Table:
    return stream.run(
        kills=args.kills,
        seconds=0,
        fault_share=0.0,
        seed=args.seed,
        title=f"kill -9 loop: {args.kills} kills (seed {args.seed})",
    )


def soak_run(args: argparse.Namespace) -> Table:
    share = args.fault_pct / 100
    return stream.run(
        kills=0,
        seconds=args.minutes * 60,
        fault_share=share,
        seed=args.seed,
        title=f"soak: {args.minutes:g} min, {args.fault_pct:g} % random faults (seed {args.seed})",
    )


def fuzz_run(args: argparse.Namespace) -> Table:
    return fuzz.run(
        corpus_size=args.corpus,
        sweeps=args.sweeps,
        seed=args.seed,
        title=f"fuzz: {args.corpus} garbage answers (seed {args.seed})",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=6)
    runs = parser.add_subparsers(dest="run", required=True)
    kills = runs.add_parser("kills", help="SIGKILL the daemon at random moments, restart it")
    kills.add_argument("--kills", type=int, default=30)
    fuzzing = runs.add_parser("fuzz", help="garbage answers, then real changes")
    fuzzing.add_argument("--corpus", type=int, default=300)
    fuzzing.add_argument(
        "--sweeps",
        type=int,
        default=10,
        help="polls of a target within which a real change must be notified",
    )
    soak = runs.add_parser("soak", help="steady activity with random faults")
    soak.add_argument("--minutes", type=float, default=10.0)
    soak.add_argument("--fault-pct", type=float, default=5.0)
    every = runs.add_parser("all", help="the three runs, one after the other")
    every.add_argument("--quick", action="store_true", help="small numbers: about 2 minutes")
    args = parser.parse_args(argv)

    plan: list[Callable[[argparse.Namespace], Table]]
    if args.run == "all":
        quick = args.quick
        args.kills, args.corpus, args.sweeps = (5, 120, 10) if quick else (30, 300, 10)
        args.minutes, args.fault_pct = (0.5 if quick else 10.0), 5.0
        plan = [kills_run, fuzz_run, soak_run]
    else:
        plan = [{"kills": kills_run, "fuzz": fuzz_run, "soak": soak_run}[args.run]]
    failed = False
    for run in plan:
        started = time.monotonic()
        table = run(args)
        print(table.render())
        print(f"({time.monotonic() - started:.0f} s)\n", flush=True)
        failed = failed or table.failed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
