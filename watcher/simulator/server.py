"""A real HTTP JSON-RPC server on loopback that answers like a mainnet node behind a provider.

Wire behaviour (each choice documented where a real node or provider leaves it open):

- ``POST /v3/<api_key>`` only; other verbs get 405. A wrong or missing key gets HTTP 401 with
  ``{"jsonrpc":"2.0","error":{"code":-32001,"message":"Unauthorized"},"id":null}``.
- ``Content-Type`` must be ``application/json`` (else 415, as the node's HTTP server does); a body
  over 50 KiB gets 413 (the node's ``MAX_REQUEST_BODY_SIZE``) and the connection is closed.
- JSON-RPC 2.0, compact; the envelope is ``jsonrpc``, ``result`` or ``error``, ``id``; keys inside
  results are alphabetical. A batch (array) is answered as an array in call order; a batch longer
  than ``batch_limit`` gets HTTP 413 with a -32600 error body; an empty batch a -32600 error.
  Unparseable JSON: -32700 "Parse error" (HTTP 200). A call without ``id`` is a notification and
  gets no answer.
- Provider limits (``watcher.simulator.limits``), all off by default: ``latency`` seconds
  added before every answer (in the connection's own thread: other requests go on),
  ``enforce_rps`` requests/s accepted in a sliding one-second window (beyond: HTTP 429 with
  ``Retry-After``, counted), and ``batches=False`` to refuse batch requests as many providers'
  plans do (HTTP 400, -32600 "batch requests are not supported"). ``counts()`` gives the HTTP
  requests received and the 429s answered.
- Faults from ``ledger.faults``, or the server's own ``faults`` (two servers on one ledger that
  fail apart; see ``faults.py``), are applied after authentication.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final
from urllib.parse import urlsplit

from watcher.simulator.faults import Fault, FaultPlan
from watcher.simulator.ledger import Ledger
from watcher.simulator.limits import (
    MAX_BODY_BYTES,
    NO_LIMITS,
    HttpCounters,
    HttpCounts,
    ProviderLimits,
    RateWindow,
)
from watcher.simulator.methods import RpcMethods
from watcher.simulator.params import RpcError
from watcher.simulator.request_log import RecordedRequest, RequestLog

CONTROL_PATH: Final = "/control"
_JSON_TYPE: Final = "application/json; charset=utf-8"
_HTML_TYPE: Final = "text/html"
_UNAUTHORIZED: Final = {"code": -32001, "message": "Unauthorized"}
_TOO_MANY: Final = {
    "code": 429,
    "message": "Too many requests for a specific RPC call, contact your app developer or "
    "support@rpcpool.com.",
}
_NO_BATCHES: Final = {"code": -32600, "message": "batch requests are not supported"}
_HTML_PAGES: Final = {
    502: "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 "
    "Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
    503: "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>"
    "\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx"
    "</center>\r\n</body>\r\n</html>\r\n",
}
_GARBAGE: Final = (
    "upstream connect error or disconnect/reset before headers. "
    "reset reason: connection termination"
)


def _envelope(id_text: str, *, result_text: str | None = None, error: Any = None) -> str:
    if result_text is not None:
        return f'{{"jsonrpc":"2.0","result":{result_text},"id":{id_text}}}'
    error_text = json.dumps(error, separators=(",", ":"), ensure_ascii=False)
    return f'{{"jsonrpc":"2.0","error":{error_text},"id":{id_text}}}'


def _error_body(error: Any) -> str:
    return _envelope("null", error=error)


def _wrong_shape(result_text: str) -> str:
    # Same envelope, result of the other JSON type: a list becomes an object and vice versa.
    return f'{{"items":{result_text}}}' if result_text.startswith("[") else f"[{result_text}]"


def _rewritten(fault: Fault, result_text: str) -> str:
    # rewrite_result: the fuzz corpus's function of the real result, sent as it returns it.
    rewrite = fault.options["rewrite"]
    return result_text if rewrite is None else str(rewrite(result_text))


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog is 5: a client opening 16 connections at once had some
    # reset (a bench peer died of httpx.ReadError); a node's listener takes far more.
    request_queue_size = 1024
    simulator: SimulatorServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout tests) closes its socket: not worth a traceback.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx pools connections
    # Headers and body go out in two writes: with Nagle's algorithm the body would wait for the
    # client's delayed ACK (~40 ms an answer), which no real node does.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request line holds the API key: never log it

    def _discard(self, length: int, limit: int = 16 * 1024 * 1024) -> None:
        remaining = min(length, limit)
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 65536))
            if not chunk:
                return
            remaining -= len(chunk)

    def _send(
        self,
        status: int,
        body: str,
        content_type: str = _JSON_TYPE,
        headers: dict[str, str] | None = None,
    ) -> None:
        raw = body.encode()
        latency = self.server.simulator.limits.latency
        if latency > 0 and self.server.simulator.stopping.wait(latency):
            self.close_connection = True
            return
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(raw)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            # Say so: a client that pools connections must not reuse this one.
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(raw)

    def _control(self, control: Callable[[Any], str]) -> None:
        length_text = self.headers.get("Content-Length", "")
        length = int(length_text) if length_text.isdigit() else 0
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._send(413, json.dumps({"error": "action too large"}))
            return
        try:
            done = control(json.loads(self.rfile.read(length) or b"null"))
        except ValueError as exc:  # json's decode errors included
            self._send(400, json.dumps({"error": str(exc)}))
            return
        self._send(200, json.dumps({"done": done}))

    def _refuse_verb(self) -> None:
        self.close_connection = True
        self._send(
            405,
            "Used HTTP Method is not allowed. POST or OPTIONS is required",
            "text/plain",
            {"Allow": "POST"},
        )

    do_GET = do_PUT = do_DELETE = do_PATCH = _refuse_verb

    def do_POST(self) -> None:
        sim = self.server.simulator
        if sim.control is not None and urlsplit(self.path).path == CONTROL_PATH:
            self._control(sim.control)
            return
        sim.http_counters.request()
        arrived = None if sim.rate_window is None else sim.rate_window.clock()
        path_ok = urlsplit(self.path).path == sim.path
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            self.close_connection = True
            self._send(411, "Length Required", "text/plain")
            return
        if int(length_text) > sim.limits.max_body_bytes:
            # Read the body before refusing it (bounded): answering mid-upload makes the client
            # see a reset instead of the 413. The connection is closed afterwards all the same.
            self._discard(int(length_text))
            self.close_connection = True
            self._send(413, "Payload Too Large", "text/plain")
            return
        body = self.rfile.read(int(length_text))
        try:
            parsed: Any = json.loads(body)
        except ValueError:
            parsed = None
        calls = parsed if isinstance(parsed, list) else [parsed]
        sim.log.add([self._record(call, path_ok, len(calls)) for call in calls])
        if not path_ok:
            self._send(401, _error_body(_UNAUTHORIZED))
            return
        if sim.rate_window is not None:
            retry_after = sim.rate_window.admit(arrived)
            if retry_after is not None:
                sim.http_counters.too_many()
                self._send(429, _error_body(_TOO_MANY), headers={"Retry-After": str(retry_after)})
                return
        content_type = self.headers.get("Content-Type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            self._send(
                415,
                "Supplied content type is not allowed. Content-Type: application/json is required",
                "text/plain",
            )
            return
        if parsed is None and body.strip() != b"null":
            self._send(200, _error_body({"code": -32700, "message": "Parse error"}))
            return
        if isinstance(parsed, list) and not parsed:
            self._send(200, _error_body({"code": -32600, "message": "Invalid request"}))
            return
        if isinstance(parsed, list) and not sim.limits.batches:
            sim.http_counters.batch_refused()
            self._send(400, _error_body(_NO_BATCHES))
            return
        if len(calls) > sim.limits.batch_limit:
            self._send(
                413,
                _error_body(
                    {
                        "code": -32600,
                        "message": (
                            f"Batch of {len(calls)} calls exceeds the limit of "
                            f"{sim.limits.batch_limit}"
                        ),
                    }
                ),
            )
            return
        methods = [
            call["method"]
            for call in calls
            if isinstance(call, dict) and isinstance(call.get("method"), str)
        ]
        fault = sim.faults.take_http(methods)
        if fault is not None and fault.kind != "truncated_json":
            if fault.kind != "timeout":
                self._send_http_fault(fault)
                return
            if sim.stopping.wait(float(fault.options["seconds"])):
                return
        answers = [text for text in map(sim.answer_call, calls) if text is not None]
        text = ("[" + ",".join(answers) + "]") if isinstance(parsed, list) else "".join(answers)
        if fault is not None:  # truncated_json: the real answer, cut in half
            text = text.encode()[: max(1, len(text.encode()) // 2)].decode(errors="ignore")
        self._send(200, text)

    def _send_http_fault(self, fault: Fault) -> None:
        if fault.kind == "http_429":
            self._send(
                429,
                _error_body(_TOO_MANY),
                headers={"Retry-After": str(fault.options["retry_after"])},
            )
        elif fault.kind in ("http_502_html", "http_503_html"):
            status = 502 if fault.kind == "http_502_html" else 503
            self._send(status, _HTML_PAGES[status], _HTML_TYPE)
        elif fault.kind == "raw_http":
            self._send_raw(fault)
        else:  # garbage: claims JSON, is not
            self._send(200, _GARBAGE)

    def _send_raw(self, fault: Fault) -> None:
        """``raw_http``: whatever body, status and content type the fuzz corpus asks for."""
        self._send(
            int(fault.options["status"]),
            str(fault.options["body"]),
            str(fault.options["content_type"]),
        )

    @staticmethod
    def _record(call: Any, path_ok: bool, batch_size: int) -> RecordedRequest:
        method = call.get("method") if isinstance(call, dict) else None
        params = call.get("params") if isinstance(call, dict) else None
        return RecordedRequest(
            method if isinstance(method, str) else "", params, path_ok, time.time(), batch_size
        )


class SimulatorServer:
    """The simulator's HTTP endpoint in a daemon thread. Use as a context manager."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str = "sim-key",
        limits: ProviderLimits = NO_LIMITS,
        faults: FaultPlan | None = None,
        clock: Callable[[], float] = time.monotonic,
        control: Callable[[Any], str] | None = None,
    ) -> None:
        self.ledger = ledger
        # The ledger's faults, or this server's own: two servers on one ledger failing apart.
        self.faults = ledger.faults if faults is None else faults
        self.host, self.api_key = host, api_key
        self.path = f"/v3/{api_key}"
        self.limits = limits
        self.methods = RpcMethods(ledger)
        self.log = RequestLog()
        rps = limits.enforce_rps
        self.rate_window = None if rps is None else RateWindow(rps, clock)
        self.http_counters = HttpCounters()
        # POST /control: one change to the ledger (JSON), applied by ``control``, which says
        # what it did or raises ValueError (``watcher simulate tx ...``); off when None.
        self.control = control
        self.stopping = threading.Event()
        self._requested_port = port
        self._http: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Binds, serves in a daemon thread, and returns the RPC URL (key included)."""
        if self._http is not None:
            return self.url
        self.stopping.clear()
        self._http = _HttpServer((self.host, self._requested_port), _Handler)
        self._http.simulator = self
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="ledger-simulator",
            daemon=True,
        )
        self._thread.start()
        return self.url

    def stop(self) -> None:
        self.stopping.set()  # wakes handlers sleeping in a "timeout" fault
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._http = self._thread = None

    def __enter__(self) -> SimulatorServer:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._http is None:
            raise RuntimeError("the simulator is not started")
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every call received so far, oldest first."""
        return self.log.snapshot()

    def count(self, method: str | None = None) -> int:
        """Calls received of ``method`` (all calls when None)."""
        return self.log.count(method)

    def counts(self) -> HttpCounts:
        """HTTP requests received (a batch is one) and 429s answered by ``enforce_rps``."""
        return self.http_counters.snapshot()

    def clear(self) -> None:
        """Forgets the calls received and the HTTP counts."""
        self.log.clear()
        self.http_counters.clear()

    def wait_for_calls(self, method: str | None, count: int, timeout: float = 5.0) -> bool:
        """Blocks until ``count`` calls of ``method`` have arrived; False on timeout."""
        return self.log.wait_for(method, count, timeout)

    def answer_call(self, call: Any) -> str | None:
        """One call's envelope text; None for a notification (no ``id``)."""
        if (
            not isinstance(call, dict)
            or call.get("jsonrpc") != "2.0"
            or not isinstance(call.get("method"), str)
        ):
            call_id = call.get("id") if isinstance(call, dict) else None
            return _envelope(
                json.dumps(call_id), error={"code": -32600, "message": "Invalid request"}
            )
        if "id" not in call:
            return None
        id_text = json.dumps(call["id"], ensure_ascii=False)
        method: str = call["method"]
        for cue in self.faults.take_cues(method):
            cue()  # the ledger changes just before this call reads it
        fault = self.faults.take_call(method)
        if fault is not None and fault.kind == "rpc_error":
            error = RpcError(
                fault.options["code"], fault.options["message"], fault.options.get("data")
            )
            return _envelope(id_text, error=error.to_json())
        if fault is not None and fault.kind == "rpc_429":
            return _envelope(id_text, error=_TOO_MANY)
        try:
            result_text = self.methods.answer(method, call.get("params"))
        except RpcError as error:
            return _envelope(id_text, error=error.to_json())
        if fault is not None and fault.kind == "rewrite_result":
            result_text = _rewritten(fault, result_text)
        elif fault is not None:  # wrong_shape
            result_text = _wrong_shape(result_text)
        return _envelope(id_text, result_text=result_text)
