"""The state as the one-shot commands see it (``alerts``, ``silence``, ``status``): a few
synchronous calls, on the same asynchronous engines as the daemon, each run to its end on an
event loop of the command's own. On SQLite, the file (``AsyncSqliteStore`` over a
``SqliteStore`` read-only, or writing beside a running daemon without upgrading it); on a shared
PostgreSQL, a ``PostgresStore`` in command mode (it neither migrates nor registers as an
instance, and holds no shard)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, Self

from watcher.core.events import NewSilence, Silence
from watcher.core.outbox_rows import AlertRecord
from watcher.state.closing import Closing
from watcher.state.interface import HistoryStore, SilenceStore
from watcher.state.pg_store import PostgresStore
from watcher.state.snapshot import StoreStatus
from watcher.state.store import AsyncSqliteStore, SqliteStore


class CommandEngine(SilenceStore, HistoryStore, Protocol):
    """What a command asks of an engine: silences and the history, opened and closed."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class CommandStore(Closing):
    """An engine's calls for a command, synchronous; ``with`` starts and closes it."""

    def __init__(self, engine: CommandEngine) -> None:
        self._engine = engine
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


class SharedCommandStore(CommandStore):
    """``CommandStore`` on a shared PostgreSQL."""

    def __init__(self, url: str, *, lease_ttl: float) -> None:
        super().__init__(PostgresStore(url, instance="command", lease_ttl=lease_ttl, command=True))


@contextmanager
def sqlite_command_store(path: Path, *, readonly: bool) -> Iterator[CommandStore]:
    """The SQLite file: read-only, or writing beside a running daemon (never upgrading it)."""
    engine = AsyncSqliteStore(SqliteStore(path, readonly=readonly, upgrade=False))
    with CommandStore(engine) as store:
        yield store
