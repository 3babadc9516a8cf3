"""Endpoints and the one HTTP request of a JSON-RPC call.

``Endpoint``: one endpoint's public form (its key masked, registered with the redactor), its
pacer (``max_rps``), whether it takes batches, and its ``Poster``. A poster is given the URL
without userinfo (userinfo travels as a basic ``Authorization`` header); whatever it raises comes
up as an httpx transport error with its text redacted and nothing chained (the original may
carry the URL and its key). Production's poster is ``watcher.ledger.aio.AiohttpPoster``; any
other (a test's scripted node) sits at the same seam and gets the same URL, headers and
redaction.

``HttpRequests``: one request to one endpoint, under the client's concurrency cap and in its
slot of the endpoint's pacer; the decoded JSON body of a 2xx answer, or a typed error
(``watcher.core.errors``). It counts requests in ``RpcStats`` and tells ``on_request`` each
request's method and seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Final, Protocol

import aiohttp
import httpx

from watcher.core.errors import BadResponse, RpcTimeout
from watcher.core.redact import REDACTOR, split_rpc_url
from watcher.core.version import __version__
from watcher.ledger.aio import AiohttpPoster, Trace, scrubbed
from watcher.ledger.pacing import Pacer, paced
from watcher.ledger.wire import (
    HttpAnswer,
    decode_json,
    describe,
    encode_json,
    http_error,
    snippet,
)

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class EndpointSpec:
    """One endpoint as the settings give it; ``max_rps`` None: the client's ``max_rps``."""

    url: str
    max_rps: float | None = None


class Poster(Protocol):
    """POSTs bodies to one URL; the answer read in full. ``trace`` (None: no one asked) is told
    when the request's first bytes leave and when the answer's headers arrive."""

    async def post(
        self, body: bytes, headers: Mapping[str, str], trace: Trace | None
    ) -> HttpAnswer: ...

    async def aclose(self) -> None: ...


class PosterFactory(Protocol):
    """Makes an endpoint's poster: ``url`` without userinfo, at most ``max_connections`` open,
    ``timeout`` seconds to connect and between reads, ``traced``: the endpoint has a pacer."""

    def __call__(
        self, url: str, *, max_connections: int, timeout: float, traced: bool
    ) -> Poster: ...


class BatchesOff(Exception):
    """A batch about to be sent to an endpoint found refusing batches meanwhile."""


class Endpoint:
    """One endpoint: its public form, its pacer, whether it takes batches, and its poster."""

    def __init__(
        self,
        spec: EndpointSpec,
        *,
        timeout: float,
        max_concurrency: int,
        max_rps: float | None = None,
        poster: PosterFactory = AiohttpPoster,
    ) -> None:
        url = spec.url
        public_url, secrets = split_rpc_url(url)
        REDACTOR.add(*secrets)
        self.public_url = public_url
        self.max_rps = spec.max_rps if spec.max_rps is not None else max_rps
        # Every request to this endpoint waits for its slot (watcher.ledger.pacing).
        self.pacer = None if self.max_rps is None else Pacer(self.max_rps)
        self.batches = True  # False once the endpoint refused a batch: single calls from then on
        try:
            real = httpx.URL(url)
        except httpx.InvalidURL:
            raise ValueError(f"not a valid RPC URL: {public_url}") from None
        if real.scheme not in ("http", "https"):
            raise ValueError(f"RPC URL must start with http:// or https://: {public_url}")
        self._headers: Mapping[str, str] = _HEADERS
        if real.userinfo:  # basic auth, as httpx would have made of it (aiohttp's encoding)
            auth = aiohttp.encode_basic_auth(real.username, real.password, encoding="latin1")
            self._headers = {**_HEADERS, "Authorization": auth}
            real = real.copy_with(userinfo=b"")
        self._poster = poster(
            str(real),
            max_connections=max_concurrency,
            timeout=timeout,
            traced=self.pacer is not None,
        )

    async def post_json(self, body: bytes, extensions: dict[str, Any]) -> HttpAnswer:
        """POSTs a JSON body; the answer, read in full. Raises an httpx transport error whose
        text is redacted and which chains nothing."""
        try:
            return await self._poster.post(body, self._headers, extensions.get("trace"))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = scrubbed(exc)
        # Raised outside the except block, so the original is not chained as its context.
        raise error

    async def aclose(self) -> None:
        await self._poster.aclose()


_HEADERS: Final = {
    "Content-Type": "application/json",
    "Accept": "application/json",
    "Accept-Encoding": "gzip, deflate",
    "User-Agent": f"watcher/{__version__}",
}


class RequestStats(Protocol):
    requests: int


class HttpRequests:
    """One HTTP request at a time per place under the concurrency cap, paced per endpoint."""

    def __init__(
        self,
        max_concurrency: int,
        stats: RequestStats,
        *,
        clock: Callable[[], float],
        sleep: Sleep,
        on_request: Callable[[str, float], None] | None,
    ) -> None:
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._stats = stats
        self._clock = clock
        self._sleep = sleep
        self._on_request = on_request

    async def post(
        self,
        endpoint: Endpoint,
        method: str,
        payload: Any,
        on_send: Callable[[], None] | None = None,
    ) -> tuple[Any, Mapping[str, str]]:
        """The decoded JSON body of a 2xx answer and its headers, or a typed error. A batch
        (``payload`` a list) to an endpoint found refusing batches while it waited is not sent:
        ``BatchesOff``. ``on_send`` is told when the request leaves."""
        batch = isinstance(payload, list)
        try:
            async with self._semaphore:
                if batch and not endpoint.batches:
                    raise BatchesOff
                # Paced: the pacer is told when the request leaves, and when it is over.
                pacing: AbstractAsyncContextManager[dict[str, Any]] = (
                    nullcontext({})
                    if endpoint.pacer is None
                    else paced(endpoint.pacer, self._clock, self._sleep)
                )
                async with pacing as extensions:
                    if batch and not endpoint.batches:
                        raise BatchesOff
                    if on_send is not None:
                        on_send()
                    self._stats.requests += 1
                    started = time.monotonic()
                    response = await endpoint.post_json(encode_json(payload), extensions)
                    if self._on_request is not None:
                        self._on_request(method, time.monotonic() - started)
        except httpx.TransportError as exc:
            raise RpcTimeout(describe(exc), method=method) from None
        except httpx.DecodingError as exc:
            raise BadResponse(describe(exc), method=method) from None
        status_error = http_error(method, response)
        if status_error is not None:
            raise status_error
        try:
            return decode_json(response.content), response.headers
        except RecursionError:
            # The decoder refuses nesting deeper than the interpreter's recursion limit (about
            # 1000); no answer of the service comes close (10 levels).
            raise BadResponse("answer is nested too deeply", method=method) from None
        except ValueError:
            extract = snippet(response.text)
            raise BadResponse(f"answer is not JSON: {extract!r}", method=method) from None
