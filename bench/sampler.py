"""``watcher`` run with a stack sampler beside it: how much of the event loop's busy time is
the state store's (bench/scale.py).

    python bench/sampler.py OUT.jsonl run --config watcher.yaml

A thread looks at the main thread's Python stack every ``PERIOD`` seconds. A sample is idle when
the top frame is the event loop waiting in ``selectors`` (no work to do), store when any frame
on the stack belongs to the store (``watcher/state/``, but for ``shards.py`` when the sweep calls
it itself) or its driver (psycopg, psycopg_pool: encoding rows, parsing results; sqlite3), and
other work otherwise (the RPC
client, parsing answers, stepping rules, the sweep itself). Every second the cumulative counts,
the process's CPU time and the sampler thread's own go to OUT as one JSON line, so that a run
can take the figures of any window (a sweep's) by difference.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType

PERIOD = 0.002
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


def sample_forever(out: Path, main_id: int) -> None:
    counts = {"idle": 0, "store": 0, "other": 0}
    entries: Counter[str] = Counter()
    next_line = time.monotonic() + 1.0
    with out.open("a") as file:
        while True:
            time.sleep(PERIOD)
            frame = sys._current_frames().get(main_id)
            kind, where = classify(frame)
            del frame
            counts[kind] += 1
            entries.update(where)
            now = time.monotonic()
            if now >= next_line:
                next_line = now + 1.0
                line = {
                    "t": time.time(),
                    "cpu": time.process_time(),
                    "sampler_cpu": time.thread_time(),
                    **counts,
                    "entries": dict(entries),
                }
                file.write(json.dumps(line) + "\n")
                file.flush()


def main() -> None:
    out = Path(sys.argv[1])
    main_id = threading.main_thread().ident
    assert main_id is not None
    thread = threading.Thread(target=sample_forever, args=(out, main_id), daemon=True)
    thread.start()
    sys.argv = ["watcher", *sys.argv[2:]]
    from watcher.cli import main as watcher_main

    watcher_main()


if __name__ == "__main__":
    main()
