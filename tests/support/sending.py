"""Driving the real sender in unit tests: a sender without jitter, what receivers saw, and the
alert history of a store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx

from watcher.alerting.formatting import PLAIN, Presentation
from watcher.config.sections import DeliverySettings
from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import AlertRecord, DeliveryRow
from watcher.delivery.channels import Channels
from watcher.delivery.outbox_sender import DELIVERY_DEFAULTS, Sender, SendSettings
from watcher.state.store import AsyncSqliteStore, SqliteStore

from support.values import FakeClock


def alert(key: str) -> AlertMessage:
    """A warning of the rule ``treasury`` to the channel ``ops``, keyed ``key``."""
    return AlertMessage(
        rule="treasury",
        severity="warning",
        subject="addr1",
        reason="event",
        dedup_key=key,
        title=f"[warning] treasury: {key}",
        body=f"signature {key} on addr1",
        channels=("ops",),
    )


def make_sender(
    store: SqliteStore,
    channels: Mapping[str, Sequence[str]],
    clock: FakeClock,
    *,
    fallback_channels: Sequence[str] = (),
    presentation: Presentation = PLAIN,
    delivery: DeliverySettings = DELIVERY_DEFAULTS,
    **kwargs: Any,
) -> Sender:
    # random=0: backoff without jitter, so the test knows when a retry is due. The test reads
    # and writes ``store`` directly; the sender calls it through the engine, as the daemon does.
    return Sender(
        AsyncSqliteStore(store),
        Channels.of(channels, fallback_channels, presentation),
        clock=clock,
        settings=SendSettings(delivery=delivery, random=lambda: 0.0),
        **kwargs,
    )


class GivenUp:
    """Delivery metrics that keep each delivery given up, with its error."""

    def __init__(self, given_up: list[tuple[DeliveryRow, str]]) -> None:
        self.rows = given_up

    def claimed(self, seconds: float) -> None:
        pass

    def delivered(self, channel: str, outcome: str) -> None:
        pass

    def given_up(self, row: DeliveryRow, error: str) -> None:
        self.rows.append((row, error))


def delivery_settings(**seconds: float) -> DeliverySettings:
    """The settings' ``delivery`` with these values in seconds, unchecked (a test may give a
    deadline of 0)."""
    return DeliverySettings().model_copy(update=seconds)


def titles(received: Iterable[dict[str, Any]]) -> list[str]:
    return [post["title"] for post in received]


def alert_history(store: SqliteStore) -> list[AlertRecord]:
    return list(reversed(store.history(limit=1000)))


def answering(status: int, seen: list[httpx.Request]) -> httpx.Client:
    """An HTTP client whose every request is answered ``status`` and recorded in ``seen`` (the
    posts of watcher's own channels: Alertmanager, webhooks)."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, text="no")

    return httpx.Client(transport=httpx.MockTransport(handle))
