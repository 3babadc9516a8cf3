"""The HTTP engine under httpx: aiohttp, through httpx-aiohttp's transport.

Measured (10,000 addresses, batches of 10, simulator at 30 ms, 2 cores): the daemon spent
0.38 s of CPU per 1,000 polls with httpx's own transport (httpcore, pure Python, on anyio) and
0.27 s with aiohttp's (C-accelerated HTTP parser): at 100,000 addresses that is the difference
between a sweep that needs a core and one that does not. httpx stays the interface (requests,
answers, exceptions, the test transports); only the engine changes.

Two things httpcore did that this module keeps:

- **The pacer's trace** (``watcher.ledger.pacing.paced``): httpcore calls the request's
  ``trace`` extension as headers go out and as the answer's headers arrive. aiohttp reports the
  same moments to a ``TraceConfig``; the request's ``trace`` travels there in a context variable
  (aiohttp sends the request in the caller's task).
- **Typed errors**: httpx-aiohttp maps aiohttp's errors to httpx's; anything it leaves unmapped
  becomes an ``httpx.TransportError`` in ``watcher.ledger.transport.SecretUrlTransport``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

Trace = Callable[[str, dict[str, Any]], Awaitable[None]]

# The trace of the request being sent in this task (None: no one asked).
current_trace: ContextVar[Trace | None] = ContextVar("watcher_request_trace", default=None)


async def _headers_sent(_session: aiohttp.ClientSession, _ctx: SimpleNamespace,
                        _params: Any) -> None:  # fmt: skip
    trace = current_trace.get()
    if trace is not None:
        await trace("http11.send_request_headers.started", {})


async def _answer_headers(_session: aiohttp.ClientSession, _ctx: SimpleNamespace,
                          _params: Any) -> None:  # fmt: skip
    trace = current_trace.get()
    if trace is not None:
        await trace("http11.receive_response_headers.complete", {})


def aiohttp_transport(max_connections: int) -> httpx.AsyncBaseTransport:
    """An httpx transport sending through aiohttp, with at most ``max_connections`` open."""
    limits = httpx.Limits(max_connections=max_connections)

    def session() -> aiohttp.ClientSession:
        # Made on the first request: aiohttp wants its session made inside the event loop.
        traces = aiohttp.TraceConfig()
        traces.on_request_headers_sent.append(_headers_sent)
        traces.on_request_end.append(_answer_headers)
        connector = aiohttp.TCPConnector(
            limit=max_connections, keepalive_timeout=5.0, ssl=httpx.create_ssl_context()
        )  # httpx's TLS settings (certifi's roots), as before
        return aiohttp.ClientSession(connector=connector, trace_configs=[traces])

    return AiohttpTransport(limits=limits, client=session)
