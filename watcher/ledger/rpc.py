"""The JSON-RPC client: the only part that speaks the ledger's wire protocol.

Contract: ``RpcClient`` implements ``watcher.kinds.base.LedgerReader`` (its typed methods are
``watcher.ledger.rpc_methods``) over ``call`` and ``call_batch``. A call's answer parsed into its
model is its value; any other outcome is a typed ``RpcError`` (``watcher.core.errors``), raised
once the call was retried while transient (``max_attempts`` rounds; an endpoint failure moves
the attempt at once to the next endpoint). ``call_batch`` never raises an ``RpcError``: each
position holds its value or its error. Each request has an id of its own, increasing.

The client holds its parts, each built here from ``RpcSettings`` or given:
- one ``Endpoint`` per URL (``watcher.ledger.transport``), each with its poster (production's:
  ``AiohttpPoster``; ``poster`` injects another), its pacer (``max_rps``) and
  its own secrets registered with the redactor;
- ``HttpRequests``: one request, under the concurrency cap and the endpoint's pacer;
- ``Retrier`` (``watcher.ledger.retrying``): rounds of attempts over the ``EndpointPool``;
- with ``batch_size`` above 1, a ``Batcher`` (``watcher.ledger.batching``) of its own, through
  which ``call`` sends concurrent calls of one method as batches.

An endpoint that refuses a batch (HTTP 400/403/405, or a JSON-RPC -32600 for the whole batch) is
told once in the log and served with single calls from then on; the calls of that batch go
again, one by one. ``readers()`` gives one reader pinned to each endpoint, for observations that
must come from different endpoints (quorum, ``watcher.ledger.quorum``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random as _random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

import structlog
from pydantic import TypeAdapter

from watcher.core.errors import BadResponse, RpcError, TransientRpcError
from watcher.core.tally import count_call
from watcher.ledger.batching import Batcher, refuses_batches
from watcher.ledger.retrying import Backoff, Retrier, RpcStats, is_endpoint_failure
from watcher.ledger.rpc_methods import LedgerMethods
from watcher.ledger.transport import (
    AiohttpPoster,
    BatchesOff,
    Endpoint,
    EndpointPool,
    EndpointSpec,
    HttpRequests,
    PosterFactory,
    Sleep,
)
from watcher.ledger.wire import (
    BatchAnswer,
    adapter,
    envelope,
    unwrap,
    unwrap_batch,
    validate,
)

__all__ = [
    "COMMITMENTS",
    "Endpoint",
    "EndpointSpec",
    "PinnedReader",
    "RpcClient",
    "RpcSettings",
    "RpcStats",
    "is_endpoint_failure",
]

T = TypeVar("T")

log = structlog.get_logger(__name__)

# httpx logs every request URL at INFO; keep both libraries quiet unless something is wrong.
for _noisy in ("httpx", "httpcore"):
    logging.getLogger(_noisy).setLevel(logging.WARNING)

COMMITMENTS = ("processed", "confirmed", "finalized")


@dataclass(frozen=True)
class RpcSettings:
    """How the client calls: ``timeout`` seconds to connect and between reads; ``max_attempts``
    rounds per call with backoff from ``backoff_base`` to ``backoff_max`` seconds between them;
    ``max_concurrency`` requests in flight; ``max_rps`` per endpoint (None: unpaced) unless its
    ``EndpointSpec`` says; ``batch_size`` calls per request (1: no batching)."""

    commitment: str = "finalized"
    timeout: float = 10.0
    max_attempts: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_concurrency: int = 8
    max_rps: float | None = None
    batch_size: int = 1

    def __post_init__(self) -> None:
        if self.commitment not in COMMITMENTS:
            choices = ", ".join(COMMITMENTS)
            raise ValueError(f"commitment must be one of {choices}: {self.commitment!r}")
        if self.max_attempts < 1 or self.max_concurrency < 1:
            raise ValueError("max_attempts and max_concurrency must be at least 1")

    @property
    def backoff(self) -> Backoff:
        return Backoff(self.max_attempts, self.backoff_base, self.backoff_max)


class RpcClient(LedgerMethods):
    """``watcher.kinds.base.LedgerReader`` over HTTP JSON-RPC 2.0, on one endpoint or several
    (a URL, or a list of URLs or ``EndpointSpec``)."""

    def __init__(
        self,
        url: str | Sequence[str | EndpointSpec],
        settings: RpcSettings = RpcSettings(),
        *,
        stats: RpcStats | None = None,
        on_request: Callable[[str, float], None] | None = None,
        poster: PosterFactory = AiohttpPoster,
        sleep: Sleep = asyncio.sleep,
        random: Callable[[], float] = _random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``stats``: the counters to keep (the daemon's, which its metrics read; None: its
        own); ``on_request``: told each HTTP request's method and duration in seconds;
        ``poster``: makes each endpoint's poster."""
        super().__init__(settings.commitment)
        self.settings = settings
        urls = [url] if isinstance(url, str) else list(url)
        specs = [EndpointSpec(u) if isinstance(u, str) else u for u in urls]
        endpoints = [
            Endpoint(
                spec,
                timeout=settings.timeout,
                max_concurrency=settings.max_concurrency,
                max_rps=settings.max_rps,
                poster=poster,
            )
            for spec in specs
        ]
        self._pool = EndpointPool(endpoints)
        self.endpoints: tuple[Endpoint, ...] = self._pool.endpoints
        self.public_url = ", ".join(endpoint.public_url for endpoint in endpoints)
        self.stats = RpcStats() if stats is None else stats
        self._clock = clock
        self._ids = itertools.count(1)
        self._requests = HttpRequests(
            settings.max_concurrency, self.stats, clock=clock, sleep=sleep, on_request=on_request
        )
        self._retrier = Retrier(
            self._pool, settings.backoff, self.stats, clock=clock, sleep=sleep, random=random
        )
        self.batcher = (
            None if settings.batch_size == 1 else Batcher(self._send_batch, settings.batch_size)
        )

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
            request_id = next(self._ids)
            payload = envelope(request_id, method, params)
            body, headers = await self._requests.post(endpoint, method, payload)
            result = unwrap(method, request_id, body, headers)
            return validate(method, model_adapter, result, params)

        value = await self._retrier.run(method, attempt, only)
        self.stats.successes += 1
        return value

    async def call_batch(
        self,
        method: str,
        params_list: Sequence[list[Any] | None],
        model: type[T] | TypeAdapter[T],
    ) -> list[T | RpcError]:
        """Many calls of one method in JSON-RPC batches; never raises ``RpcError``.

        Each position of the answer holds its value or its error. Calls that fail transiently are
        sent again (alone in their batch with the other failed ones) until ``max_attempts``; a
        failure of the whole request becomes the error of every call still pending.
        """
        return await self._send_batch(method, params_list, model, None)

    async def _send_batch(
        self,
        method: str,
        params_list: Sequence[list[Any] | None],
        model: type[T] | TypeAdapter[T],
        on_send: Callable[[], None] | None,
    ) -> list[T | RpcError]:
        """``call_batch``; ``on_send`` is told when the first request leaves (the batcher)."""
        model_adapter = adapter(model)
        self.stats.calls += len(params_list)
        outcomes: dict[int, T | RpcError] = {}
        pending = list(range(len(params_list)))
        tries = 0

        def settle(position: int, error: RpcError) -> None:
            error.attempts = tries
            outcomes[position] = error

        async def attempt(endpoint: Endpoint) -> None:
            nonlocal tries
            tries += 1
            ids = [next(self._ids) for _ in pending]
            payload = [
                envelope(request_id, method, params_list[position])
                for request_id, position in zip(ids, pending, strict=True)
            ]
            try:
                if not endpoint.batches:
                    answers = await self._singly(endpoint, method, payload, on_send)
                else:
                    try:
                        body, headers = await self._requests.post(
                            endpoint, method, payload, on_send
                        )
                        answers = unwrap_batch(method, ids, body, headers)
                    except BatchesOff:
                        answers = await self._singly(endpoint, method, payload, on_send)
                    except RpcError as err:
                        if not refuses_batches(err):
                            raise
                        self._batches_refused(endpoint, err)
                        answers = await self._singly(endpoint, method, payload, on_send)
            except RpcError as err:
                for position in pending:
                    settle(position, err)
                raise
            failed: TransientRpcError | None = None
            again: list[int] = []  # the calls to send again: those that failed transiently
            for position, answer in zip(pending, answers, strict=True):
                error = answer.error
                if error is None:
                    try:
                        outcomes[position] = validate(
                            method, model_adapter, answer.result, params_list[position]
                        )
                        continue
                    except BadResponse as err:
                        error = err
                settle(position, error)
                if isinstance(error, TransientRpcError):
                    failed = error
                    again.append(position)
            pending[:] = again
            if failed is not None:
                raise failed

        if pending:
            # Whatever failed for good is already in outcomes.
            with contextlib.suppress(RpcError):
                await self._retrier.run(method, attempt)
        self.stats.successes += sum(not isinstance(o, RpcError) for o in outcomes.values())
        return [outcomes[position] for position in range(len(params_list))]

    async def _singly(
        self,
        endpoint: Endpoint,
        method: str,
        payload: list[dict[str, Any]],
        on_send: Callable[[], None] | None,
    ) -> list[BatchAnswer]:
        """A batch's calls as single requests to ``endpoint``: its answers, in order."""

        async def one(call: dict[str, Any]) -> BatchAnswer:
            try:
                body, headers = await self._requests.post(endpoint, method, call, on_send)
                return BatchAnswer(result=unwrap(method, call["id"], body, headers))
            except RpcError as err:
                return BatchAnswer(error=err)

        return list(await asyncio.gather(*(one(call) for call in payload)))

    def _batches_refused(self, endpoint: Endpoint, err: RpcError) -> None:
        if endpoint.batches:
            endpoint.batches = False
            log.warning(
                "rpc endpoint refuses batches; sending single calls",
                endpoint=endpoint.public_url,
                detail=err.message,
            )


class PinnedReader(LedgerMethods):
    """A reader whose calls go to one endpoint of ``client`` only (retried there, never failed
    over)."""

    def __init__(self, client: RpcClient, endpoint: Endpoint) -> None:
        super().__init__(client.commitment)
        self._client, self.endpoint = client, endpoint
        self.public_url = endpoint.public_url

    async def call(
        self, method: str, params: list[Any] | None, model: type[T] | TypeAdapter[T]
    ) -> T:
        return await self._client.call(method, params, model, only=self.endpoint)
