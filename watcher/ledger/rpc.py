"""The JSON-RPC client: the only module that speaks the ledger's wire protocol.

Increasing request ids, a concurrency cap, timeouts, retries with exponential backoff and full
jitter for transient failures, typed errors (``watcher.core.errors``) for the rest, and answers
parsed into pydantic models (the methods: ``watcher.ledger.rpc_methods``): an answer that does
not fit is an error. Reading answers is pure (``watcher.ledger.wire``); each endpoint's HTTP
side, which keeps the API key away from httpx, is ``watcher.ledger.transport``.

Several endpoints (``rpc_urls``): each attempt of a call goes to one endpoint, in the order
``watcher.ledger.endpoints.EndpointPool`` gives (a due probe, healthy endpoints, then those
cooling down). An endpoint failure (``is_endpoint_failure``: timeout or refused connection, 429,
5xx, another HTTP error, garbage, node behind) moves the attempt at once to the next endpoint;
only when every endpoint of the round failed does the call back off and start another round
(``max_attempts`` counts rounds; the rounds are ``watcher.ledger.retrying``). Each endpoint has
its own httpx transport and its own placeholder, and registers its own secrets with the
redactor. ``readers()`` gives one reader pinned to each endpoint, for observations that must
come from different endpoints (quorum, ``watcher.ledger.quorum``).

Seams: ``_post`` (``watcher.ledger.rpc_post``) sends one HTTP request to one endpoint (the
place for a per-request hook: ``endpoint.public_url`` names it). ``call_batch`` sends one
JSON-RPC batch; chunking to a provider's cap (20 to 100 calls) is the caller's choice.

Rate and batching: each endpoint's requests wait for their slot of its pacer
(``max_rps``, ``watcher.ledger.pacing``) once they hold a place under the concurrency cap. With
``batch_size`` above 1, ``call`` hands calls to a ``watcher.ledger.batching.Batcher``, which
sends concurrent calls of one method as batches through ``call_batch``. An endpoint that refuses
a batch (HTTP 400/403/405, or a JSON-RPC -32600 for the whole batch) is told once in the log and
served with single calls from then on; the calls of that batch go again, one by one.
"""

from __future__ import annotations

import asyncio
import logging
import random as _random
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
import structlog
from pydantic import TypeAdapter

from watcher.core.tally import count_call
from watcher.ledger.batching import Batcher
from watcher.ledger.endpoints import EndpointPool
from watcher.ledger.retrying import RpcStats, Sleep, is_endpoint_failure
from watcher.ledger.rpc_batch import BatchCalls
from watcher.ledger.rpc_methods import LedgerMethods, PinnedReader
from watcher.ledger.transport import Endpoint, EndpointSpec, SecretUrlTransport
from watcher.ledger.unknowns import target_of
from watcher.ledger.wire import adapter, envelope, unwrap, validate

__all__ = [
    "COMMITMENTS",
    "Endpoint",
    "EndpointSpec",
    "PinnedReader",
    "RpcClient",
    "RpcStats",
    "SecretUrlTransport",
    "is_endpoint_failure",
]

T = TypeVar("T")

log = structlog.get_logger(__name__)

# httpx logs every request URL at INFO; keep both libraries quiet unless something is wrong.
for _noisy in ("httpx", "httpcore"):
    logging.getLogger(_noisy).setLevel(logging.WARNING)

COMMITMENTS = ("processed", "confirmed", "finalized")


class RpcClient(BatchCalls, LedgerMethods):
    """Implements ``watcher.kinds.base.LedgerReader`` over HTTP JSON-RPC 2.0, on one endpoint
    or several (a URL, or a list of URLs or ``EndpointSpec``)."""

    def __init__(
        self,
        url: str | Sequence[str | EndpointSpec],
        *,
        commitment: str = "finalized",
        timeout: float = 10.0,
        max_attempts: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_concurrency: int = 8,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        random: Callable[[], float] = _random.random,
        clock: Callable[[], float] = time.monotonic,
        max_rps: float | None = None,
        batch_size: int = 1,
        on_request: Callable[[str, float], None] | None = None,
        stats: RpcStats | None = None,
    ) -> None:
        """``on_request``: told each HTTP request's method and duration in seconds (the
        daemon's metrics); ``stats``: the counters to keep (the daemon's, which its metrics
        read; None: its own)."""
        if commitment not in COMMITMENTS:
            raise ValueError(f"commitment must be one of {', '.join(COMMITMENTS)}: {commitment!r}")
        if max_attempts < 1 or max_concurrency < 1:
            raise ValueError("max_attempts and max_concurrency must be at least 1")
        urls = [url] if isinstance(url, str) else list(url)
        specs = [EndpointSpec(u) if isinstance(u, str) else u for u in urls]
        endpoints = [
            Endpoint(
                spec,
                timeout=timeout,
                max_concurrency=max_concurrency,
                transport=transport,
                max_rps=max_rps,
            )
            for spec in specs
        ]
        self._pool = EndpointPool(endpoints)
        self._failing: set[str] = set()  # endpoints (public URLs) failing since their last answer
        self.endpoints: tuple[Endpoint, ...] = self._pool.endpoints
        self.public_url = ", ".join(endpoint.public_url for endpoint in endpoints)
        self.commitment = commitment
        # getSignaturesForAddress refuses commitment below confirmed.
        self._signatures_commitment = "confirmed" if commitment == "processed" else commitment
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._sleep = sleep
        self._random = random
        self._clock = clock
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._next_id = 0
        self.stats = RpcStats() if stats is None else stats
        self.on_request = on_request
        self.batcher = None if batch_size == 1 else Batcher(self._send_batch, batch_size)

    def share_rate(self, fraction: float) -> None:
        """Spend ``fraction`` of every endpoint's ``max_rps`` (several instances sharing one
        key, each by the shards it holds)."""
        for endpoint in self.endpoints:
            if endpoint.pacer is not None:
                endpoint.pacer.set_share(fraction)

    async def aclose(self) -> None:
        if self.batcher is not None:
            await self.batcher.aclose()
        for endpoint in self.endpoints:
            await endpoint.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def readers(self) -> list[PinnedReader]:
        """One reader per endpoint, each pinned to it, healthiest first."""
        return [PinnedReader(self, endpoint) for endpoint in self._pool.order(self._clock())]

    # -- generic calls -----------------------------------------------------------------------------

    async def call(
        self,
        method: str,
        params: list[Any] | None,
        model: type[T] | TypeAdapter[T],
        *,
        only: Endpoint | None = None,
    ) -> T:
        """One call, retried while it fails transiently; ``params=None`` sends no params.
        ``only``: to that endpoint, with no failover (and never batched)."""
        count_call()  # the round's tally (watcher.core.tally)
        if self.batcher is not None and only is None:
            value: T = await self.batcher.call(method, params, model)
            return value
        model_adapter = adapter(model)
        self.stats.calls += 1

        async def attempt(endpoint: Endpoint) -> T:
            request_id = self._new_id()
            payload = envelope(request_id, method, params)
            body, headers = await self._post(endpoint, method, payload)
            result = unwrap(method, request_id, body, headers)
            return validate(method, model_adapter, result, target_of(params))

        value = await self._retrying(method, attempt, only)
        self.stats.successes += 1
        return value
