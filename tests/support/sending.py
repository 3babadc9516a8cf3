"""Driving the real sender in unit tests: a sender without jitter, what receivers saw, and the
alert history of a store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from watcher.config.sections import DeliverySettings
from watcher.core.outbox_rows import AlertRecord
from watcher.delivery.outbox_sender import Sender
from watcher.state.store import AsyncSqliteStore, SqliteStore

from support.values import FakeClock


def make_sender(
    store: SqliteStore, channels: Mapping[str, Sequence[str]], clock: FakeClock, **kwargs: Any
) -> Sender:
    # random=0: backoff without jitter, so the test knows when a retry is due. The test reads
    # and writes ``store`` directly; the sender calls it through the engine, as the daemon does.
    return Sender(AsyncSqliteStore(store), channels, clock=clock, random=lambda: 0.0, **kwargs)


def delivery_settings(**seconds: float) -> DeliverySettings:
    """The settings' ``delivery`` with these values in seconds, unchecked (a test may give a
    deadline of 0)."""
    return DeliverySettings().model_copy(update=seconds)


def titles(received: Iterable[dict[str, Any]]) -> list[str]:
    return [post["title"] for post in received]


def alert_history(store: SqliteStore) -> list[AlertRecord]:
    return list(reversed(store.history(limit=1000)))
