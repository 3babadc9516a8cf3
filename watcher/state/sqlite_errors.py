"""SQLite's errors mapped to the store's (``watcher.core.errors``): the SQLite engine's
boundary, as ``watcher.state.pg_errors`` is PostgreSQL's. Transient: locked or busy past the
busy timeout, disk full, I/O error, out of memory, interrupted; anything else is permanent."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from watcher.core.errors import PermanentStateError, StateError, TransientStateError

_T = TypeVar("_T")

# Driver messages (sqlite3 gives no error code before Python 3.11's ``sqlite_errorname``) and
# SQLite result codes that clear by themselves: another process releases its lock, space is
# freed, a disk or NFS hiccup passes.
_TRANSIENT_CODES = frozenset(
    {
        "SQLITE_BUSY",
        "SQLITE_LOCKED",
        "SQLITE_FULL",
        "SQLITE_IOERR",
        "SQLITE_NOMEM",
        "SQLITE_INTERRUPT",
        "SQLITE_PROTOCOL",
    }
)
_TRANSIENT_TEXTS = (
    "locked",
    "busy",
    "disk is full",
    "disk i/o error",
    "out of memory",
    "interrupted",
    "unable to open database file",
)


def state_error(exc: sqlite3.Error, operation: str) -> StateError:
    """Classify a driver error: transient (retry with backoff) or permanent (stop)."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    text = str(exc).lower()
    transient = any(name.startswith(code) for code in _TRANSIENT_CODES) or (
        not name
        and isinstance(exc, sqlite3.OperationalError)
        and any(t in text for t in _TRANSIENT_TEXTS)
    )
    kind = TransientStateError if transient else PermanentStateError
    return kind(f"{type(exc).__name__}: {exc}", operation=operation)


@contextmanager
def mapped(operation: str) -> Iterator[None]:
    """Raises ``StateError`` (``state_error``) where the block raised ``sqlite3.Error``; the
    driver's error is its ``__cause__``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise state_error(exc, operation) from exc


def mapped_batches(operation: str, batches: Iterator[_T]) -> Iterator[_T]:
    """``batches`` with the errors met while iterating mapped as ``mapped`` does."""
    with mapped(operation):
        yield from batches
