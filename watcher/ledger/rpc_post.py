"""The RpcClient's one HTTP request (``_post``): to one endpoint, under the concurrency cap and
in its slot of the endpoint's pacer; the decoded JSON body of a 2xx answer, or a typed error. The
single calls (``watcher.ledger.rpc``) and the batches (``watcher.ledger.rpc_batch``) are both
sent through it, with ids from ``_new_id``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

import httpx

from watcher.core.errors import BadResponse, RpcTimeout
from watcher.ledger.batching import BatchesOff
from watcher.ledger.pacing import paced
from watcher.ledger.retrying import RetryRounds
from watcher.ledger.transport import Endpoint
from watcher.ledger.wire import decode_json, describe, encode_json, http_error, snippet


class HttpPost(RetryRounds):
    _semaphore: asyncio.Semaphore
    _next_id: int
    on_request: Callable[[str, float], None] | None

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def _post(
        self,
        endpoint: Endpoint,
        method: str,
        payload: Any,
        on_send: Callable[[], None] | None = None,
    ) -> tuple[Any, Mapping[str, str]]:
        """One HTTP request to ``endpoint``; the decoded JSON body of a 2xx answer, or a typed
        error."""
        batch = isinstance(payload, list)
        try:
            async with self._semaphore:
                if batch and not endpoint.batches:
                    raise BatchesOff  # found refusing batches while this one waited: not sent
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
                    self.stats.requests += 1
                    started = time.monotonic()
                    response = await endpoint.post_json(encode_json(payload), extensions)
                    if self.on_request is not None:
                        self.on_request(method, time.monotonic() - started)
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
