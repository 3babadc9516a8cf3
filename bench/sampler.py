"""``watcher`` run with a stack sampler beside it: how much of the process's CPU is the state
store's (bench/scale.py).

    python bench/sampler.py OUT.jsonl run --config watcher.yaml

Every ``PERIOD`` seconds of the process's CPU time (``setitimer(ITIMER_PROF)``, user and
system), SIGPROF interrupts the main thread, and its handler looks at the Python stack it
interrupted. A sample is store when any frame on the stack belongs to the store
(``watcher/state/``, but for ``shards.py`` when the sweep calls it itself) or its driver
(psycopg, psycopg_pool: encoding rows, parsing results; sqlite3), idle when the top frame is the
event loop in ``selectors`` (the system call of a wait), and other work otherwise (the RPC
client, parsing answers, stepping rules, the sweep itself). Every second a thread writes the
cumulative counts, the process's CPU time and its own to OUT as one JSON line, so that a run can
take the figures of any window (a sweep's) by difference.

Why CPU time, not a thread looking every few milliseconds of wall time: such a thread gets the
GIL mostly when the main thread lets it go, which it does in every system call, so it lands on
the driver's network calls far more often than their share of the CPU (a first version did,
and showed the store's share about twice what this measures; bench/README.md).
"""

from __future__ import annotations

import atexit
import json
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType

PERIOD = 0.005  # CPU seconds between samples
STORE = "/watcher/state/"
NOT_STORE = "/watcher/state/shards.py"  # which shard a target is in: the sweep's, not the store's
DRIVER_KEY = "(of which in the driver)"
DRIVERS = ("/psycopg/", "/psycopg_pool/", "/psycopg_c/", "/psycopg_binary/", "/sqlite3/")


def classify(frame: FrameType | None) -> tuple[str, list[str]]:
    """idle, store or other; for store, where: the outermost store function on the stack (the
    store's method the daemon called; not the error-mapping wrapper around it), and
    ``DRIVER_KEY`` too when the innermost store frame is the driver's."""
    if frame is None:
        return "idle", []
    top = frame.f_code
    if top.co_filename.endswith("selectors.py") and top.co_name == "select":
        return "idle", []
    entry, in_driver, seen = None, False, False
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if STORE in name and not name.endswith(NOT_STORE):
            if not code.co_qualname.endswith("<locals>.call"):
                entry = f"{Path(name).stem}.{code.co_qualname}"
            seen = True
        elif not seen and any(mark in name for mark in DRIVERS):
            in_driver = seen = True
        frame = frame.f_back
    if entry is None:
        return ("store", [DRIVER_KEY]) if in_driver else ("other", [])
    return "store", [entry, DRIVER_KEY] if in_driver else [entry]


class Samples:
    """The counts, updated by the SIGPROF handler in the main thread."""

    def __init__(self) -> None:
        self.counts = {"idle": 0, "store": 0, "other": 0}
        self.entries: Counter[str] = Counter()

    def take(self, signum: int, frame: FrameType | None) -> None:
        kind, where = classify(frame)
        self.counts[kind] += 1
        self.entries.update(where)


def write_forever(out: Path, samples: Samples) -> None:
    with out.open("a") as file:
        while True:
            time.sleep(1.0)
            line = {
                "t": time.time(),
                "cpu": time.process_time(),
                "sampler_cpu": time.thread_time(),
                **samples.counts,
                "entries": dict(samples.entries),
            }
            file.write(json.dumps(line) + "\n")
            file.flush()


def main() -> None:
    out = Path(sys.argv[1])
    samples = Samples()
    signal.signal(signal.SIGPROF, samples.take)
    signal.setitimer(signal.ITIMER_PROF, PERIOD, PERIOD)
    # Off before the interpreter finalizes: SIGPROF's default action ends the process, and its
    # exit code is what the bench checks.
    atexit.register(signal.setitimer, signal.ITIMER_PROF, 0)
    thread = threading.Thread(target=write_forever, args=(out, samples), daemon=True)
    thread.start()
    sys.argv = ["watcher", *sys.argv[2:]]
    from watcher.cli import main as watcher_main

    watcher_main()


if __name__ == "__main__":
    main()
