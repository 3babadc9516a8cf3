"""How a JSON-RPC call reaches an endpoint: the endpoints, the order a call tries them in, the
HTTP engine that posts to one, and the one HTTP request of a call.

``Endpoint``: one endpoint's public form (its key masked, registered with the redactor), its
pacer (``max_rps``), whether it takes batches, and its ``Poster``. A poster is given the URL
without userinfo (userinfo travels as a basic ``Authorization`` header); whatever it raises comes
up as an httpx transport error with its text redacted and nothing chained (the original may
carry the URL and its key). Production's poster is ``AiohttpPoster``; any other (a test's
scripted node) sits at the same seam and gets the same URL, headers and redaction.

``HttpRequests``: one request to one endpoint, under the client's concurrency cap and in its
slot of the endpoint's pacer; the decoded JSON body of a 2xx answer, or a typed error
(``watcher.core.errors``). It counts requests in ``RpcStats`` and tells ``on_request`` each
request's method and seconds.

The order of the endpoints
--------------------------
``EndpointPool`` keeps each endpoint's health (consecutive failures, when it may be tried
again) and gives, for one call, the order in which to try them. It takes the time as a value
(no clock of its own) and does no I/O: whoever tries the endpoints reports each outcome back
(``failed``, ``succeeded``).

The order, decided here:

1. **A due probe.** An endpoint that failed cools down (5 s after its first failure, doubling
   with each further failure in a row, at most 5 min). Once the cool-down has passed, the next
   call tries it first, and only that call: handing out the probe starts a new cool-down, so a
   sweep of many targets does not all go to an endpoint that may still be down. A probe that
   fails costs that call a failover (a refused connection: nothing; a hanging endpoint: up to
   ``rpc.timeout``), never a failed poll while another endpoint answers. A probe that answers
   makes the endpoint healthy again: a failed endpoint is retried later, never forgotten.
2. **Healthy endpoints** (no failure since they last answered), in the order of the settings:
   the first one listed is the primary, the endpoint that answered last is kept over one that
   failed since.
3. **Endpoints cooling down**, the one due soonest first: the last resort, so a call still
   reaches every endpoint before it fails.

What counts as an endpoint failure is decided in ``watcher.ledger.retrying.is_endpoint_failure``.

The HTTP engine: aiohttp, posting straight to the endpoint
----------------------------------------------------------
Measured (10,000 addresses, batches of 10, simulator at 30 ms, 2 cores): the daemon spent
0.38 s of CPU per 1,000 polls with httpx's own transport (httpcore, pure Python, on anyio),
0.27 s with aiohttp under httpx (httpx-aiohttp's transport: aiohttp's C-accelerated parser),
and less again without httpx's request and response layers around each post (``AiohttpPoster``).
Answers come back as small ``Answer`` values (what ``watcher.ledger.wire.HttpAnswer`` asks)
and failures as httpx's exceptions, so the client above reads one kind of answer whatever
poster sent it (``Poster``).

What ``AiohttpPoster`` keeps of what httpcore did:

- **The pacer's trace** (``watcher.ledger.pacing.paced``): called as the request's first
  bytes go out (its headers, with the body) and as the answer's headers arrive. aiohttp
  reports those moments to a ``TraceConfig``; the request's ``trace`` travels there in a
  context variable (aiohttp sends the request in the caller's task, the body in a task started
  there, which sees it too). An endpoint without ``max_rps`` has no pacer, and no trace config:
  aiohttp's tracing costs CPU on every request.
- **Typed errors**: aiohttp's errors become httpx's (httpx-aiohttp's mapping). ``scrubbed``
  redacts their text and turns an error the mapping leaves out into a transport error (the
  endpoint applies it to whatever its poster raises, ``Endpoint``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Final, Generic, Protocol, TypeVar

import aiohttp
import httpx
from httpx_aiohttp.transport import map_aiohttp_exceptions
from yarl import URL

from watcher.core.errors import BadResponse, RpcTimeout
from watcher.core.redact import REDACTOR, split_rpc_url
from watcher.core.version import __version__
from watcher.ledger.pacing import Pacer, paced
from watcher.ledger.wire import (
    HttpAnswer,
    decode_json,
    describe,
    encode_json,
    http_error,
    snippet,
)

# -- the order of the endpoints (see the module) ----------------------------------------------

E = TypeVar("E")

COOLDOWN_FIRST = 5.0  # seconds an endpoint rests after its first failure in a row
COOLDOWN_MAX = 300.0


@dataclass
class EndpointHealth:
    failures: int = 0  # in a row; 0: healthy
    retry_at: float = 0.0  # while failing: not tried before this (unless nothing else is left)


class EndpointPool(Generic[E]):
    """The endpoints of one client and their health; ``order`` says where a call goes."""

    def __init__(
        self,
        endpoints: Sequence[E],
        *,
        cooldown_first: float = COOLDOWN_FIRST,
        cooldown_max: float = COOLDOWN_MAX,
    ) -> None:
        if not endpoints:
            raise ValueError("at least one endpoint is needed")
        self.endpoints = tuple(endpoints)
        self._health = [EndpointHealth() for _ in self.endpoints]
        self._cooldown_first = cooldown_first
        self._cooldown_max = cooldown_max

    def health(self, endpoint: E) -> EndpointHealth:
        return self._health[self._index(endpoint)]

    def order(self, now: float) -> list[E]:
        """Every endpoint, in the order one call should try them (see the module's docstring).
        Reserves a due probe for this call."""
        for health in self._health:
            if health.failures:
                break
        else:
            return list(self.endpoints)  # all healthy (nearly every call): as configured
        probes, healthy, cooling = [], [], []
        for index, health in enumerate(self._health):
            if health.failures == 0:
                healthy.append(index)
            elif now >= health.retry_at:
                probes.append(index)
            else:
                cooling.append(index)
        probes.sort(key=lambda i: self._health[i].retry_at)
        cooling.sort(key=lambda i: self._health[i].retry_at)
        if probes:
            probe, probes = probes[0], probes[1:]
            self._health[probe].retry_at = now + self._cooldown(self._health[probe].failures)
            # Other due probes wait for a later call: they come after the healthy endpoints.
            ordered = [probe, *healthy, *probes, *cooling]
        else:
            ordered = [*healthy, *cooling]
        return [self.endpoints[i] for i in ordered]

    def succeeded(self, endpoint: E) -> None:
        health = self.health(endpoint)
        health.failures, health.retry_at = 0, 0.0

    def failed(self, endpoint: E, now: float) -> None:
        health = self.health(endpoint)
        health.failures += 1
        health.retry_at = now + self._cooldown(health.failures)

    def _cooldown(self, failures: int) -> float:
        # The doubling stops counting long before a float would overflow (an endpoint down for
        # days fails thousands of times in a row).
        doublings = min(max(failures - 1, 0), 64)
        return float(min(self._cooldown_max, self._cooldown_first * 2.0**doublings))

    def _index(self, endpoint: E) -> int:
        for index, known in enumerate(self.endpoints):
            if known is endpoint:
                return index
        raise ValueError("not an endpoint of this pool")


# -- one endpoint and its poster ------------------------------------------------------------

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class EndpointSpec:
    """One endpoint as the settings give it; ``max_rps`` None: the client's ``max_rps``."""

    url: str
    max_rps: float | None = None


class Poster(Protocol):
    """POSTs bodies to one URL; the answer read in full. ``trace`` (None: no one asked) is told
    when the request's first bytes leave and when the answer's headers arrive."""

    async def post(
        self, body: bytes, headers: Mapping[str, str], trace: Trace | None
    ) -> HttpAnswer: ...

    async def aclose(self) -> None: ...


class PosterFactory(Protocol):
    """Makes an endpoint's poster: ``url`` without userinfo, at most ``max_connections`` open,
    ``timeout`` seconds to connect and between reads, ``traced``: the endpoint has a pacer."""

    def __call__(
        self, url: str, *, max_connections: int, timeout: float, traced: bool
    ) -> Poster: ...


# -- the HTTP engine: aiohttp (see the module) ------------------------------------------------

Trace = Callable[[str, dict[str, Any]], Awaitable[None]]

# The trace of the request being sent in this task (None: no one asked).
current_trace: ContextVar[Trace | None] = ContextVar("watcher_request_trace", default=None)


TraceHook = Callable[[aiohttp.ClientSession, SimpleNamespace, Any], Awaitable[None]]


def _telling(event: str) -> TraceHook:
    """An aiohttp trace hook telling the request's ``trace`` (if any) of ``event``."""

    async def tell(_session: aiohttp.ClientSession, _ctx: SimpleNamespace, _params: Any) -> None:
        trace = current_trace.get()
        if trace is not None:
            await trace(event, {})

    return tell


# aiohttp holds the headers back and writes them with the body's first chunk, in a task of its
# own (a loop iteration later, longer when the loop is busy): that is when the request leaves.
_first_bytes_sent = _telling("http11.send_request_body.started")
_answer_headers = _telling("http11.receive_response_headers.complete")


def scrubbed(exc: Exception) -> httpx.TransportError:
    """The error to raise instead of ``exc``: its type when a transport error, its text
    redacted; anything else from the engine is a ``RemoteProtocolError``."""
    if isinstance(exc, httpx.TransportError):
        return type(exc)(REDACTOR.redact(str(exc)))
    return httpx.RemoteProtocolError(REDACTOR.redact(f"{type(exc).__name__}: {exc}"))


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer, read in full (``watcher.ledger.wire.HttpAnswer``)."""

    status_code: int
    reason_phrase: str
    headers: Mapping[str, str]  # aiohttp's: case-insensitive
    content: bytes  # decompressed (Content-Encoding undone by aiohttp)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


class AiohttpPoster:
    """POSTs bodies to one URL (the real one, key included, userinfo left out) over aiohttp's
    pool (``Poster``)."""

    def __init__(self, url: str, *, max_connections: int, timeout: float, traced: bool) -> None:
        self._url = URL(url, encoded=True)
        self._timeout = aiohttp.ClientTimeout(
            sock_connect=timeout, sock_read=timeout, connect=timeout
        )
        self._max_connections = max_connections
        self._traced = traced
        self._session: aiohttp.ClientSession | None = None

    def _new_session(self) -> aiohttp.ClientSession:
        # Made on the first request: aiohttp wants its session made inside the event loop.
        traces = None
        if self._traced:
            config = aiohttp.TraceConfig()
            config.on_request_chunk_sent.append(_first_bytes_sent)
            config.on_request_end.append(_answer_headers)
            traces = [config]
        connector = aiohttp.TCPConnector(
            limit=self._max_connections, keepalive_timeout=5.0, ssl=httpx.create_ssl_context()
        )  # httpx's TLS settings (certifi's roots), as before
        return aiohttp.ClientSession(connector=connector, trace_configs=traces)

    async def post(self, body: bytes, headers: Mapping[str, str], trace: Trace | None) -> Answer:
        """The answer, read in full (its connection back in the pool); aiohttp's errors as
        httpx's."""
        if self._session is None:
            self._session = self._new_session()
        token = current_trace.set(trace)
        try:
            with map_aiohttp_exceptions():
                async with self._session.post(
                    self._url,
                    data=body,
                    headers=headers,
                    timeout=self._timeout,
                    allow_redirects=False,
                ) as answer:
                    content = await answer.read()
                    return Answer(answer.status, answer.reason or "", answer.headers, content)
        finally:
            current_trace.reset(token)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class BatchesOff(Exception):
    """A batch about to be sent to an endpoint found refusing batches meanwhile."""


class Endpoint:
    """One endpoint: its public form, its pacer, whether it takes batches, and its poster."""

    def __init__(
        self,
        spec: EndpointSpec,
        *,
        timeout: float,
        max_concurrency: int,
        max_rps: float | None = None,
        poster: PosterFactory = AiohttpPoster,
    ) -> None:
        url = spec.url
        public_url, secrets = split_rpc_url(url)
        REDACTOR.add(*secrets)
        self.public_url = public_url
        self.max_rps = spec.max_rps if spec.max_rps is not None else max_rps
        # Every request to this endpoint waits for its slot (watcher.ledger.pacing).
        self.pacer = None if self.max_rps is None else Pacer(self.max_rps)
        self.batches = True  # False once the endpoint refused a batch: single calls from then on
        try:
            real = httpx.URL(url)
        except httpx.InvalidURL:
            raise ValueError(f"not a valid RPC URL: {public_url}") from None
        if real.scheme not in ("http", "https"):
            raise ValueError(f"RPC URL must start with http:// or https://: {public_url}")
        self._headers: Mapping[str, str] = _HEADERS
        if real.userinfo:  # basic auth, as httpx would have made of it (aiohttp's encoding)
            auth = aiohttp.encode_basic_auth(real.username, real.password, encoding="latin1")
            self._headers = {**_HEADERS, "Authorization": auth}
            real = real.copy_with(userinfo=b"")
        self._poster = poster(
            str(real),
            max_connections=max_concurrency,
            timeout=timeout,
            traced=self.pacer is not None,
        )

    async def post_json(self, body: bytes, extensions: dict[str, Any]) -> HttpAnswer:
        """POSTs a JSON body; the answer, read in full. Raises an httpx transport error whose
        text is redacted and which chains nothing."""
        try:
            return await self._poster.post(body, self._headers, extensions.get("trace"))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = scrubbed(exc)
        # Raised outside the except block, so the original is not chained as its context.
        raise error

    async def aclose(self) -> None:
        await self._poster.aclose()


_HEADERS: Final = {
    "Content-Type": "application/json",
    "Accept": "application/json",
    "Accept-Encoding": "gzip, deflate",
    "User-Agent": f"watcher/{__version__}",
}


class RequestStats(Protocol):
    requests: int


class HttpRequests:
    """One HTTP request at a time per place under the concurrency cap, paced per endpoint."""

    def __init__(
        self,
        max_concurrency: int,
        stats: RequestStats,
        *,
        clock: Callable[[], float],
        sleep: Sleep,
        on_request: Callable[[str, float], None] | None,
    ) -> None:
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._stats = stats
        self._clock = clock
        self._sleep = sleep
        self._on_request = on_request

    async def post(
        self,
        endpoint: Endpoint,
        method: str,
        payload: Any,
        on_send: Callable[[], None] | None = None,
    ) -> tuple[Any, Mapping[str, str]]:
        """The decoded JSON body of a 2xx answer and its headers, or a typed error. A batch
        (``payload`` a list) to an endpoint found refusing batches while it waited is not sent:
        ``BatchesOff``. ``on_send`` is told when the request leaves."""
        batch = isinstance(payload, list)
        try:
            async with self._semaphore:
                if batch and not endpoint.batches:
                    raise BatchesOff
                # Paced: the pacer is told when the request leaves, and when it is over.
                pacing: AbstractAsyncContextManager[dict[str, Any]] = (
                    nullcontext({})
                    if endpoint.pacer is None
                    else paced(endpoint.pacer, self._clock, self._sleep)
                )
                async with pacing as extensions:
                    if batch and not endpoint.batches:
                        raise BatchesOff
                    if on_send is not None:
                        on_send()
                    self._stats.requests += 1
                    started = time.monotonic()
                    response = await endpoint.post_json(encode_json(payload), extensions)
                    if self._on_request is not None:
                        self._on_request(method, time.monotonic() - started)
        except httpx.TransportError as exc:
            raise RpcTimeout(describe(exc), method=method) from None
        except httpx.DecodingError as exc:
            raise BadResponse(describe(exc), method=method) from None
        status_error = http_error(method, response)
        if status_error is not None:
            raise status_error
        try:
            return decode_json(response.content), response.headers
        except RecursionError:
            # The decoder refuses nesting deeper than the interpreter's recursion limit (about
            # 1000); no answer of the service comes close (10 levels).
            raise BadResponse("answer is nested too deeply", method=method) from None
        except ValueError:
            extract = snippet(response.text)
            raise BadResponse(f"answer is not JSON: {extract!r}", method=method) from None
