"""The state as the one-shot commands see it (``alerts``, ``silence``, ``status``): a few
synchronous calls, outside any event loop. On SQLite, the file itself (``SqliteStore``,
read-only, or writing beside a running daemon without upgrading it); on a shared PostgreSQL, a
``PostgresStore`` in command mode (it neither migrates nor registers as an instance, and holds
no shard), each call run to its end on an event loop of the command's own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, Self

from watcher.core.events import NewSilence, Silence
from watcher.core.outbox_rows import AlertRecord
from watcher.state.closing import Closing
from watcher.state.snapshot import StoreStatus
from watcher.state.store import SqliteStore


class CommandStore(Protocol):
    """What a command asks of the state: silences, the history and the status, synchronous."""

    def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]: ...

    def add_silence(self, new: NewSilence, now: float) -> Silence: ...

    def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]: ...

    def expire_silence(self, silence_id: int, now: float) -> bool: ...

    def status(self, cadence_key: str) -> StoreStatus: ...


class SharedCommandStore(Closing):
    """A ``CommandStore`` on a shared PostgreSQL; ``with`` starts and closes it."""

    def __init__(self, url: str, *, lease_ttl: float) -> None:
        from watcher.state.pg_store import PostgresStore  # psycopg: only when PostgreSQL is used

        self._engine = PostgresStore(url, instance="command", lease_ttl=lease_ttl, command=True)
        self._loop = asyncio.Runner()

    def __enter__(self) -> Self:
        try:
            self._loop.run(self._engine.start())
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        try:
            self._loop.run(self._engine.close())
        finally:
            self._loop.close()

    def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        return self._loop.run(self._engine.history(limit, rule))

    def add_silence(self, new: NewSilence, now: float) -> Silence:
        return self._loop.run(self._engine.add_silence(new, now))

    def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        return self._loop.run(self._engine.list_silences(now, include_expired))

    def expire_silence(self, silence_id: int, now: float) -> bool:
        return self._loop.run(self._engine.expire_silence(silence_id, now))

    def status(self, cadence_key: str) -> StoreStatus:
        return self._loop.run(self._engine.status(cadence_key))


@contextmanager
def sqlite_command_store(path: Path, *, readonly: bool) -> Iterator[CommandStore]:
    """The SQLite file: read-only, or writing beside a running daemon (never upgrading it)."""
    with SqliteStore(path, readonly=readonly, upgrade=False) as store:
        yield store
