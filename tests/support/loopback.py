"""A scripted node behind a real HTTP server on loopback, for the RPC client's unit tests.

``node_poster(handler)`` is a ``watcher.ledger.transport.PosterFactory``: each endpoint's poster
is production's ``AiohttpPoster``, posting to a local aiohttp server that hands every request to
``handler`` as an ``httpx.Request`` under the URL the client was given (so a test sees the real
URL, headers and body that left the client), and sends back the ``httpx.Response`` it returns.
A handler that raises drops the connection, and the poster raises that error in place of the
engine's (a scripted ``httpx.ConnectTimeout`` comes up as that, not as "server disconnected").
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Mapping

import httpx
from aiohttp import web

from watcher.ledger.transport import AiohttpPoster, Answer, PosterFactory, Trace

Handler = Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]]

# Set by the server for the body it sends (the answer's content, decoded); the rest of a scripted
# answer's headers go as given.
_LEFT_OUT = frozenset({"content-length", "content-encoding", "transfer-encoding", "connection"})


class LoopbackPoster:
    def __init__(
        self, handler: Handler, url: str, *, max_connections: int, timeout: float, traced: bool
    ) -> None:
        self._handler = handler
        self._url = httpx.URL(url)
        self._max_connections, self._timeout, self._traced = max_connections, timeout, traced
        self._runner: web.AppRunner | None = None
        self._poster: AiohttpPoster | None = None
        self._starting = asyncio.Lock()
        self._raised: deque[Exception] = deque()  # by the handler, for the requests it dropped

    async def _start(self) -> AiohttpPoster:
        # Started on the first request: the server needs the running loop.
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._serve)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        local = self._url.copy_with(scheme="http", host="127.0.0.1", port=port)
        return AiohttpPoster(
            str(local),
            max_connections=self._max_connections,
            timeout=self._timeout,
            traced=self._traced,
        )

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() != "host"]
        arrived = httpx.Request("POST", self._url, headers=headers, content=await request.read())
        try:
            reply = self._handler(arrived)
            response = await reply if inspect.isawaitable(reply) else reply
        except Exception as exc:
            self._raised.append(exc)
            assert request.transport is not None
            request.transport.abort()  # no answer at all: a transport error on the client's side
            return web.Response()
        content = await response.aread()
        answer_headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _LEFT_OUT]
        return web.Response(
            status=response.status_code,
            reason=response.reason_phrase,
            headers=answer_headers,
            body=content,
        )

    async def post(self, body: bytes, headers: Mapping[str, str], trace: Trace | None) -> Answer:
        async with self._starting:
            if self._poster is None:
                self._poster = await self._start()
        try:
            return await self._poster.post(body, headers, trace)
        except httpx.TransportError:
            if self._raised:
                raise self._raised.popleft() from None
            raise

    async def aclose(self) -> None:
        if self._poster is not None:
            await self._poster.aclose()
        if self._runner is not None:
            await self._runner.cleanup()


def node_poster(handler: Handler) -> PosterFactory:
    """Each endpoint's poster: production's, in front of ``handler`` on loopback."""

    def make(url: str, *, max_connections: int, timeout: float, traced: bool) -> LoopbackPoster:
        return LoopbackPoster(
            handler, url, max_connections=max_connections, timeout=timeout, traced=traced
        )

    return make
