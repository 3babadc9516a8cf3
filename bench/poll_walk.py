"""How many of the daemon's modules one poll crosses, from the scheduler to the notification.

The real daemon in one process (as ``watcher demo`` runs it: the simulator over HTTP on
loopback, SQLite, Apprise), one ``new_transactions`` rule on one address. Once the address's
baseline is taken, a transaction lands; every Python function called from then until the
notification reaches a real local webhook receiver (Apprise's ``json://``) is recorded, in
every thread, with ``sys.setprofile``. What is printed: the daemon's modules (``watcher`` but its
simulator and test receivers) those calls ran in, by package, and how many: what a reader
following one poll has to open, an upper bound (the window also holds the idle work of the
same seconds: the loop-lag probe, the scheduler's other jobs).

    python bench/poll_walk.py [--list] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import watcher
from watcher.app import Daemon
from watcher.config.settings import Settings
from watcher.core import logs
from watcher.kinds.rule_files import load_rules
from watcher.kinds.ruleset import RuleSet
from watcher.simulator import Ledger, SimulatorServer
from watcher.testing.receivers import JsonReceiver

ADDRESS = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
PACKAGE = Path(watcher.__file__).resolve().parent
TIMEOUT = 30.0
# The ledger's and the receiver's side, not the daemon's.
OTHERS = frozenset({"simulator", "testing"})


class Walk:
    """The (module, function) pairs called while ``on``, in every thread."""

    def __init__(self) -> None:
        self.on = False
        self.calls: Counter[tuple[str, str]] = Counter()

    def profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if self.on and event == "call":
            self.calls[(frame.f_code.co_filename, frame.f_code.co_name)] += 1

    def modules(self) -> dict[str, int]:
        """The ``watcher`` modules called into, with how many distinct functions each."""
        found: Counter[str] = Counter()
        for filename, _name in self.calls:
            path = Path(filename).resolve()
            if path.is_relative_to(PACKAGE) and path.relative_to(PACKAGE).parts[0] not in OTHERS:
                found[".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)] += 1
        return dict(found)


async def one_poll(walk: Walk, folder: Path, ledger: Ledger, url: str, hook: JsonReceiver) -> None:
    rules_file = folder / "rules.yaml"
    rules_file.write_text(
        "rules:\n"
        "  - name: treasury\n"
        "    kind: new_transactions\n"
        f"    addresses: [{ADDRESS}]\n"
        "    every: 1s\n"
        "    group_wait: 0s\n"
        "    notify: [ops]\n"
    )
    settings = Settings.build(
        rpc_url=url,
        state_path=folder / "watcher.db",
        rules=[rules_file],
        channels={"ops": [f"json://127.0.0.1:{hook.port}/"]},
    )
    rules = load_rules([rules_file], channels=None)
    stop = asyncio.Event()
    daemon = Daemon(settings, RuleSet(rules))
    runner = asyncio.create_task(daemon.run(stop))
    try:
        deadline = time.monotonic() + TIMEOUT
        while await daemon.store.load_state("signatures", ADDRESS) is None:
            if runner.done() or time.monotonic() > deadline:
                raise RuntimeError("no baseline")
            await asyncio.sleep(0.05)
        walk.on = True
        ledger.add_transactions(ADDRESS, 1)
        while not hook.received:
            if runner.done() or time.monotonic() > deadline:
                raise RuntimeError("no notification")
            await asyncio.sleep(0.01)
        walk.on = False
    finally:
        walk.on = False
        stop.set()
        await runner


def walk_once() -> Walk:
    walk = Walk()
    # Before any thread starts: each new thread inherits the profile.
    threading.setprofile(walk.profile)
    sys.setprofile(walk.profile)
    try:
        with tempfile.TemporaryDirectory(prefix="watcher-walk-") as folder:
            ledger = Ledger()
            with SimulatorServer(ledger) as server, JsonReceiver() as hook:
                asyncio.run(one_poll(walk, Path(folder), ledger, server.url, hook))
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return walk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the functions too")
    parser.add_argument("--runs", type=int, default=5, help="walks made (the fewest is shown)")
    args = parser.parse_args()
    logs.configure("warning", "console")
    # The window holds the same seconds' idle work too, which varies: the walk with the fewest
    # modules is the poll's own, the others' spread is printed beside it.
    walks = sorted((walk_once() for _ in range(args.runs)), key=lambda w: len(w.modules()))
    walk = walks[0]
    modules = walk.modules()
    by_package: dict[str, list[str]] = {}
    for module in sorted(modules):
        package = module.rsplit(".", 1)[0] if module.count(".") > 1 else module
        by_package.setdefault(package, []).append(module.rsplit(".", 1)[-1])
    print("one poll, from the transaction landing to the notification received:")
    for package, names in by_package.items():
        print(f"  {package:<22} {len(names):>3}  {', '.join(names)}")
    functions = sum(modules.values())
    counts = [len(w.modules()) for w in walks]
    print(
        f"modules crossed: {len(modules)} (functions: {functions});"
        f" over {len(walks)} walks: {counts[0]} to {counts[-1]}"
    )
    if args.list:
        for (filename, name), count in sorted(walk.calls.items()):
            if Path(filename).resolve().is_relative_to(PACKAGE):
                print(f"  {Path(filename).relative_to(PACKAGE.parent)}:{name} x{count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
