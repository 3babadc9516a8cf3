"""``http.listen``: GET /metrics (Prometheus text format) and GET /healthz (200 "ok", or 503 and
the reason), served by ``aiohttp.web`` on a thread of its own with its own event loop, as
prometheus_client serves its own: a scrape waits for no poll. A sweep of ten thousand targets
keeps the daemon's loop busy for tens of milliseconds at a time, and an answer needs a loop
several times (accept, read, render, write); on the daemon's, each would wait its turn.

The firing alerts and the outbox come from the store, which is the daemon loop's: each answer
asks that loop to read them (``Metrics.refresh``) and waits ``REFRESH_WAIT_SECONDS`` at most; a
loop busier than that gets the reading before (the one asked for lands for the next scrape).
Everything else is rendered from memory. One answer per connection; no access log (a request's
query string is nobody's business)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from watcher.core.errors import DaemonFailed
from watcher.service.metrics import HealthVerdict, Metrics

log = structlog.get_logger(__name__)

# A connection that sends no request within this long is closed, and a stop waits this long
# for the answers under way.
READ_TIMEOUT_SECONDS = 5.0
# How long an answer waits for the daemon's loop to read the store.
REFRESH_WAIT_SECONDS = 0.02
TEXT = "text/plain; charset=utf-8"


class HttpEndpoint:
    def __init__(
        self, host: str, port: int, metrics: Metrics, health: Callable[[], HealthVerdict]
    ) -> None:
        self.host, self.port = host, port  # port 0: any free one, ``port`` once started
        self._metrics = metrics
        self._health = health
        self._daemon_loop: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the endpoint's, on its thread
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Listens, on the endpoint's thread; a port that cannot be had raises
        ``DaemonFailed`` (one line)."""
        self._daemon_loop = asyncio.get_running_loop()
        listening: Future[None] = Future()
        self._thread = threading.Thread(
            target=self._serve_forever, args=(listening,), name="http-endpoint", daemon=True
        )
        self._thread.start()
        try:
            await asyncio.wrap_future(listening)
        except DaemonFailed:
            await asyncio.to_thread(self._thread.join)
            self._thread = None
            raise
        log.info("http endpoint listening", listen=f"{self.host}:{self.port}")

    def _serve_forever(self, listening: Future[None]) -> None:
        loop = asyncio.new_event_loop()
        try:
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:
                listening.set_exception(exc)
                return
            self._loop = loop
            listening.set_result(None)
            loop.run_forever()  # until ``close`` stops it
        finally:
            loop.close()

    async def _listen(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._serve)  # every path: 404 and 405 below
        runner = web.AppRunner(
            app,
            access_log=None,
            keepalive_timeout=READ_TIMEOUT_SECONDS,
            shutdown_timeout=READ_TIMEOUT_SECONDS,
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise DaemonFailed(f"http.listen {self.host}:{self.port}: {exc.strerror}") from None
        self._runner = runner
        if self.port == 0:
            self.port = int(runner.addresses[0][1])

    async def close(self) -> None:
        loop, runner, thread = self._loop, self._runner, self._thread
        self._loop = self._runner = self._thread = None
        if loop is None or runner is None or thread is None:
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(runner.cleanup(), loop))
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)

    async def _serve(self, request: web.Request) -> web.Response:
        await self._refresh()
        status, content_type, body = await self.respond(request.method, request.path)
        response = web.Response(status=status, body=body, headers={"Content-Type": content_type})
        response.force_close()
        return response

    async def _refresh(self) -> None:
        """Asks the daemon's loop to read the store, and waits a little for it (see the
        module)."""
        if self._daemon_loop is None:
            return
        reading = asyncio.run_coroutine_threadsafe(self._metrics.refresh(), self._daemon_loop)
        # Shielded: a reading that comes late still lands, for the next answer.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(reading)), REFRESH_WAIT_SECONDS
            )

    async def respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        """The status, content type and body of ``method`` ``path`` (a query is ignored)."""
        if method not in ("GET", "HEAD"):
            return 405, TEXT, b"only GET\n"
        route = path.split("?", 1)[0]
        if route == "/metrics":
            return 200, CONTENT_TYPE_LATEST, self._metrics.exposition()
        if route == "/healthz":
            verdict = self._health()
            status = 200 if verdict.healthy else 503
            return status, TEXT, f"{verdict.reason}\n".encode()
        return 404, TEXT, b"not found: try /metrics or /healthz\n"
