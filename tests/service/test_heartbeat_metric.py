"""The heartbeat tells /metrics when its ping was last accepted (a refused one changes
nothing), so that a Prometheus rule can say the heartbeat is stale."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from watcher.service.heartbeat import Heartbeat


class Answer(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize(("status", "told"), [(200, [1234.5]), (500, [])])
def test_an_accepted_ping_is_told_with_its_time(
    server: ThreadingHTTPServer, status: int, told: list[float]
) -> None:
    server.status = status  # type: ignore[attr-defined]
    accepted: list[float] = []
    url = f"http://127.0.0.1:{server.server_address[1]}/ping"

    async def ping() -> None:
        beat = Heartbeat(url, 60.0, lambda: 1234.5, on_accepted=accepted.append)
        beat.round_done(healthy=True)
        assert beat._task is not None
        await beat._task

    asyncio.run(ping())
    assert accepted == told
