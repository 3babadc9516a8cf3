"""``http.listen`` over a real socket, as Prometheus and a load balancer see it: GET and HEAD
/metrics (the state read on the daemon's loop every second while answers are asked for, the
text rendered on the endpoint's own thread from the last reading, an answer even while the
daemon's loop is held), /healthz 200 or 503 with the reason, 404 and 405, the port taken, a clean
close, and no line logged per request."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import urllib.request
from collections.abc import AsyncIterator

import pytest
import structlog
from prometheus_client import CONTENT_TYPE_LATEST

from watcher.core.errors import DaemonFailed
from watcher.service import http
from watcher.service.http import HttpEndpoint
from watcher.service.metrics import HealthVerdict, Metrics, StateSummary
from watcher.service.scrape_time import ScrapeReads
from watcher.state.snapshot import Outbox

TEXT = "text/plain; charset=utf-8"


class Answer:
    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        status_line, *fields = head.decode("latin-1").split("\r\n")
        self.status = int(status_line.split()[1])
        self.headers = {
            name.lower(): value.strip() for name, value in (field.split(":", 1) for field in fields)
        }


class WatchedMetrics(Metrics):
    """The real metrics, noting where the state was read and the text rendered."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.state_read = asyncio.Event()
        self.pending = 0  # what the store's outbox holds
        # The state comes from read_state (the store's summary).
        super().__init__(lambda: 0.0, ScrapeReads(read_state=self._read_state_now))

    async def _read_state_now(self) -> StateSummary:
        self.events.append(("read state", threading.current_thread().name))
        self.state_read.set()
        return [], Outbox(self.pending, None, 0)

    def exposition(self) -> bytes:
        self.events.append(("render", threading.current_thread().name))
        return super().exposition()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def ask(port: int, method: str, path: str) -> Answer:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 5)  # the endpoint closes after one answer
    writer.close()
    return Answer(raw)


class Served:
    def __init__(self, endpoint: HttpEndpoint, metrics: WatchedMetrics) -> None:
        self.endpoint, self.metrics = endpoint, metrics
        self.verdict = HealthVerdict(True, "ok")


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    metrics = WatchedMetrics()
    metrics.polls.labels("votes").inc(3)
    verdicts: list[Served] = []
    endpoint = HttpEndpoint("127.0.0.1", free_port(), metrics, lambda: verdicts[0].verdict)
    verdicts.append(Served(endpoint, metrics))
    await endpoint.start()
    reading = asyncio.create_task(endpoint.keep_reading())  # as the runtime runs it
    try:
        yield verdicts[0]
    finally:
        reading.cancel()
        await endpoint.close()


async def test_metrics_read_the_state_on_the_loop_then_render_in_a_thread(served: Served) -> None:
    answer = await ask(served.endpoint.port, "GET", "/metrics")
    assert answer.status == 200
    assert answer.headers["content-type"] == CONTENT_TYPE_LATEST
    assert answer.headers["connection"] == "close"
    assert 'watcher_polls_total{source="votes"} 3.0' in answer.body.decode()
    assert "watcher_outbox_depth 0.0" in answer.body.decode()
    assert int(answer.headers["content-length"]) == len(answer.body)
    (read, read_on), (render, render_on) = served.metrics.events[0], served.metrics.events[-1]
    assert (read, render) == ("read state", "render")
    assert read_on == threading.main_thread().name != render_on


def reads(served: Served) -> int:
    return sum(1 for event, _ in served.metrics.events if event == "read state")


async def wait_for_depth(served: Served, depth: int) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + http.READ_EVERY_SECONDS + 5
    while f"watcher_outbox_depth {depth:.1f}" not in (
        body := (await ask(served.endpoint.port, "GET", "/metrics")).body.decode()
    ):
        assert loop.time() < deadline, body
        await asyncio.sleep(0.05)


async def test_while_scraped_the_state_is_read_every_second_and_a_scrape_shows_the_last_reading(
    served: Served,
) -> None:
    await ask(served.endpoint.port, "GET", "/metrics")
    made = reads(served)
    served.metrics.pending = 7
    # Before the next reading, a scrape answers with the last one: it waits for no loop.
    early = await ask(served.endpoint.port, "GET", "/metrics")
    assert "watcher_outbox_depth 0.0" in early.body.decode()
    assert reads(served) == made
    # The loop reads again within the second.
    await wait_for_depth(served, 7)


