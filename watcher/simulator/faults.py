"""Scripted failures of the simulated endpoint, consumed one per request (or per call).

Two families:

- HTTP faults hit a whole HTTP request (a batch included): ``http_429``, ``http_502_html``,
  ``http_503_html``, ``garbage``, ``truncated_json`` and ``timeout``. One injected fault with
  ``count=N`` spoils the next N HTTP requests that carry a call of ``method`` (any method when
  ``method`` is None).
- Call faults replace one call's answer inside an otherwise good response (HTTP 200):
  ``rpc_error``, ``rpc_429`` and ``wrong_shape``. ``count=N`` spoils the next N matching calls.
- Fuzz faults (for ``bench/soak.py fuzz``): ``raw_http`` answers a whole request with the given
  ``body``, ``status`` and ``content_type``; ``rewrite_result`` passes one call's real result
  text through ``rewrite`` (a function ``str -> str``) and sends what it returns verbatim as
  the result, valid JSON or not.

A third, for answers that are well-formed JSON-RPC but wrong (fuzzing the daemon's judgement):
``rewrite(method, fn)`` passes one call's decoded result through ``fn`` and answers what it
returns (``FaultPlan.rewrite``; in-process only, the function is Python).

And a race on cue: ``before(method, fn)`` runs ``fn()`` just before the next call of ``method``
is answered (in-process only), e.g. a transfer landing between a signature page and the balance
read that follows it.

Faults are taken in injection order: the oldest matching fault wins. ``skip=N`` lets the first N
matching requests (or calls) through before the fault starts, e.g. to fail the second page of a
paged read. ``for_seconds=S`` spoils every matching request (or call) for S seconds instead of N
of them (``watcher simulate fault http_503_html --for 30s``); a ``timeout`` fault with a short
``seconds`` is a slow endpoint (``watcher simulate slow --delay 2s``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

HTTP_FAULTS = frozenset(
    {
        "http_429",
        "http_502_html",
        "http_503_html",
        "garbage",
        "truncated_json",
        "timeout",
        "raw_http",
    }
)
CALL_FAULTS = frozenset({"rpc_error", "rpc_429", "wrong_shape", "rewrite_result"})
FAULT_KINDS = HTTP_FAULTS | CALL_FAULTS
# Options each kind understands, with their defaults.
_DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    "http_429": {"retry_after": 1},
    "http_502_html": {},
    "http_503_html": {},
    "garbage": {},
    "truncated_json": {},
    "timeout": {"seconds": 30.0},
    "rpc_error": {
        "code": -32005,
        "message": "Node is behind by 42 slots",
        "data": {"numSlotsBehind": 42},
    },
    "rpc_429": {},
    "wrong_shape": {},
    "raw_http": {"body": "", "status": 200, "content_type": "application/json"},
    "rewrite_result": {"rewrite": None},
}


@dataclass(frozen=True)
class Fault:
    kind: str
    method: str | None
    options: dict[str, Any]


@dataclass
class _Pending:
    fault: Fault
    remaining: int
    skip: int = 0
    until: float | None = None  # a timed fault: every match until then (clock time)


@dataclass
class _Cue:
    method: str
    fn: Callable[[], object]
    remaining: int


class FaultPlan:
    """Thread-safe queue of faults; the server takes them as requests arrive."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pending: list[_Pending] = []
        self._cues: list[_Cue] = []
        self._ignore_until = False
        self._lock = threading.Lock()

    def inject(
        self,
        kind: str,
        *,
        method: str | None = None,
        count: int = 1,
        skip: int = 0,
        for_seconds: float | None = None,
        **options: Any,
    ) -> None:
        """Queues a fault for the next ``count`` requests (or calls) of ``method``, after
        letting ``skip`` of them through; with ``for_seconds``, for every one of them during
        that many seconds from now (``count`` is then not read)."""
        if kind not in FAULT_KINDS:
            known = ", ".join(sorted(FAULT_KINDS))
            raise ValueError(f"unknown fault kind {kind!r}; known: {known}")
        if count < 1 or skip < 0:
            raise ValueError("count must be at least 1 and skip at least 0")
        if for_seconds is not None and for_seconds <= 0:
            raise ValueError("for_seconds must be positive")
        merged = dict(_DEFAULT_OPTIONS[kind])
        if kind == "rpc_error" and ("code" in options or "message" in options):
            merged.pop("data")  # the default data belongs to the default error only
        unknown = set(options) - set(_DEFAULT_OPTIONS[kind])
        if unknown:
            raise ValueError(f"fault {kind!r} takes no option(s) {', '.join(sorted(unknown))}")
        merged.update(options)
        with self._lock:
            until = None if for_seconds is None else self._clock() + for_seconds
            self._pending.append(_Pending(Fault(kind, method, merged), count, skip, until))

    def rewrite(
        self, method: str, fn: Callable[[Any], Any], *, count: int = 1, skip: int = 0
    ) -> None:
        """The next ``count`` calls of ``method`` (after ``skip``) answer ``fn(result)``: the
        result the ledger would give, decoded, rewritten by ``fn`` (which may mutate it)."""
        if count < 1 or skip < 0:
            raise ValueError("count must be at least 1 and skip at least 0")
        with self._lock:
            fault = Fault("rewrite_result", method, {"rewrite": _on_decoded(fn)})
            self._pending.append(_Pending(fault, count, skip))

    def before(self, method: str, fn: Callable[[], object], *, count: int = 1) -> None:
        """Runs ``fn()`` before each of the next ``count`` calls of ``method`` is answered (its
        return value is ignored): the ledger changes between a client's calls, on cue."""
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._lock:
            self._cues.append(_Cue(method, fn, count))

    def take_cues(self, method: str) -> list[Callable[[], object]]:
        """What is to run before this call of ``method`` is answered (oldest first)."""
        with self._lock:
            due = [cue for cue in self._cues if cue.method == method]
            for cue in due:
                cue.remaining -= 1
            self._cues = [cue for cue in self._cues if cue.remaining > 0]
            return [cue.fn for cue in due]

    @property
    def ignore_until(self) -> bool:
        """When True, getSignaturesForAddress ignores ``until`` (a node lagging behind a
        load balancer does)."""
        with self._lock:
            return self._ignore_until

    @ignore_until.setter
    def ignore_until(self, value: bool) -> None:
        with self._lock:
            self._ignore_until = value

    def clear(self) -> None:
        """Drop every pending fault and honour ``until`` again."""
        with self._lock:
            self._pending.clear()
            self._cues.clear()
            self._ignore_until = False

    def pending(self) -> int:
        """How many faulty requests/calls are still queued (sum of remaining counts; a timed
        fault counts one while it lasts)."""
        with self._lock:
            self._expire()
            return sum(item.remaining for item in self._pending)

    def take_http(self, methods: Iterable[str]) -> Fault | None:
        """The HTTP fault for a request carrying calls of ``methods``, if one is due."""
        return self._take(HTTP_FAULTS, set(methods))

    def take_call(self, method: str) -> Fault | None:
        """The call fault for one call of ``method``, if one is due."""
        return self._take(CALL_FAULTS, {method})

    def _take(self, kinds: frozenset[str], methods: set[str]) -> Fault | None:
        with self._lock:
            self._expire()
            for item in self._pending:
                fault = item.fault
                if fault.kind in kinds and (fault.method is None or fault.method in methods):
                    if item.skip:
                        item.skip -= 1
                        return None
                    if item.until is not None:  # timed: it lasts, whatever the count
                        return fault
                    item.remaining -= 1
                    if item.remaining == 0:
                        self._pending.remove(item)
                    return fault
        return None

    def _expire(self) -> None:
        """Drops the timed faults whose time is over (the lock held)."""
        now = self._clock()
        self._pending = [item for item in self._pending if item.until is None or now < item.until]


def _on_decoded(fn: Callable[[Any], Any]) -> Callable[[str], str]:
    """``rewrite_result`` works on the result's text; ``rewrite`` callers work on its value."""

    def rewrite(text: str) -> str:
        return json.dumps(fn(json.loads(text)), separators=(",", ":"), ensure_ascii=False)

    return rewrite
