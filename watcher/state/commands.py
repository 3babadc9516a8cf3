"""The state as the one-shot commands see it (``alerts``, ``silence``, ``status``): a few
synchronous calls, on either engine. On SQLite, the file itself (``SqliteStore``); on a shared
PostgreSQL, a ``PostgresStore`` in command mode (it neither migrates nor registers as an
instance, and holds no shard) driven by an event loop of its own for the command's length."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Protocol

from watcher.core.events import Silence
from watcher.core.outbox_rows import AlertRecord
from watcher.state.pg_store import PostgresStore
from watcher.state.snapshot import StoreStatus
from watcher.state.store import SqliteStore


class CommandStore(Protocol):
    def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]: ...

    def add_silence(
        self,
        rule: str,
        subject: str | None,
        starts_at: float,
        ends_at: float,
        comment: str,
        created_by: str | None,
        now: float,
    ) -> Silence: ...

    def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]: ...

    def expire_silence(self, silence_id: int, now: float) -> bool: ...

    def status(self, cadence_key: str) -> StoreStatus: ...


class SharedCommandStore:
    """``CommandStore`` on a shared PostgreSQL; ``with`` connects and closes."""

    def __init__(self, url: str, *, lease_ttl: float) -> None:
        self._store = PostgresStore(url, instance="command", lease_ttl=lease_ttl, command=True)
        self._loop = asyncio.Runner()

    def __enter__(self) -> SharedCommandStore:
        try:
            self._loop.run(self._store.start())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._loop.run(self._store.close())
        finally:
            self._loop.close()

    def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
        return self._loop.run(self._store.history(limit, rule))

    def add_silence(
        self,
        rule: str,
        subject: str | None,
        starts_at: float,
        ends_at: float,
        comment: str,
        created_by: str | None,
        now: float,
    ) -> Silence:
        return self._loop.run(
            self._store.add_silence(rule, subject, starts_at, ends_at, comment, created_by, now)
        )

    def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]:
        return self._loop.run(self._store.list_silences(now, include_expired))

    def expire_silence(self, silence_id: int, now: float) -> bool:
        return self._loop.run(self._store.expire_silence(silence_id, now))

    def status(self, cadence_key: str) -> StoreStatus:
        return self._loop.run(self._store.status(cadence_key))


@contextmanager
def sqlite_command_store(path: Path, *, readonly: bool) -> Iterator[CommandStore]:
    """The SQLite file: read-only, or writing beside a running daemon (never upgrading it)."""
    with SqliteStore(path, readonly=readonly, upgrade=False) as store:
        yield store
