"""What a provider's front door does before a call reaches the node: a request rate, counted.

``RateWindow``: at most ``ceil(rps)`` requests accepted in any sliding window of one second (the
requests refused do not count). ``HttpCounters``: the HTTP requests the server received and the
429s it answered, for tests and the benchmark. Both thread-safe: the server answers each
connection in its own thread.
"""

from __future__ import annotations

import math
import threading
import time
from bisect import bisect_right, insort
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

WINDOW_SECONDS = 1.0


# A batch body bigger than this is refused before it is read (HTTP 413).
MAX_BODY_BYTES: Final = 50 * 1024


@dataclass(frozen=True)
class ProviderLimits:
    """What a provider's front door does to each request (``SimulatorServer``), as ``serve``
    and ``watcher simulate`` hand it on; each off (or the provider's usual) by default."""

    latency: float = 0.0  # seconds added before every answer
    enforce_rps: float | None = None  # requests/s accepted (``RateWindow``); None: no limit
    batches: bool = True  # False: batch requests refused
    batch_limit: int = 100  # calls a batch may hold (HTTP 413 beyond)
    max_body_bytes: int = MAX_BODY_BYTES

    def __post_init__(self) -> None:
        if self.latency < 0:
            raise ValueError(f"latency must not be negative: {self.latency}")


# A provider with no limit of its own beyond the usual batch size and body.
NO_LIMITS: Final = ProviderLimits()


class RateWindow:
    """At most ``ceil(rps)`` requests accepted in any window of ``WINDOW_SECONDS``, counted by
    when each arrived."""

    def __init__(self, rps: float, clock: Callable[[], float] = time.monotonic) -> None:
        if rps <= 0:
            raise ValueError(f"enforce_rps must be positive: {rps}")
        self.rps = rps
        self._limit = math.ceil(rps * WINDOW_SECONDS)  # 2.5: 0, 0.4 and 0.8 s in one window
        self.clock = clock
        self._accepted: list[float] = []  # arrivals, in order
        self._lock = threading.Lock()

    def admit(self, arrived: float | None = None) -> int | None:
        """None when a request that ``arrived`` then (read from ``clock`` as it came in; now
        when None) is accepted (and counted); else the whole seconds the client should wait
        (``Retry-After``: until the oldest request leaves the window). A provider counts a
        request at its door: the server's threads take turns at the GIL, and counting it only
        when its thread got round to it (its body read and parsed) would bunch requests that
        arrived evenly."""
        with self._lock:
            now = self.clock() if arrived is None else arrived
            accepted = self._accepted
            # Threads may ask out of the order their requests arrived in: some history is kept
            # behind the window.
            del accepted[: bisect_right(accepted, now - 2 * WINDOW_SECONDS)]
            start = bisect_right(accepted, now - WINDOW_SECONDS)
            within = bisect_right(accepted, now) - start
            if within < self._limit:
                insort(accepted, now)
                return None
            return max(1, math.ceil(accepted[start] + WINDOW_SECONDS - now))


@dataclass(frozen=True)
class HttpCounts:
    requests: int  # HTTP requests received (a batch is one)
    too_many: int  # of them answered 429 by ``enforce_rps``
    batches_refused: int  # batch requests refused because ``batches`` is False


class HttpCounters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests = self._too_many = self._batches_refused = 0

    def request(self) -> None:
        with self._lock:
            self._requests += 1

    def too_many(self) -> None:
        with self._lock:
            self._too_many += 1

    def batch_refused(self) -> None:
        with self._lock:
            self._batches_refused += 1

    def snapshot(self) -> HttpCounts:
        with self._lock:
            return HttpCounts(self._requests, self._too_many, self._batches_refused)

    def clear(self) -> None:
        with self._lock:
            self._requests = self._too_many = self._batches_refused = 0