async def test_nobody_asking_nothing_is_read_and_the_first_answer_after_asks_for_a_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http, "READ_EVERY_SECONDS", 0.005)
    monkeypatch.setattr(http, "KEEP_READING_SECONDS", 0.1)
    monkeypatch.setattr(http, "REFRESH_WAIT_SECONDS", 5.0)  # an idle loop reads at once
    metrics = WatchedMetrics()
    ok = HealthVerdict(True, "ok")
    served = Served(HttpEndpoint("127.0.0.1", free_port(), metrics, lambda: ok), metrics)
    await served.endpoint.start()
    reading = asyncio.create_task(served.endpoint.keep_reading())
    try:
        # Before any answer, a daemon reads nothing (twenty of its ticks).
        await asyncio.sleep(0.1)
        assert reads(served) == 0
        await ask(served.endpoint.port, "GET", "/healthz")
        asked = asyncio.get_running_loop().time()
        for _ in range(3):  # asked for: read every READ_EVERY_SECONDS
            metrics.state_read.clear()
            await asyncio.wait_for(metrics.state_read.wait(), 5)
        # KEEP_READING_SECONDS since the answer, then twenty ticks more: no reading.
        await asyncio.sleep(max(0.0, asked + 0.15 - asyncio.get_running_loop().time()))
        stopped = reads(served)
        await asyncio.sleep(0.1)
        assert reads(served) == stopped
        # The reading is old: the next answer asks the loop for a new one and shows it.
        metrics.pending = 9
        answer = await ask(served.endpoint.port, "GET", "/metrics")
        assert "watcher_outbox_depth 9.0" in answer.body.decode()
    finally:
        reading.cancel()
        await served.endpoint.close()


async def test_a_scrape_is_answered_while_the_daemons_loop_is_held(served: Served) -> None:
    answered = threading.Event()
    bodies: list[bytes] = []

    def scrape() -> None:  # as Prometheus does, from outside the daemon's loop
        with urllib.request.urlopen(f"http://127.0.0.1:{served.endpoint.port}/metrics") as got:
            bodies.append(got.read())
        answered.set()

    await ask(served.endpoint.port, "GET", "/metrics")  # Prometheus scraped a moment ago
    threading.Thread(target=scrape).start()
    # The daemon's loop is held (a sweep stepping a thousand targets): the scrape is answered
    # meanwhile, with the store's reading it last had.
    assert answered.wait(timeout=5)
    assert b'watcher_polls_total{source="votes"} 3.0' in bodies[0]
    assert b"watcher_outbox_depth 0.0" in bodies[0]


async def test_a_query_string_is_ignored_and_head_has_no_body(served: Served) -> None:
    assert (await ask(served.endpoint.port, "GET", "/metrics?name=x")).status == 200
    head = await ask(served.endpoint.port, "HEAD", "/metrics")
    assert (head.status, head.body) == (200, b"")
    assert head.headers["content-type"] == CONTENT_TYPE_LATEST
    assert int(head.headers["content-length"]) > 0


async def test_healthz_says_ok_or_503_with_the_reason(served: Served) -> None:
    ok = await ask(served.endpoint.port, "GET", "/healthz")
    assert (ok.status, ok.headers["content-type"], ok.body) == (200, TEXT, b"ok\n")
    served.verdict = HealthVerdict(False, "database down for 120s")
    down = await ask(served.endpoint.port, "GET", "/healthz")
    assert (down.status, down.body) == (503, b"database down for 120s\n")
    head = await ask(served.endpoint.port, "HEAD", "/healthz")
    assert (head.status, head.body) == (503, b"")


async def test_other_paths_are_404_and_other_methods_405(served: Served) -> None:
    missing = await ask(served.endpoint.port, "GET", "/")
    assert (missing.status, missing.headers["content-type"]) == (404, TEXT)
    assert missing.body == b"not found: try /metrics or /healthz\n"
    for method, path in [("POST", "/metrics"), ("PUT", "/healthz"), ("DELETE", "/elsewhere")]:
        refused = await ask(served.endpoint.port, method, path)
        assert (refused.status, refused.body) == (405, b"only GET\n"), (method, path)


async def test_no_line_is_logged_per_request(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as logged:
        for path in ("/metrics?token=s3cr3t", "/healthz?token=s3cr3t", "/x?token=s3cr3t"):
            await ask(served.endpoint.port, "GET", path)
    assert logged == []
    assert [r.getMessage() for r in caplog.records if "s3cr3t" in r.getMessage()] == []
    assert [r.name for r in caplog.records if r.name == "aiohttp.access"] == []


async def test_a_port_in_use_stops_the_start_with_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        endpoint = HttpEndpoint(
            "127.0.0.1", port, WatchedMetrics(), lambda: HealthVerdict(True, "")
        )
        with pytest.raises(DaemonFailed) as failed:
            await endpoint.start()
    line = str(failed.value)
    assert line.startswith(f"http.listen 127.0.0.1:{port}: ") and "\n" not in line
    assert "address already in use" in line.lower()


async def test_after_close_nothing_listens(served: Served) -> None:
    await served.endpoint.close()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", served.endpoint.port)
