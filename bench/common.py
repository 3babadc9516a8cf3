"""What the bench runs share: the real parts (simulator, receiver, daemon), reading the outbox,
RSS, the figures table.

The real parts are the ones the test suite uses, from ``watcher.testing``: ``daemon`` (the real
``watcher run`` subprocess) and ``receivers`` (a real json:// listener).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Self

from watcher.testing.daemon import DaemonProcess, write_config
from watcher.testing.receivers import JsonReceiver

__all__ = [
    "API_KEY",
    "DaemonProcess",
    "Receiver",
    "Table",
    "drain",
    "key_leaks",
    "outbox_pending",
    "rss_kb",
    "wait_for",
    "write_config",
]

# A key that looks like a real one: it must never show in a log, a notification or the DB.
API_KEY = "b3nchK3yTh4tMustN3v3rL3akZ9y8x7w6v5"


def wait_for(predicate: Callable[[], Any], timeout: float, step: float = 0.05) -> bool:
    """Polls ``predicate`` until it is truthy (True) or ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


class Receiver(JsonReceiver):
    """The suite's json:// listener, plus: the ``X-Watcher-Id`` header of each accepted post
    (None when the daemon sends none), and a hook called right after a post was answered 200
    (the kill loop SIGKILLs the daemon there, inside its send-then-commit window)."""

    def __init__(self) -> None:
        super().__init__()
        self._mine = threading.Lock()
        self._local = threading.local()
        self._accepted: list[tuple[dict[str, Any], str | None]] = []
        self.after_accept: Callable[[], None] | None = None

    def start(self) -> Self:
        super().start()
        assert self._server is not None
        base: Any = self._server.RequestHandlerClass
        receiver = self

        class Handler(base):  # type: ignore[misc]
            def do_POST(self) -> None:
                receiver._local.watcher_id = self.headers.get("X-Watcher-Id")
                receiver._local.accepted = False
                super().do_POST()
                self.wfile.flush()
                hook = receiver.after_accept
                if receiver._local.accepted and hook is not None:
                    hook()

        self._server.RequestHandlerClass = Handler
        return self

    def _record(self, body: dict[str, Any], path: str, headers: dict[str, str]) -> int:
        status = super()._record(body, path, headers)
        if status == 200:
            self._local.accepted = True
            with self._mine:
                self._accepted.append((body, getattr(self._local, "watcher_id", None)))
        return status

    @property
    def accepted(self) -> list[tuple[dict[str, Any], str | None]]:
        """Every accepted post: its JSON body and its X-Watcher-Id header."""
        with self._mine:
            return list(self._accepted)


def drain(stream: IO[str] | None) -> None:
    """Reads what a child process writes to ``stream`` (its piped stdout) from now on, in a
    thread, and drops it: a pipe nobody reads fills up and the child blocks on its next write
    (a simulator logging its failed answers stopped answering)."""
    if stream is not None:
        threading.Thread(target=lambda: stream.read(), daemon=True).start()


def rss_kb(pid: int | None) -> int | None:
    """Resident set size of a live process, in KiB (Linux /proc)."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def outbox_pending(database: Path) -> int | None:
    """Deliveries not yet sent nor given up, read from the state file; None when unreadable."""
    if not database.exists():
        return None
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=2) as db:
            row = db.execute(
                "SELECT COUNT(*) FROM deliveries WHERE status IN ('pending', 'sending')"
            ).fetchone()
            return int(row[0])
    except sqlite3.Error:
        return None


def key_leaks(folder: Path, notes: Sequence[dict[str, Any]]) -> list[str]:
    """Where the API key shows: the daemon's log, the notifications, the state files."""
    found = []
    log = folder / "daemon.log"
    if log.exists() and API_KEY.encode() in log.read_bytes():
        found.append("daemon log")
    if any(API_KEY in repr(note) for note in notes):
        found.append("notifications")
    state = folder / "state"
    if state.exists() and any(API_KEY.encode() in p.read_bytes() for p in state.iterdir()):
        found.append("state database")
    return found


def sigkill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class Table:
    """One plain-text table of figures per run; ``failed`` rows set the exit code."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[tuple[str, str, bool]] = []
        self.notes: list[str] = []

    def add(self, name: str, value: object, *, fail: bool = False) -> None:
        self.rows.append((name, str(value), fail))

    def note(self, text: str) -> None:
        self.notes.append(text)

    @property
    def failed(self) -> bool:
        return any(fail for _, _, fail in self.rows)

    def render(self) -> str:
        width = max([len(name) for name, _, _ in self.rows] + [10])
        value_width = max([len(value) for _, value, _ in self.rows] + [5])
        rule = "-" * (width + value_width + 10)
        lines = [rule, self.title, rule]
        for name, value, fail in self.rows:
            lines.append(f"{name:<{width}}  {value:>{value_width}}  {'FAIL' if fail else ''}")
        lines.append(rule)
        lines.append(f"result: {'FAIL' if self.failed else 'PASS'}")
        lines += self.notes
        return "\n".join(lines)
