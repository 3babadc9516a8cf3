"""psycopg's errors mapped to the store's (``watcher.core.errors``): the PostgreSQL engine's
boundary (``pg_state_error``; ``mapped``, its calls' decorator), as ``watcher.state.database``'s
``mapped`` is SQLite's.

Transient (the call rolled back; retry with backoff, the daemon's health tracks the stretch):
a connection lost, refused or reset, the pool out of connections within its timeout; the server
shutting down, starting up or restarting (class 57: admin shutdown, cannot connect now, a
statement or lock timeout that cancelled the query); a serialization failure or deadlock (40);
out of disk or memory (53); a lock not available (55); a transaction read-only because the
primary moved to another node (25006: a failover) or ended by the idle-in-transaction timeout
(25P03). Anything else is permanent: authentication (28) or a database that does not exist
(3D) — ``watcher check`` and ``run`` say so in one line —, syntax, privileges or a missing table
(42), data or constraint errors (22, 23): a bug or a setting, retrying cannot help.

A connection attempt that fails before the server said anything raises ``OperationalError``
with no SQLSTATE: transient (unreachable, refused, restarting), except when its text is the
server's refusal of the login (a wrong password or user, a missing database, no pg_hba entry).
Error texts name host and user, never the password; ``StateError`` scrubs every registered
secret all the same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import psycopg

from watcher.core.errors import PermanentStateError, StateError, TransientStateError

P = ParamSpec("P")
R = TypeVar("R")

_TRANSIENT_CLASSES = frozenset({"08", "40", "53", "55", "57", "58"})
_TRANSIENT_STATES = frozenset({"25006", "25P03"})
# A refused login, told by the server before any SQLSTATE reaches the driver.
_REFUSED = (
    "password authentication failed",
    "authentication failed",
    "no pg_hba.conf entry",
    "does not exist",
    "no password supplied",
)


def transient(exc: psycopg.Error) -> bool:
    """Whether ``exc`` may clear by itself (see the module's docstring)."""
    state = exc.sqlstate
    if state:
        return state[:2] in _TRANSIENT_CLASSES or state in _TRANSIENT_STATES
    if isinstance(exc, psycopg.OperationalError):
        text = str(exc).lower()
        return not any(refusal in text for refusal in _REFUSED)
    return False


def pg_state_error(exc: psycopg.Error, operation: str) -> StateError:
    """The store's error for a driver error met while doing ``operation``."""
    kind = TransientStateError if transient(exc) else PermanentStateError
    detail = " ".join(str(exc).split())  # the server's multi-line texts on one line
    return kind(f"{type(exc).__name__}: {detail}", operation=operation)


def mapped(
    operation: str,
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """A coroutine (an engine's call, ``@mapped("claim deliveries")``) raising the store's
    errors where psycopg raised its own."""

    def wrap(method: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
        @functools.wraps(method)
        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return await method(*args, **kwargs)
            except psycopg.Error as exc:
                raise pg_state_error(exc, operation) from exc

        return call

    return wrap
