"""The JSON-RPC client: the only module that speaks the ledger's wire protocol.

One ``httpx.AsyncClient``, increasing request ids, a concurrency cap, timeouts, retries with
exponential backoff and full jitter for transient failures, typed errors (``watcher.core.errors``)
for
the rest, and answers parsed into pydantic models: an answer that does not fit is an error.

The API key lives in the URL path. httpx logs full URLs and copies them into its exceptions
(encode/httpx#2760), so httpx never sees the key: it is given the redacted URL and
``SecretUrlTransport``, below it, swaps the real URL in just before the bytes leave.

Seams for later: ``_post`` talks to one endpoint; failover across several endpoints would choose
the endpoint per attempt there. ``call_batch`` sends one JSON-RPC batch; chunking to a provider's
cap (20 to 100 calls) is the caller's choice.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import random as _random
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
import structlog
from pydantic import TypeAdapter, ValidationError

from watcher.core.errors import (
    BadResponse,
    HttpClientError,
    InvalidRequest,
    NodeUnhealthy,
    RateLimited,
    RpcError,
    RpcTimeout,
    ServerError,
    TransientRpcError,
)
from watcher.core.redact import REDACTOR, split_rpc_url
from watcher.ledger.models import (
    ClusterNode,
    SignatureEntry,
    TokenAmount,
    TokenLargestAccounts,
    VoteAccounts,
)

T = TypeVar("T")

log = structlog.get_logger(__name__)

# httpx logs every request URL at INFO; keep both libraries quiet unless something is wrong.
for _noisy in ("httpx", "httpcore"):
    logging.getLogger(_noisy).setLevel(logging.WARNING)

COMMITMENTS = ("processed", "confirmed", "finalized")
MAX_SIGNATURES_LIMIT = 1000
RATE_LIMITED_CODE = 429
NODE_BEHIND_CODE = -32005
# Slot or block not available yet, node behind, min context slot not reached: another try (or
# another node behind the balancer) can answer.
NODE_UNHEALTHY_CODES = frozenset({-32004, NODE_BEHIND_CODE, -32007, -32009, -32014, -32016})
_SNIPPET_CHARS = 200

_SIGNATURES = TypeAdapter(list[SignatureEntry])
_LARGEST_ACCOUNTS = TypeAdapter(TokenLargestAccounts)
_VOTE_ACCOUNTS = TypeAdapter(VoteAccounts)
_CLUSTER_NODES = TypeAdapter(list[ClusterNode])

Sleep = Callable[[float], Awaitable[None]]


@dataclass
class RpcStats:
    """Counters for logs and metrics."""

    calls: int = 0  # logical calls (each call of a batch counts)
    requests: int = 0  # HTTP requests sent
    retries: int = 0
    successes: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # failed attempts, by error class
    failures: Counter[str] = field(default_factory=Counter)  # given up (a batch once), by class


class SecretUrlTransport(httpx.AsyncBaseTransport):
    """Rewrites requests for ``placeholder`` to ``real`` just before they are sent.

    Everything above this layer (httpx's logs, exceptions, ``response.request``) holds the
    placeholder. Errors from below are re-raised with their text redacted and without the
    original (which may carry the real request) attached.
    """

    def __init__(self, placeholder: str, real: str, inner: httpx.AsyncBaseTransport) -> None:
        self._placeholder = httpx.URL(placeholder)
        real_url = httpx.URL(real)
        self._real = real_url.copy_with(userinfo=b"")
        # httpx turns URL userinfo into basic auth in the client, above us: do it here instead.
        self._authorization: str | None = None
        if real_url.userinfo:
            pair = f"{real_url.username}:{real_url.password}".encode()
            self._authorization = "Basic " + base64.b64encode(pair).decode()
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url != self._placeholder:
            return await self._inner.handle_async_request(request)
        headers = request.headers.copy()
        if self._authorization:
            headers["Authorization"] = self._authorization
        outgoing = httpx.Request(
            request.method,
            self._real,
            headers=headers,
            stream=request.stream,
            extensions=request.extensions,
        )
        try:
            return await self._inner.handle_async_request(outgoing)
        except httpx.TransportError as exc:
            scrubbed = type(exc)(REDACTOR.redact(str(exc)))
        # Raised outside the except block, so the original is not chained as its context.
        raise scrubbed

    async def aclose(self) -> None:
        await self._inner.aclose()


class RpcClient:
    """Implements ``watcher.kinds.base.LedgerReader`` over HTTP JSON-RPC 2.0."""

    def __init__(
        self,
        url: str,
        *,
        commitment: str = "finalized",
        timeout: float = 10.0,
        max_attempts: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_concurrency: int = 8,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if commitment not in COMMITMENTS:
            raise ValueError(f"commitment must be one of {', '.join(COMMITMENTS)}: {commitment!r}")
        if max_attempts < 1 or max_concurrency < 1:
            raise ValueError("max_attempts and max_concurrency must be at least 1")
        public_url, secrets = split_rpc_url(url)
        REDACTOR.add(*secrets)
        self.public_url = public_url
        try:
            scheme = httpx.URL(url).scheme
            # What httpx sees: the public form without userinfo (httpx would make basic auth of it).
            self._placeholder = str(httpx.URL(public_url).copy_with(userinfo=b""))
            inner = transport or httpx.AsyncHTTPTransport(
                limits=httpx.Limits(max_connections=max_concurrency)
            )
            wrapped = SecretUrlTransport(self._placeholder, url, inner)
        except httpx.InvalidURL:
            raise ValueError(f"not a valid RPC URL: {public_url}") from None
        if scheme not in ("http", "https"):
            raise ValueError(f"RPC URL must start with http:// or https://: {public_url}")
        self.commitment = commitment
        # getSignaturesForAddress refuses commitment below confirmed.
        self._signatures_commitment = "confirmed" if commitment == "processed" else commitment
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._sleep = sleep
        self._random = random
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._next_id = 0
        self._http = httpx.AsyncClient(
            transport=wrapped, timeout=httpx.Timeout(timeout), follow_redirects=False
        )
        self.stats = RpcStats()
        # Told each HTTP request's method and duration in seconds (the daemon's metrics).
        self.on_request: Callable[[str, float], None] | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the methods sources use (LedgerReader) -------------------------------------------------

    async def get_signatures_for_address(
        self,
        address: str,
        *,
        before: str | None = None,
        until: str | None = None,
        limit: int = MAX_SIGNATURES_LIMIT,
    ) -> list[SignatureEntry]:
        """Newest first; ``before`` and ``until`` are exclusive and left out when None."""
        if not 1 <= limit <= MAX_SIGNATURES_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_SIGNATURES_LIMIT}: {limit}")
        config: dict[str, Any] = {"commitment": self._signatures_commitment, "limit": limit}
        if before is not None:
            config["before"] = before
        if until is not None:
            config["until"] = until
        return await self.call("getSignaturesForAddress", [address, config], _SIGNATURES)

    async def get_token_largest_accounts(self, mint: str) -> list[TokenAmount]:
        return list((await self.get_token_largest_accounts_with_context(mint)).value)

    async def get_token_largest_accounts_with_context(self, mint: str) -> TokenLargestAccounts:
        """The answer with its context: the slot it was read at tells a stale answer."""
        params = [mint, {"commitment": self.commitment}]
        return await self.call("getTokenLargestAccounts", params, _LARGEST_ACCOUNTS)

    async def get_vote_accounts(self) -> VoteAccounts:
        # Without keepUnstakedDelinquents an unstaked delinquent would look absent, not delinquent.
        config = {"commitment": self.commitment, "keepUnstakedDelinquents": True}
        return await self.call("getVoteAccounts", [config], _VOTE_ACCOUNTS)

    async def get_cluster_nodes(self) -> list[ClusterNode]:
        return await self.call("getClusterNodes", None, _CLUSTER_NODES)

    # -- generic calls -----------------------------------------------------------------------------

    async def call(
        self, method: str, params: list[Any] | None, model: type[T] | TypeAdapter[T]
    ) -> T:
        """One call, retried while it fails transiently; ``params=None`` sends no params."""
        adapter = _adapter(model)
        self.stats.calls += 1

        async def attempt() -> T:
            request_id = self._new_id()
            body, headers = await self._post(method, _envelope(request_id, method, params))
            result = _unwrap(method, request_id, body, headers)
            return _validate(method, adapter, result)

        value = await self._retrying(method, attempt)
        self.stats.successes += 1
        return value

    async def call_batch(
        self,
        method: str,
        params_list: Sequence[list[Any] | None],
        model: type[T] | TypeAdapter[T],
    ) -> list[T | RpcError]:
        """Many calls of one method in JSON-RPC batches; never raises ``RpcError``.

        Each position of the answer holds its value or its error. Calls that fail transiently are
        sent again (alone in their batch with the other failed ones) until ``max_attempts``; a
        failure of the whole request becomes the error of every call still pending.
        """
        adapter = _adapter(model)
        self.stats.calls += len(params_list)
        outcomes: dict[int, T | RpcError] = {}
        pending = list(range(len(params_list)))
        tries = 0

        def settle(position: int, outcome: T | RpcError) -> None:
            if isinstance(outcome, RpcError):
                outcome.attempts = tries
            outcomes[position] = outcome

        async def attempt() -> None:
            nonlocal tries
            tries += 1
            ids = [self._new_id() for _ in pending]
            payload = [
                _envelope(request_id, method, params_list[position])
                for request_id, position in zip(ids, pending, strict=True)
            ]
            try:
                body, headers = await self._post(method, payload)
                answers = _unwrap_batch(method, ids, body, headers)
            except RpcError as err:
                for position in pending:
                    settle(position, err)
                raise
            failed: TransientRpcError | None = None
            for position, answer in zip(list(pending), answers, strict=True):
                outcome: T | RpcError
                if answer.error is not None:
                    outcome = answer.error
                else:
                    try:
                        outcome = _validate(method, adapter, answer.result)
                    except BadResponse as err:
                        outcome = err
                settle(position, outcome)
                if isinstance(outcome, TransientRpcError):
                    failed = outcome
                else:
                    pending.remove(position)
            if failed is not None:
                raise failed

        if pending:
            # Whatever failed for good is already in outcomes.
            with contextlib.suppress(RpcError):
                await self._retrying(method, attempt)
        self.stats.successes += sum(not isinstance(o, RpcError) for o in outcomes.values())
        return [outcomes[position] for position in range(len(params_list))]

    # -- internals --------------------------------------------------------------------------------

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def _retrying(self, method: str, attempt: Callable[[], Awaitable[T]]) -> T:
        number = 0
        while True:
            number += 1
            try:
                return await attempt()
            except RpcError as err:
                self.stats.errors[type(err).__name__] += 1
                if not err.transient or number >= self._max_attempts:
                    err.attempts = number
                    self.stats.failures[type(err).__name__] += 1
                    raise
                delay = self._delay(err, number)
                # Debug only: the daemon warns once per failing round, not once per attempt.
                log.debug(
                    "rpc retry",
                    method=method,
                    attempt=number,
                    max_attempts=self._max_attempts,
                    error=type(err).__name__,
                    detail=err.message,
                    delay=round(delay, 3),
                    endpoint=self.public_url,
                )
                self.stats.retries += 1
                await self._sleep(delay)

    def _delay(self, err: RpcError, attempt: int) -> float:
        """Full jitter (a random share of the exponential step), or what a 429 asked for."""
        if isinstance(err, RateLimited) and err.retry_after is not None:
            return min(err.retry_after, self._backoff_max * 2)
        step = min(self._backoff_max, self._backoff_base * 2.0 ** (attempt - 1))
        return self._random() * step

    async def _post(self, method: str, payload: Any) -> tuple[Any, httpx.Headers]:
        """One HTTP request; the decoded JSON body of a 2xx answer, or a typed error."""
        self.stats.requests += 1
        try:
            async with self._semaphore:
                started = time.monotonic()
                response = await self._http.post(self._placeholder, json=payload)
                if self.on_request is not None:
                    self.on_request(method, time.monotonic() - started)
        except httpx.TransportError as exc:
            raise RpcTimeout(_describe(exc), method=method) from None
        except httpx.DecodingError as exc:
            raise BadResponse(_describe(exc), method=method) from None
        status_error = _http_error(method, response)
        if status_error is not None:
            raise status_error
        try:
            return response.json(), response.headers
        except RecursionError:
            # The decoder refuses nesting deeper than the interpreter's recursion limit (about
            # 1000); no answer of the service comes close (10 levels).
            raise BadResponse("answer is nested too deeply", method=method) from None
        except ValueError:
            snippet = _snippet(response.text)
            raise BadResponse(f"answer is not JSON: {snippet!r}", method=method) from None


# -- pure helpers: building requests, reading answers ---------------------------------------------


@dataclass(frozen=True)
class _BatchAnswer:
    result: Any = None
    error: RpcError | None = None


def _adapter(model: type[T] | TypeAdapter[T]) -> TypeAdapter[T]:
    return model if isinstance(model, TypeAdapter) else TypeAdapter(model)


def _envelope(request_id: int, method: str, params: list[Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def _is_id(value: Any, request_id: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == request_id


def _unwrap(method: str, request_id: int, body: Any, headers: httpx.Headers) -> Any:
    """The result of a JSON-RPC answer to ``request_id``; raises its error as an RpcError."""
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
        raise BadResponse(f"not a JSON-RPC 2.0 answer: {_snippet(repr(body))}", method=method)
    answer_id = body.get("id")
    if "error" in body:
        # An error about an unreadable request may carry id null.
        if answer_id is not None and not _is_id(answer_id, request_id):
            raise _id_mismatch(method, answer_id, request_id)
        raise _rpc_error(method, body["error"], headers)
    if "result" not in body:
        raise BadResponse("answer has neither result nor error", method=method)
    if not _is_id(answer_id, request_id):
        raise _id_mismatch(method, answer_id, request_id)
    return body["result"]


def _id_mismatch(method: str, answer_id: Any, request_id: int) -> BadResponse:
    return BadResponse(f"answer id {answer_id!r} is not request id {request_id}", method=method)


def _unwrap_batch(
    method: str, ids: list[int], body: Any, headers: httpx.Headers
) -> list[_BatchAnswer]:
    if isinstance(body, dict) and "error" in body:
        # The whole batch was refused (rate limited, too large...).
        raise _rpc_error(method, body["error"], headers)
    if not isinstance(body, list):
        raise BadResponse(f"batch answer is not a list: {_snippet(repr(body))}", method=method)
    by_id = {
        entry["id"]: entry
        for entry in body
        if isinstance(entry, dict) and isinstance(entry.get("id"), int)
    }
    answers = []
    for request_id in ids:
        entry = by_id.get(request_id)
        try:
            if entry is None:
                raise BadResponse(f"batch answer has no entry for id {request_id}", method=method)
            answers.append(_BatchAnswer(result=_unwrap(method, request_id, entry, headers)))
        except RpcError as err:
            answers.append(_BatchAnswer(error=err))
    return answers


def _rpc_error(method: str, error: Any, headers: httpx.Headers) -> RpcError:
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return BadResponse(f"malformed JSON-RPC error: {_snippet(repr(error))}", method=method)
    code: int = error["code"]
    rpc_message = str(error.get("message", ""))
    text = f"JSON-RPC error {code}: {_snippet(rpc_message)}"
    if code == RATE_LIMITED_CODE:
        return RateLimited(text, method=method, code=code, retry_after=_retry_after(headers))
    if code in NODE_UNHEALTHY_CODES:
        data = error.get("data")
        behind = data.get("numSlotsBehind") if isinstance(data, dict) else None
        slots_behind = behind if isinstance(behind, int) else None
        return NodeUnhealthy(text, method=method, code=code, slots_behind=slots_behind)
    return InvalidRequest(text, method=method, code=code, rpc_message=rpc_message)


def _http_error(method: str, response: httpx.Response) -> RpcError | None:
    status = response.status_code
    if 200 <= status < 300:
        return None
    snippet = _snippet(response.text)
    text = f"HTTP {status} {response.reason_phrase}" + (f": {snippet}" if snippet else "")
    if status == 429:
        return RateLimited(text, method=method, retry_after=_retry_after(response.headers))
    if status >= 500:
        return ServerError(text, method=method, status=status)
    return HttpClientError(text, method=method, status=status)


def _retry_after(headers: httpx.Headers) -> float | None:
    """Retry-After in seconds; the HTTP-date form is ignored (backoff applies instead)."""
    try:
        seconds = float(headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _validate(method: str, adapter: TypeAdapter[T], result: Any) -> T:
    try:
        return adapter.validate_python(result)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(map(str, first["loc"])) or "result"
        count = exc.error_count()
        raise BadResponse(
            f"answer does not fit its model ({count} error{'s' * (count > 1)}): "
            f"{where}: {first['msg']}",
            method=method,
        ) from None


_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def _snippet(text: str) -> str:
    """A short one-line extract of a body (HTML tags dropped), for error messages."""
    flat = _SPACE.sub(" ", _TAG.sub(" ", text)).strip()
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 1] + "…"


def _describe(exc: Exception) -> str:
    detail = REDACTOR.redact(str(exc))
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
