"""``http.listen``: GET /metrics (Prometheus text format) and GET /healthz (200 "ok", or 503 and
the reason), served by ``aiohttp.web`` on a thread of its own with its own event loop, as
prometheus_client serves its own: a scrape waits for no poll. A sweep of ten thousand targets
keeps the daemon's loop busy for tens of milliseconds at a time, and an answer needs a loop
several times (accept, read, render, write); on the daemon's, each would wait its turn.

The firing alerts and the outbox come from the store, which is the daemon loop's: while
answers are asked for (one within ``KEEP_READING_SECONDS``), that loop reads them every
``READ_EVERY_SECONDS`` (``keep_reading``, a task of the runtime's) and an answer shows the last
reading without asking the loop for anything: asking and waiting (20 ms at most, and later still
when the polls held the GIL) was a third of a scrape's time at p99, and a reading a second old is
as good to a dashboard scraped every 15 s. A daemon nobody asks reads nothing; the first answer
after such a pause asks the loop for a reading and waits ``REFRESH_WAIT_SECONDS`` at most for it
(an older one could say an outbox long drained is stuck). Everything else is rendered from
memory. One answer per connection; no access log (a request's query string is nobody's business)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
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
# How often the daemon's loop reads the store's figures (and counts the polls) for the answers,
# for as long after the last answer.
READ_EVERY_SECONDS = 1.0
KEEP_READING_SECONDS = 120.0
# How long the first answer after a pause waits for the daemon's loop to read the store.
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
        # time.monotonic() of the last reading and the last answer (None: none yet); a float
        # each, written whole by one thread and read by the other.
        self._read_at: float | None = None
        self._asked_at: float | None = None
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

    async def keep_reading(self) -> None:
        """Forever, on the daemon's loop: the store's figures read for the next answers while
        they are asked for (a store that cannot be read shows as such, ``Metrics.refresh``)."""
        while True:
            asked_at = self._asked_at
            if asked_at is not None and time.monotonic() - asked_at < KEEP_READING_SECONDS:
                await self._read()
            await asyncio.sleep(READ_EVERY_SECONDS)

    async def _read(self) -> None:
        await self._metrics.refresh()
        self._read_at = time.monotonic()

    async def _serve(self, request: web.Request) -> web.Response:
        now = time.monotonic()
        self._asked_at = now
        read_at = self._read_at
        if read_at is None or now - read_at > 2 * READ_EVERY_SECONDS:
            await self._read_now()  # nobody asked for a while: the loop read nothing since
        status, content_type, body = await self.respond(request.method, request.path)
        response = web.Response(status=status, body=body, headers={"Content-Type": content_type})
        response.force_close()
        return response

    async def _read_now(self) -> None:
        """Asks the daemon's loop to read the store, and waits a little for it (see the
        module)."""
        if self._daemon_loop is None:
            return
        reading = asyncio.run_coroutine_threadsafe(self._read(), self._daemon_loop)
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
