"""Rounds of attempts over the endpoints, and what a failure means for the next one.

``Retrier.run``: in a round, the endpoints in the pool's order
(``watcher.ledger.transport.EndpointPool``) until one answers or one fails in a way another
endpoint would not mend (``is_endpoint_failure``); between rounds, backoff with full jitter, or
what a 429's Retry-After asked for, until ``max_attempts`` rounds. A 429 within ``max_rps``
slows that endpoint's pacer. The error given up on carries its number of rounds
(``RpcError.attempts``); ``RpcStats`` counts errors, retries, failovers and failures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import structlog

from watcher.core.errors import (
    BadResponse,
    HttpClientError,
    NodeUnhealthy,
    RateLimited,
    RpcError,
    RpcTimeout,
    ServerError,
)
from watcher.ledger.pacing import Pacer
from watcher.ledger.transport import Endpoint, EndpointPool, Sleep
from watcher.ledger.wire import NODE_BEHIND_CODE

T = TypeVar("T")

log = structlog.get_logger("watcher.ledger.rpc")


def is_endpoint_failure(err: RpcError) -> bool:
    """Whether the endpoint failed (another may answer), rather than the call itself.

    Slot or block not available (-32004, -32007, -32009, -32014, -32016) is about the data, not
    the endpoint; an error in JSON-RPC about the request would be the same anywhere.
    """
    if isinstance(err, NodeUnhealthy):
        return err.code == NODE_BEHIND_CODE
    return isinstance(err, RpcTimeout | RateLimited | ServerError | HttpClientError | BadResponse)


@dataclass
class RpcStats:
    """Counters for logs and metrics."""

    calls: int = 0  # logical calls (each call of a batch counts)
    requests: int = 0  # HTTP requests sent
    retries: int = 0
    successes: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # failed attempts, by error class
    failures: Counter[str] = field(default_factory=Counter)  # given up (a batch once), by class
    failovers: int = 0  # attempts moved to another endpoint after an endpoint failure


@dataclass(frozen=True)
class Backoff:
    """Rounds of attempts per call, and the exponential step between them (seconds)."""

    max_attempts: int = 5
    base: float = 0.5
    max: float = 30.0


class Retrier:
    """Runs an attempt in rounds over ``pool``'s endpoints, counting in ``stats``."""

    def __init__(
        self,
        pool: EndpointPool[Endpoint],
        backoff: Backoff,
        stats: RpcStats,
        *,
        clock: Callable[[], float],
        sleep: Sleep,
        random: Callable[[], float],
    ) -> None:
        self._pool = pool
        self._backoff = backoff
        self._stats = stats
        self._clock = clock
        self._sleep = sleep
        self._random = random
        self._failing: set[str] = set()  # endpoints (public URLs) failing since their last answer

    async def run(
        self,
        method: str,
        attempt: Callable[[Endpoint], Awaitable[T]],
        only: Endpoint | None = None,
    ) -> T:
        """The first answer of ``attempt``; raises the error of the last round given up on.
        ``only``: that endpoint in every round, never another."""
        number = 0
        while True:
            number += 1
            endpoints = [only] if only is not None else self._pool.order(self._clock())
            error: RpcError | None = None
            for position, endpoint in enumerate(endpoints):
                try:
                    value = await attempt(endpoint)
                except RpcError as err:
                    self._stats.errors[type(err).__name__] += 1
                    error = err
                    if isinstance(err, RateLimited) and endpoint.pacer is not None:
                        self._slow_down(endpoint, endpoint.pacer)
                    if not is_endpoint_failure(err):
                        break
                    self._pool.failed(endpoint, self._clock())
                    if position + 1 < len(endpoints):
                        self._failover(method, err, endpoint, endpoints[position + 1])
                else:
                    self._pool.succeeded(endpoint)
                    if endpoint.public_url in self._failing:
                        self._failing.discard(endpoint.public_url)
                        log.info("rpc endpoint answering again", endpoint=endpoint.public_url)
                    return value
            assert error is not None  # a round without an answer has its error
            if not error.transient or number >= self._backoff.max_attempts:
                error.attempts = number
                self._stats.failures[type(error).__name__] += 1
                raise error
            delay = self._delay(error, number)
            # Debug only: the daemon warns once per failing round, not once per attempt.
            log.debug(
                "rpc retry",
                method=method,
                attempt=number,
                max_attempts=self._backoff.max_attempts,
                error=type(error).__name__,
                detail=error.message,
                delay=round(delay, 3),
                endpoint=endpoint.public_url,
            )
            self._stats.retries += 1
            await self._sleep(delay)

    def _failover(self, method: str, err: RpcError, failed: Endpoint, then: Endpoint) -> None:
        # A warning when an endpoint starts failing; the calls after it are failovers at debug
        # (the round's summary and /metrics count them), so an outage is not a line per call.
        first = failed.public_url not in self._failing
        self._failing.add(failed.public_url)
        (log.warning if first else log.debug)(
            "rpc failover",
            method=method,
            error=type(err).__name__,
            detail=err.message,
            endpoint=failed.public_url,
            next_endpoint=then.public_url,
        )
        self._stats.failovers += 1

    def _delay(self, err: RpcError, attempt: int) -> float:
        """Full jitter (a random share of the exponential step), or what a 429 asked for."""
        if isinstance(err, RateLimited) and err.retry_after is not None:
            return min(err.retry_after, self._backoff.max * 2)
        step = min(self._backoff.max, self._backoff.base * 2.0 ** (attempt - 1))
        return self._random() * step

    def _slow_down(self, endpoint: Endpoint, pacer: Pacer) -> None:
        first = pacer.spacing == pacer.base_spacing
        if pacer.slow_down() and first:
            log.warning(
                "rpc endpoint answered 429 within max_rps; pacing it slower",
                endpoint=endpoint.public_url,
                max_rps=pacer.max_rps,
            )
