"""The factories that turn settings into the daemon's parts: the state store, the RPC client
(and the name it shows), the delivery sender. Beside the composition root (``watcher.app``), the
one place that knows both the settings and every part, so that the parts themselves never import
what wires them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from watcher.alerting.health import StateHealth
from watcher.alerting.messages import Presentation
from watcher.config.settings import Settings
from watcher.core.clock import Clock
from watcher.core.redact import split_rpc_url
from watcher.delivery.channels import Channels
from watcher.delivery.outbox_sender import Sender, SendSettings
from watcher.ledger.rpc import EndpointSpec, RpcClient, RpcStats
from watcher.service.metrics import Metrics
from watcher.state.interface import Store
from watcher.state.pg_store import PostgresStore
from watcher.state.store import AsyncSqliteStore


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


def public_endpoint(settings: Settings) -> str:
    """The name of the endpoints the built-in alerts and the logs show, known before the client
    is built: ``RpcClient.public_url`` of the client ``rpc_client`` builds (each endpoint's URL
    masked by the ledger's own ``split_rpc_url``, joined as the client joins them)."""
    return ", ".join(split_rpc_url(e.url.get_secret_value()).public_url for e in settings.endpoints)


def rpc_client(
    settings: Settings, on_request: Callable[[str, float], None], stats: RpcStats
) -> RpcClient:
    """The client the settings describe: every endpoint, each with its ``max_rps``;
    ``on_request`` is told each HTTP request's method and seconds; ``stats``: the counters it
    keeps (the metrics read them when scraped)."""
    endpoints = [EndpointSpec(e.url.get_secret_value(), e.max_rps) for e in settings.endpoints]
    return RpcClient(
        endpoints,
        commitment=settings.commitment,
        timeout=settings.rpc.timeout,
        max_attempts=settings.rpc.max_attempts,
        max_concurrency=settings.rpc.max_concurrency,
        max_rps=settings.rpc.max_rps,
        batch_size=settings.rpc.batch_size,
        on_request=on_request,
        stats=stats,
    )


def delivery_sender(
    settings: Settings,
    store: Store,
    clock: Clock,
    state_health: StateHealth,
    metrics: Metrics,
    more_due: asyncio.Event,
    presentation: Presentation,
) -> Sender:
    """The sender the settings describe, counting its outcomes in ``metrics``; ``more_due`` is
    set when a worker finishes (its URL may have more due); ``presentation``: how its digests
    show keys (as the alerts name them)."""
    return Sender(
        store,
        Channels.of(settings.channels, settings.fallback_channels, presentation),
        clock=clock,
        settings=SendSettings(delivery=settings.delivery),
        metrics=metrics,
        state_health=state_health,
        more_due=more_due,
    )
