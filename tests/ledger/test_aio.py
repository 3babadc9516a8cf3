"""The aiohttp engine (watcher.ledger.transport.AiohttpPoster), against real servers on
loopback: the pacer's trace still sees each request leave and its answer arrive, and an engine
error that httpx-aiohttp leaves unmapped still reaches the client as a redacted transport
error."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from watcher.core.errors import RpcTimeout
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.ledger.transport import Endpoint, EndpointSpec
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey

KEY = "a10K3yTh4tN3v3rL34ks"
ADDRESS = derived_pubkey("aio address")
BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "getSignaturesForAddress",
        "params": [ADDRESS, {"limit": 1}],
    }
).encode()


async def test_the_trace_hears_the_request_leave_and_the_answer_arrive() -> None:
    events: list[str] = []

    async def trace(event: str, info: dict[str, Any]) -> None:
        events.append(event)

    with SimulatorServer(Ledger(seed=1), api_key=KEY) as server:
        endpoint = Endpoint(EndpointSpec(server.url, max_rps=1000), timeout=2.0, max_concurrency=2)
        try:
            response = await endpoint.post_json(BODY, {"trace": trace})
            untraced = await endpoint.post_json(BODY, {})
        finally:
            await endpoint.aclose()
    assert response.status_code == 200 and json.loads(response.content)["result"] == []
    assert events == [
        "http11.send_request_body.started",  # the headers go with the body
        "http11.receive_response_headers.complete",
    ]
    assert untraced.status_code == 200  # no trace asked: none called, nothing broken


@pytest.fixture
def garbage_server() -> Iterator[str]:
    """Answers every connection with bytes that are not HTTP, then closes it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.05)  # accept() wakes up to see the fixture end
    port = listener.getsockname()[1]
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2.0)
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.6 not http at all\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/v3/{KEY}"
    done.set()
    thread.join(timeout=2)
    listener.close()


async def test_an_answer_that_is_not_http_is_a_transport_error_without_the_key(
    garbage_server: str,
) -> None:
    endpoint = Endpoint(EndpointSpec(garbage_server), timeout=2.0, max_concurrency=1)
    try:
        with pytest.raises(httpx.TransportError) as caught:
            await endpoint.post_json(BODY, {})
    finally:
        await endpoint.aclose()
    assert KEY not in str(caught.value) and caught.value.__cause__ is None

    async def no_sleep(seconds: float) -> None:
        await asyncio.sleep(0)

    async with RpcClient(
        [garbage_server], RpcSettings(timeout=2.0, max_attempts=2), sleep=no_sleep
    ) as rpc:
        with pytest.raises(RpcTimeout) as failed:
            await rpc.get_signatures_for_address(ADDRESS)
    assert failed.value.attempts == 2  # transient: retried, never a crash
    assert KEY not in str(failed.value)


async def test_a_gzipped_answer_and_a_retry_after_are_read() -> None:
    """Providers compress answers (we ask with Accept-Encoding) and say when to come back."""
    import gzip
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    statuses = iter([429, 200])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            call = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status = next(statuses)
            body = (
                {"error": "slow down"}
                if status == 429
                else {"jsonrpc": "2.0", "id": call["id"], "result": []}
            )
            packed = gzip.compress(json.dumps(body).encode())
            self.send_response(status)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(packed)))
            self.send_header("retry-after", "0")
            self.end_headers()
            self.wfile.write(packed)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v3/{KEY}"
        async with RpcClient(url, RpcSettings(timeout=2.0, max_attempts=2)) as rpc:
            assert await rpc.get_signatures_for_address(ADDRESS) == []
            assert rpc.stats.errors == {"RateLimited": 1}  # read, then retried at once
    finally:
        server.shutdown()
        server.server_close()
