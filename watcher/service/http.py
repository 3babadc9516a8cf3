"""``http.listen``: GET /metrics (Prometheus text format) and GET /healthz (200 "ok", or 503 and
the reason), served by ``aiohttp.web`` on the daemon's own event loop. The state database is
read on the loop before answering (no thread touches it); /metrics is then rendered in a thread
from memory, so that a large scrape (every watched balance) does not hold up the polls. One
answer per connection; no access log (a request's query string is nobody's business)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from watcher.core.errors import DaemonFailed
from watcher.service.metrics import HealthVerdict, Metrics

log = structlog.get_logger(__name__)

# A connection that sends no request within this long is closed, and a stop waits this long
# for the answers under way.
READ_TIMEOUT_SECONDS = 5.0
TEXT = "text/plain; charset=utf-8"


class HttpEndpoint:
    def __init__(
        self, host: str, port: int, metrics: Metrics, health: Callable[[], HealthVerdict]
    ) -> None:
        self.host, self.port = host, port  # port 0: any free one, ``port`` once started
        self._metrics = metrics
        self._health = health
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
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
        log.info("http endpoint listening", listen=f"{self.host}:{self.port}")

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _serve(self, request: web.Request) -> web.Response:
        await self._metrics.refresh()  # a shared database: read before answering
        status, content_type, body = await self.respond(request.method, request.path)
        response = web.Response(status=status, body=body, headers={"Content-Type": content_type})
        response.force_close()
        return response

    async def respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        """The status, content type and body of ``method`` ``path`` (a query is ignored);
        /metrics is rendered in a thread."""
        if method not in ("GET", "HEAD"):
            return 405, TEXT, b"only GET\n"
        route = path.split("?", 1)[0]
        if route == "/metrics":
            return 200, CONTENT_TYPE_LATEST, await asyncio.to_thread(self._metrics.exposition)
        if route == "/healthz":
            verdict = self._health()
            status = 200 if verdict.healthy else 503
            return status, TEXT, f"{verdict.reason}\n".encode()
        return 404, TEXT, b"not found: try /metrics or /healthz\n"
