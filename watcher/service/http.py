"""``http.listen``: GET /metrics (Prometheus text format) and GET /healthz (200 "ok", or 503 and
the reason), served by an asyncio server on the daemon's own event loop. The state database is
read on the loop before answering (no thread touches it); /metrics is then rendered in a thread
from memory, so that a large scrape (every watched balance) does not hold up the polls."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog
from prometheus_client import CONTENT_TYPE_LATEST

from watcher.core.errors import DaemonFailed
from watcher.service.metrics import HealthVerdict, Metrics

log = structlog.get_logger(__name__)

READ_TIMEOUT_SECONDS = 5.0
MAX_HEAD_BYTES = 8192
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class HttpEndpoint:
    def __init__(
        self, host: str, port: int, metrics: Metrics, health: Callable[[], HealthVerdict]
    ) -> None:
        self.host, self.port = host, port
        self._metrics = metrics
        self._health = health
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port)
        except OSError as exc:
            raise DaemonFailed(f"http.listen {self.host}:{self.port}: {exc.strerror}") from None
        log.info("http endpoint listening", listen=f"{self.host}:{self.port}")

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), READ_TIMEOUT_SECONDS)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_SECONDS)
            method, path = _request_line(head)
            await self._metrics.refresh()  # a shared database: read before answering
            status, content_type, body = await self.respond(method, path)
            writer.write(
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("ascii")
                + (b"" if method == "HEAD" else body)
            )
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass  # a client that went away or never finished its request
        finally:
            writer.close()

    async def respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        """``answer``, with /metrics rendered in a thread."""
        if method in ("GET", "HEAD") and path.split("?", 1)[0] == "/metrics":
            return 200, CONTENT_TYPE_LATEST, await asyncio.to_thread(self._metrics.exposition)
        return self.answer(method, path)

    def answer(self, method: str, path: str) -> tuple[int, str, bytes]:
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"only GET\n"
        route = path.split("?", 1)[0]
        if route == "/metrics":
            return 200, CONTENT_TYPE_LATEST, self._metrics.exposition()
        if route == "/healthz":
            verdict = self._health()
            status = 200 if verdict.healthy else 503
            return status, "text/plain; charset=utf-8", f"{verdict.reason}\n".encode()
        return 404, "text/plain; charset=utf-8", b"not found: try /metrics or /healthz\n"


def _request_line(head: bytes) -> tuple[str, str]:
    parts = head[:MAX_HEAD_BYTES].split(b"\r\n", 1)[0].decode("latin-1").split()
    return (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
