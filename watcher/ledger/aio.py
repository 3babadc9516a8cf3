"""The HTTP engine: aiohttp, posting straight to the endpoint.

Measured (10,000 addresses, batches of 10, simulator at 30 ms, 2 cores): the daemon spent
0.38 s of CPU per 1,000 polls with httpx's own transport (httpcore, pure Python, on anyio),
0.27 s with aiohttp under httpx (httpx-aiohttp's transport: aiohttp's C-accelerated parser),
and less again without httpx's request and response layers around each post (this module).
Answers come back as small ``Answer`` values (what ``watcher.ledger.wire.HttpAnswer`` asks)
and failures as httpx's exceptions, so the client above reads one kind of answer whatever
poster sent it (``watcher.ledger.transport.Poster``).

What this module keeps of what httpcore did:

- **The pacer's trace** (``watcher.ledger.pacing.paced``): called as the request's first
  bytes go out (its headers, with the body) and as the answer's headers arrive. aiohttp
  reports those moments to a ``TraceConfig``; the request's ``trace`` travels there in a
  context variable (aiohttp sends the request in the caller's task, the body in a task started
  there, which sees it too). An endpoint without ``max_rps`` has no pacer, and no trace config:
  aiohttp's tracing costs CPU on every request.
- **Typed errors**: aiohttp's errors become httpx's (httpx-aiohttp's mapping). ``scrubbed``
  redacts their text and turns an error the mapping leaves out into a transport error (the
  endpoint applies it to whatever its poster raises, ``watcher.ledger.transport.Endpoint``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp.transport import map_aiohttp_exceptions
from yarl import URL

from watcher.core.redact import REDACTOR

Trace = Callable[[str, dict[str, Any]], Awaitable[None]]

# The trace of the request being sent in this task (None: no one asked).
current_trace: ContextVar[Trace | None] = ContextVar("watcher_request_trace", default=None)


async def _first_bytes_sent(
    _session: aiohttp.ClientSession, _ctx: SimpleNamespace, _params: Any
) -> None:
    # aiohttp holds the headers back and writes them with the body's first chunk, in a task of
    # its own (a loop iteration later, longer when the loop is busy): that is when it leaves.
    trace = current_trace.get()
    if trace is not None:
        await trace("http11.send_request_body.started", {})


async def _answer_headers(
    _session: aiohttp.ClientSession, _ctx: SimpleNamespace, _params: Any
) -> None:
    trace = current_trace.get()
    if trace is not None:
        await trace("http11.receive_response_headers.complete", {})


def scrubbed(exc: Exception) -> httpx.TransportError:
    """The error to raise instead of ``exc``: its type when a transport error, its text
    redacted; anything else from the engine is a ``RemoteProtocolError``."""
    if isinstance(exc, httpx.TransportError):
        return type(exc)(REDACTOR.redact(str(exc)))
    return httpx.RemoteProtocolError(REDACTOR.redact(f"{type(exc).__name__}: {exc}"))


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer, read in full (``watcher.ledger.wire.HttpAnswer``)."""

    status_code: int
    reason_phrase: str
    headers: Mapping[str, str]  # aiohttp's: case-insensitive
    content: bytes  # decompressed (Content-Encoding undone by aiohttp)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


class AiohttpPoster:
    """POSTs bodies to one URL (the real one, key included, userinfo left out) over aiohttp's
    pool (``watcher.ledger.transport.Poster``)."""

    def __init__(self, url: str, *, max_connections: int, timeout: float, traced: bool) -> None:
        self._url = URL(url, encoded=True)
        self._timeout = aiohttp.ClientTimeout(
            sock_connect=timeout, sock_read=timeout, connect=timeout
        )
        self._max_connections = max_connections
        self._traced = traced
        self._session: aiohttp.ClientSession | None = None

    def _new_session(self) -> aiohttp.ClientSession:
        # Made on the first request: aiohttp wants its session made inside the event loop.
        traces = None
        if self._traced:
            config = aiohttp.TraceConfig()
            config.on_request_chunk_sent.append(_first_bytes_sent)
            config.on_request_end.append(_answer_headers)
            traces = [config]
        connector = aiohttp.TCPConnector(
            limit=self._max_connections, keepalive_timeout=5.0, ssl=httpx.create_ssl_context()
        )  # httpx's TLS settings (certifi's roots), as before
        return aiohttp.ClientSession(connector=connector, trace_configs=traces)

    async def post(self, body: bytes, headers: Mapping[str, str], trace: Trace | None) -> Answer:
        """The answer, read in full (its connection back in the pool); aiohttp's errors as
        httpx's."""
        if self._session is None:
            self._session = self._new_session()
        token = current_trace.set(trace)
        try:
            with map_aiohttp_exceptions():
                async with self._session.post(
                    self._url,
                    data=body,
                    headers=headers,
                    timeout=self._timeout,
                    allow_redirects=False,
                ) as answer:
                    content = await answer.read()
                    return Answer(answer.status, answer.reason or "", answer.headers, content)
        finally:
            current_trace.reset(token)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
