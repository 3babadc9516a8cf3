"""The JSON-RPC wire, as pure functions: building requests, reading answers into values or typed
errors (``watcher.core.errors``). No I/O: what is sent and what came back are values here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol, TypeVar

from pydantic import TypeAdapter, ValidationError

from watcher.core.errors import (
    BadResponse,
    HttpClientError,
    InvalidRequest,
    NodeUnhealthy,
    RateLimited,
    RpcError,
    ServerError,
)
from watcher.core.fastjson import decode_json as decode_json
from watcher.core.fastjson import encode_json as encode_json
from watcher.core.redact import REDACTOR
from watcher.ledger.models import FROM_WIRE, UNKNOWN_FIELDS, UNKNOWN_FIELDS_LOG, UnknownField

T = TypeVar("T")

RATE_LIMITED_CODE = 429
NODE_BEHIND_CODE = -32005
# Slot or block not available yet, node behind, min context slot not reached: another try (or
# another node behind the balancer) can answer.
NODE_UNHEALTHY_CODES = frozenset({-32004, NODE_BEHIND_CODE, -32007, -32009, -32014, -32016})
_SNIPPET_CHARS = 200


class BatchAnswer(NamedTuple):
    """One call's answer in a batch: its result, or its error. (A tuple: one is made per call
    of every batch.)"""

    result: Any = None
    error: RpcError | None = None


class HttpAnswer(Protocol):
    """An HTTP answer read in full, as a poster returns it (``watcher.ledger.transport.Answer``, or
    an ``httpx.Response``). ``headers``: case-insensitive."""

    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> str: ...


def adapter(model: type[T] | TypeAdapter[T]) -> TypeAdapter[T]:
    return model if isinstance(model, TypeAdapter) else TypeAdapter(model)


def envelope(request_id: int, method: str, params: list[Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def _is_id(value: Any, request_id: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == request_id


def unwrap(method: str, request_id: int, body: Any, headers: Mapping[str, str]) -> Any:
    """The result of a JSON-RPC answer to ``request_id``; raises its error as an RpcError."""
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
        raise BadResponse(f"not a JSON-RPC 2.0 answer: {snippet(repr(body))}", method=method)
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


def unwrap_batch(
    method: str, ids: list[int], body: Any, headers: Mapping[str, str]
) -> list[BatchAnswer]:
    if isinstance(body, dict) and "error" in body:
        # The whole batch was refused (rate limited, too large...).
        raise _rpc_error(method, body["error"], headers)
    if not isinstance(body, list):
        raise BadResponse(f"batch answer is not a list: {snippet(repr(body))}", method=method)
    by_id = {
        entry["id"]: entry
        for entry in body
        if isinstance(entry, dict) and isinstance(entry.get("id"), int)
    }
    answers = []
    for request_id in ids:
        entry = by_id.get(request_id)
        if (
            entry is not None
            and "result" in entry
            and "error" not in entry
            and entry.get("jsonrpc") == "2.0"
            and type(entry["id"]) is int  # not a bool (True == 1)
        ):
            answers.append(BatchAnswer(entry["result"]))  # ``unwrap``'s, in short: most are
            continue
        try:
            if entry is None:
                raise BadResponse(f"batch answer has no entry for id {request_id}", method=method)
            answers.append(BatchAnswer(result=unwrap(method, request_id, entry, headers)))
        except RpcError as err:
            answers.append(BatchAnswer(error=err))
    return answers


def _rpc_error(method: str, error: Any, headers: Mapping[str, str]) -> RpcError:
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return BadResponse(f"malformed JSON-RPC error: {snippet(repr(error))}", method=method)
    code: int = error["code"]
    rpc_message = str(error.get("message", ""))
    text = f"JSON-RPC error {code}: {snippet(rpc_message)}"
    if code == RATE_LIMITED_CODE:
        return RateLimited(text, method=method, code=code, retry_after=_retry_after(headers))
    if code in NODE_UNHEALTHY_CODES:
        data = error.get("data")
        behind = data.get("numSlotsBehind") if isinstance(data, dict) else None
        slots_behind = behind if isinstance(behind, int) else None
        return NodeUnhealthy(text, method=method, code=code, slots_behind=slots_behind)
    return InvalidRequest(text, method=method, code=code, rpc_message=rpc_message)


def http_error(method: str, response: HttpAnswer) -> RpcError | None:
    status = response.status_code
    if 200 <= status < 300:
        return None
    extract = snippet(response.text)
    text = f"HTTP {status} {response.reason_phrase}" + (f": {extract}" if extract else "")
    if status == 429:
        return RateLimited(text, method=method, retry_after=_retry_after(response.headers))
    if status >= 500:
        return ServerError(text, method=method, status=status)
    return HttpClientError(text, method=method, status=status)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Retry-After in seconds; the HTTP-date form is ignored (backoff applies instead)."""
    try:
        seconds = float(headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def validate(
    method: str, adapter: TypeAdapter[T], result: Any, params: list[Any] | None = None
) -> T:
    """``result`` read into its model; a field the model took as unknown is logged once, with
    the address the call's ``params`` asked about (``target_of``)."""
    unknown: list[UnknownField] = []
    try:
        # The core validator itself: ``TypeAdapter.validate_python``'s wrapper is a measurable
        # share of a sweep of quiet addresses (one call per answer).
        value: T = adapter.validator.validate_python(
            result, context={FROM_WIRE: True, UNKNOWN_FIELDS: unknown}
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(map(str, first["loc"])) or "result"
        count = exc.error_count()
        raise BadResponse(
            f"answer does not fit its model ({count} error{'s' * (count > 1)}): "
            f"{where}: {first['msg']}",
            method=method,
        ) from None
    if unknown:
        UNKNOWN_FIELDS_LOG.report(method, target_of(params), unknown)
    return value


def target_of(params: list[Any] | None) -> str | None:
    """The address a call asks about (its first parameter, when a string)."""
    first = params[0] if params else None
    return first if isinstance(first, str) else None


_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def snippet(text: str) -> str:
    """A short one-line extract of a body (HTML tags dropped), for error messages."""
    flat = _SPACE.sub(" ", _TAG.sub(" ", text)).strip()
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 1] + "…"


def describe(exc: Exception) -> str:
    detail = REDACTOR.redact(str(exc))
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
