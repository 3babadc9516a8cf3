"""One daemon per state file. ``watcher run`` takes an exclusive ``flock`` on ``<state>.lock``
next to the database before it upgrades the schema or requeues interrupted sends, and keeps it
until the process ends: a second daemon on the same file would requeue the first's in-flight
sends (sent twice) and race it on every cursor.

The kernel drops the lock when the process dies however it dies, so a lock is never stale; the
file stays behind (holding the last holder's PID), which is harmless: removing it while another
process waits on it would let two processes lock two different files. Commands that only read
the database never touch the lock.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from watcher.core.errors import StateUnusable
from watcher.state.closing import Closing

# How long to wait for a holder that has the lock but has not written its PID yet.
_PID_WAIT_SECONDS = 1.0


class StateInUse(StateUnusable):
    """Another live process holds the state file's lock; ``pid`` is its PID, when known."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


def lock_path(state_path: Path) -> Path:
    return state_path.with_name(f"{state_path.name}.lock")


class StateLock(Closing):
    """A held lock; ``close()`` (the end of its ``with``, or of the process) lets it go."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None


def lock_state(state_path: Path) -> StateLock:
    """Take the state file's lock (creating its folder) or raise ``StateInUse`` naming the
    holder's PID; any other failure is a ``StateUnusable`` naming the lock file."""
    path = lock_path(state_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Python opens it close-on-exec: no child process inherits the lock.
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StateUnusable(f"{path}: cannot create the lock file: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _holder_pid(fd)
        os.close(fd)
        holder = "its PID not written yet" if pid is None else f"pid {pid}"
        raise StateInUse(
            f"state database {state_path} is in use by another `watcher run` ({holder}; "
            f"lock {path})",
            pid,
        ) from None
    except OSError as exc:
        os.close(fd)
        raise StateUnusable(f"{path}: cannot lock: {exc.strerror}") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        os.close(fd)
        raise StateUnusable(f"{path}: cannot write the lock file: {exc.strerror}") from None
    return StateLock(path, fd)


def _holder_pid(fd: int) -> int | None:
    """The PID the holder wrote; it writes it right after locking, so wait a moment for it."""
    deadline = time.monotonic() + _PID_WAIT_SECONDS
    while True:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)
