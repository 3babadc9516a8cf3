"""Real local receivers for Apprise deliveries: a JSON webhook listener and an SMTP server.

Both listen on 127.0.0.1 on a free port and record what they receive, so tests assert on what
a user's endpoint really got. The notify tests, the end-to-end tests and the benchmarks use them.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import json
import threading
import time
from collections.abc import Callable
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T | Literal[False] | None],
    timeout: float = 10.0,
    what: str = "condition",
) -> T:
    """Poll ``predicate`` every 20 ms until it returns something truthy (returned), or fail
    with a clear message at the deadline. Blocking: not for use inside a running event loop."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def _wait_for_count(items: Callable[[], list[T]], count: int, timeout: float, what: str) -> list[T]:
    got: list[T] = []

    def enough() -> bool:
        nonlocal got
        got = items()
        return len(got) >= count

    try:
        wait_until(enough, timeout)
    except AssertionError:
        raise AssertionError(
            f"timed out after {timeout}s waiting for {count} {what}; got {len(got)}: {got!r}"
        ) from None
    return got


class Running:
    """``with Receiver() as r:`` starts it and always closes it (``close``: stops it, and frees
    what else it holds)."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class JsonReceiver(Running):
    """An HTTP listener for Apprise's ``json://`` scheme; records each JSON body it accepts.

    ``refuse(n)`` answers HTTP 500 to the next ``n`` posts, ``refuse_all(True)`` to every post
    until turned off. Refused posts are counted in ``refused`` and not recorded in ``received``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._received: list[dict[str, Any]] = []
        self._refused: list[dict[str, Any]] = []
        self._paths: list[str] = []
        self._headers: list[dict[str, str]] = []
        # Called with each accepted body before the answer goes back (e.g. to kill the sender
        # while its message is in flight).
        self.on_accept: Callable[[dict[str, Any]], None] | None = None
        self._refuse_next = 0
        self._refuse_all = False
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> Self:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                status = receiver._record(body, self.path, dict(self.headers.items()))
                if status == 200 and receiver.on_accept is not None:
                    receiver.on_accept(body)
                receiver._answer(self, status)

            def log_message(self, format: str, *args: Any) -> None:
                # Keep test output clean: the default handler writes every request to stderr.
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        server = self._server
        # A short poll interval: shutdown() waits for it, and tests stop many receivers.
        self._thread = threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.05),
            name="json-receiver",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # -- what tests use ----------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("JsonReceiver is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/"

    @property
    def received(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._received)

    @property
    def refused(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._refused)

    @property
    def paths(self) -> list[str]:
        """Request paths (with query) of every post, accepted or refused."""
        with self._lock:
            return list(self._paths)

    @property
    def headers(self) -> list[dict[str, str]]:
        """HTTP headers of each accepted post, in the order of ``received``."""
        with self._lock:
            return list(self._headers)

    def refuse(self, n: int) -> None:
        with self._lock:
            self._refuse_next = n

    def refuse_all(self, on: bool = True) -> None:
        with self._lock:
            self._refuse_all = on

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        return _wait_for_count(lambda: self.received, count, timeout, "JSON posts received")

    def _answer(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        handler.send_response(status)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _record(self, body: dict[str, Any], path: str, headers: dict[str, str]) -> int:
        with self._lock:
            self._paths.append(path)
            if self._refuse_all or self._refuse_next > 0:
                self._refuse_next = max(0, self._refuse_next - 1)
                self._refused.append(body)
                return 500
            self._received.append(body)
            self._headers.append(headers)
            return 200


class TrickleReceiver(JsonReceiver):
    """A ``json://`` listener that records each post, then answers one byte every 0.2 s
    until ``release()``: a stalled channel (no read timeout ever fires).
    ``stalled`` counts the answers being trickled right now."""

    def __init__(self) -> None:
        super().__init__()
        self._released = threading.Event()
        self._stalled = 0

    def release(self) -> None:
        self._released.set()

    @property
    def stalled(self) -> int:
        with self._lock:
            return self._stalled

    def _answer(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        with self._lock:
            self._stalled += 1
        try:
            handler.wfile.write(f"HTTP/1.1 {status} OK\r\nX-Pad: ".encode())
            handler.wfile.flush()
            while not self._released.wait(0.2):
                handler.wfile.write(b"a")
                handler.wfile.flush()
            handler.wfile.write(b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            handler.wfile.flush()
        except OSError:
            pass  # the sender gave up on the connection
        finally:
            with self._lock:
                self._stalled -= 1

    def stop(self) -> None:
        self.release()
        super().stop()


class _FreePortController(Controller):
    """aiosmtpd's Controller bound to port 0: the real port is read once the server exists."""

    def _trigger_server(self) -> None:
        assert isinstance(self.server, asyncio.Server)
        self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()  # type: ignore[no-untyped-call]


class SmtpReceiver(Running):
    """A plain local SMTP server (no TLS, no auth) that keeps every message it accepts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: list[EmailMessage] = []
        self._controller: _FreePortController | None = None

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or envelope.content or b""
        raw = content if isinstance(content, bytes) else content.encode()
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        with self._lock:
            self._messages.append(message)
        return "250 OK"

    def start(self) -> Self:
        self._controller = _FreePortController(self, hostname="127.0.0.1", port=0)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    @property
    def port(self) -> int:
        if self._controller is None:
            raise RuntimeError("SmtpReceiver is not started")
        return int(self._controller.port)

    def url(self, to: str = "ops@example.com", sender: str = "watcher@example.com") -> str:
        """An Apprise URL for this server: ``mailto://`` (not mailtos) means plain SMTP."""
        return f"mailto://127.0.0.1:{self.port}?from={sender}&to={to}&mode=insecure"

    @property
    def messages(self) -> list[EmailMessage]:
        with self._lock:
            return list(self._messages)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[EmailMessage]:
        return _wait_for_count(lambda: self.messages, count, timeout, "e-mails received")
