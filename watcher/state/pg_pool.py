"""The PostgreSQL engine's connections: an async pool (``psycopg_pool.AsyncConnectionPool``), a
few connections per instance, autocommit, each with a statement timeout and an
idle-in-transaction timeout set by the server (a paused instance's open transaction is ended for
it, its locks released)."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

Connection = psycopg.AsyncConnection[TupleRow]


@dataclass(frozen=True)
class PoolLimits:
    """The pool and its connections' server-side limits."""

    min_size: int = 1
    max_size: int = 4
    connect_timeout: float = 5.0  # one connection attempt
    wait_timeout: float = 10.0  # waiting for a free connection of the pool
    statement_timeout: float = 15.0
    idle_in_transaction_timeout: float = 15.0


DEFAULT_LIMITS = PoolLimits()


def open_pool(url: str, limits: PoolLimits) -> AsyncConnectionPool[Connection]:
    """The pool of ``url`` under ``limits``, not opened yet (``await pool.open()``)."""
    options = (
        f"-c statement_timeout={int(limits.statement_timeout * 1000)} "
        f"-c idle_in_transaction_session_timeout="
        f"{int(limits.idle_in_transaction_timeout * 1000)}"
    )
    return AsyncConnectionPool(
        url,
        min_size=limits.min_size,
        max_size=limits.max_size,
        timeout=limits.wait_timeout,
        kwargs={
            "autocommit": True,
            "connect_timeout": max(1, int(limits.connect_timeout)),
            "options": options,
        },
        open=False,
        name="watcher-state",
    )
