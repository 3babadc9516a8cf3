"""The RpcClient's batch path: many calls of one method in JSON-RPC batches (``call_batch``,
and the ``Batcher``'s sends), each call settled on its own; an endpoint that refuses batches is
told once in the log and served single calls from then on. Mixed into
``watcher.ledger.rpc.RpcClient``, whose retry loop and HTTP post it uses."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import structlog
from pydantic import TypeAdapter

from watcher.core.errors import BadResponse, RpcError, TransientRpcError
from watcher.ledger.batching import BatchesOff, refuses_batches
from watcher.ledger.rpc_post import HttpPost
from watcher.ledger.transport import Endpoint
from watcher.ledger.unknowns import target_of
from watcher.ledger.wire import BatchAnswer, adapter, envelope, unwrap, unwrap_batch, validate

log = structlog.get_logger(__name__)
T = TypeVar("T")


class BatchCalls(HttpPost):
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
        return await self._send_batch(method, params_list, model, None)

    async def _send_batch(
        self,
        method: str,
        params_list: Sequence[list[Any] | None],
        model: type[T] | TypeAdapter[T],
        on_send: Callable[[], None] | None,
    ) -> list[T | RpcError]:
        """``call_batch``; ``on_send`` is told when the first request leaves (the batcher)."""
        model_adapter = adapter(model)
        self.stats.calls += len(params_list)
        outcomes: dict[int, T | RpcError] = {}
        pending = list(range(len(params_list)))
        tries = 0

        def settle(position: int, outcome: T | RpcError) -> None:
            if isinstance(outcome, RpcError):
                outcome.attempts = tries
            outcomes[position] = outcome

        async def attempt(endpoint: Endpoint) -> None:
            nonlocal tries
            tries += 1
            ids = [self._new_id() for _ in pending]
            payload = [
                envelope(request_id, method, params_list[position])
                for request_id, position in zip(ids, pending, strict=True)
            ]
            try:
                if not endpoint.batches:
                    answers = await self._singly(endpoint, method, payload, on_send)
                else:
                    try:
                        body, headers = await self._post(endpoint, method, payload, on_send)
                        answers = unwrap_batch(method, ids, body, headers)
                    except BatchesOff:
                        answers = await self._singly(endpoint, method, payload, on_send)
                    except RpcError as err:
                        if not refuses_batches(err):
                            raise
                        self._batches_refused(endpoint, err)
                        answers = await self._singly(endpoint, method, payload, on_send)
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
                        outcome = validate(
                            method, model_adapter, answer.result, target_of(params_list[position])
                        )
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

    async def _singly(
        self,
        endpoint: Endpoint,
        method: str,
        payload: list[dict[str, Any]],
        on_send: Callable[[], None] | None,
    ) -> list[BatchAnswer]:
        """A batch's calls as single requests to ``endpoint``: its answers, in order."""

        async def one(call: dict[str, Any]) -> BatchAnswer:
            try:
                body, headers = await self._post(endpoint, method, call, on_send)
                return BatchAnswer(result=unwrap(method, call["id"], body, headers))
            except RpcError as err:
                return BatchAnswer(error=err)

        return list(await asyncio.gather(*(one(call) for call in payload)))

    def _batches_refused(self, endpoint: Endpoint, err: RpcError) -> None:
        if endpoint.batches:
            endpoint.batches = False
            log.warning(
                "rpc endpoint refuses batches; sending single calls",
                endpoint=endpoint.public_url,
                detail=err.message,
            )
