"""Which engine holds the state: the SQLite file (``state_path``, the default: one process) or
a PostgreSQL database shared by several instances (``state_url``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from watcher.state.interface import Store
from watcher.state.pg_store import PostgresStore
from watcher.state.store import AsyncSqliteStore

if TYPE_CHECKING:
    from watcher.config.settings import Settings


def open_store(settings: Settings) -> Store:
    """The engine the settings name, built without I/O on PostgreSQL (``Store.start`` connects);
    the SQLite file is opened (created or upgraded) at once."""
    if settings.state_url is not None:
        return PostgresStore(
            settings.state_url.get_secret_value(),
            instance=settings.instance_name,
            lease_ttl=settings.lease_ttl,
        )
    return AsyncSqliteStore.open(settings.state_path)
