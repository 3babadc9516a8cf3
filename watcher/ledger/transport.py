"""One endpoint's HTTP side: its public form, and the httpx client that never sees its key.

The API key lives in the URL path. httpx logs full URLs and copies them into its exceptions
(encode/httpx#2760), so httpx never sees the key: it is given the redacted URL and
``SecretUrlTransport``, below it, swaps the real URL in just before the bytes leave.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from typing import Any, Final

import httpx

from watcher.core.redact import REDACTOR, split_rpc_url
from watcher.core.version import __version__
from watcher.ledger.aio import AiohttpPoster, scrubbed
from watcher.ledger.pacing import Pacer
from watcher.ledger.wire import HttpAnswer


@dataclass(frozen=True)
class EndpointSpec:
    """One endpoint as the settings give it; ``max_rps`` None: the client's ``max_rps``."""

    url: str
    max_rps: float | None = None


class SecretUrlTransport(httpx.AsyncBaseTransport):
    """Rewrites requests for ``placeholder`` to ``real`` just before they are sent.

    Everything above this layer (httpx's logs, exceptions, ``response.request``) holds the
    placeholder. Errors from below are re-raised with their text redacted and without the
    original (which may carry the real request) attached.
    """

    def __init__(self, placeholder: str, real: str, inner: httpx.AsyncBaseTransport) -> None:
        self._placeholder = httpx.URL(placeholder)
        real_url = httpx.URL(real)
        self._real = real_url.copy_with(userinfo=b"")
        # httpx turns URL userinfo into basic auth in the client, above us: do it here instead.
        self._authorization: str | None = None
        if real_url.userinfo:
            pair = f"{real_url.username}:{real_url.password}".encode()
            self._authorization = "Basic " + base64.b64encode(pair).decode()
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url != self._placeholder:
            return await self._inner.handle_async_request(request)
        headers = request.headers.copy()
        if self._authorization:
            headers["Authorization"] = self._authorization
        outgoing = httpx.Request(
            request.method,
            self._real,
            headers=headers,
            stream=request.stream,
            extensions=request.extensions,
        )
        try:
            return await self._inner.handle_async_request(outgoing)
        except (httpx.HTTPError, httpx.InvalidURL, asyncio.CancelledError) as exc:
            if not isinstance(exc, httpx.TransportError):
                raise
            error = scrubbed(exc)
        except Exception as exc:  # an engine error that is not httpx's: still a transport error
            error = scrubbed(exc)
        # Raised outside the except block, so the original is not chained as its context.
        raise error

    async def aclose(self) -> None:
        await self._inner.aclose()


class Endpoint:
    """One endpoint: its public form, and its own httpx transport that never sees the key.

    Requests go straight to the transport, not through an ``httpx.AsyncClient``: the client's
    per-request work (merging URLs, headers, cookies, auth and redirect handling, none of which
    an RPC call uses) cost more CPU than the request itself at 1,000 requests a second.
    """

    def __init__(
        self,
        spec: EndpointSpec,
        *,
        timeout: float,
        max_concurrency: int,
        transport: httpx.AsyncBaseTransport | None,
        max_rps: float | None = None,
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
            scheme = httpx.URL(url).scheme
            # What httpx sees: the public form without userinfo (httpx would make basic auth of it).
            self.placeholder = str(httpx.URL(public_url).copy_with(userinfo=b""))
            # Production posts through aiohttp (watcher.ledger.aio); an injected httpx
            # transport (the client's unit tests) sits under SecretUrlTransport.
            self._poster = (
                None
                if transport is not None
                else AiohttpPoster(
                    url,
                    max_connections=max_concurrency,
                    timeout=timeout,
                    traced=self.pacer is not None,
                )
            )
            wrapped = (
                None if transport is None else SecretUrlTransport(self.placeholder, url, transport)
            )
        except httpx.InvalidURL:
            raise ValueError(f"not a valid RPC URL: {public_url}") from None
        if scheme not in ("http", "https"):
            raise ValueError(f"RPC URL must start with http:// or https://: {public_url}")
        self.transport: httpx.AsyncBaseTransport | None = wrapped
        self._url = httpx.URL(self.placeholder)
        self._timeout = httpx.Timeout(timeout).as_dict()

    async def post_json(self, body: bytes, extensions: dict[str, Any]) -> HttpAnswer:
        """POSTs a JSON body; the answer, read in full (its connection back in the pool)."""
        if self._poster is not None:
            return await self._poster.post(body, _HEADERS, extensions.get("trace"))
        assert self.transport is not None
        request = httpx.Request(
            "POST",
            self._url,
            content=body,
            headers=_HEADERS,
            extensions={"timeout": self._timeout, **extensions},
        )
        response = await self.transport.handle_async_request(request)
        response.request = request
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response

    async def aclose(self) -> None:
        if self._poster is not None:
            await self._poster.aclose()
        if self.transport is not None:
            await self.transport.aclose()


_HEADERS: Final = {
    "Content-Type": "application/json",
    "Accept": "application/json",
    "Accept-Encoding": "gzip, deflate",
    "User-Agent": f"watcher/{__version__}",
}
