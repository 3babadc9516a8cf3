"""Calls made together: concurrent calls coalesced into JSON-RPC batches (``Batcher``,
``rpc.batch_size``, unseen by sources), and the reads one reader's concurrent polls share
(``SharedReads``).

A caller awaits one call (``Batcher.call``): its value, or its ``RpcError``. The ``Batcher``
queues it with the other calls of the same method and model and hands them to its ``send``
(``SendBatch``: a value or an error per call, in order; one bad call fails only itself). Each
client holds its own batcher.

When a batch goes:

- **Full** (``batch_size`` calls, or the method's cap: providers cap historical calls such as
  getSignaturesForAddress at 10 per batch): at once.
- **Partial**: on the first turn of the event loop that brought no new call of that method (a
  sweep's callers, woken together by the last answer, make their next calls a turn or two
  apart), so at most ``cap`` turns after its first call; and only while no other partial batch
  of that method is waiting for its turn to be sent (the concurrency cap, the ``max_rps``
  pacer). While one waits, new calls gather into the next: under a tight rate a sweep sends
  full batches, not a trickle of small ones.

The reads one reader shares between the polls running at once (``SharedReads``, carried by the
reader as ``shared_reads``): single accounts batched into getMultipleAccounts calls of at most
100 keys (``AccountBatcher``, the one place that chunks them), and its getVoteAccounts call in
flight (``watcher.kinds.sources.vote_accounts`` decides when it is shared). A failed call fails
every read it served: never evidence.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from watcher.core.errors import HttpClientError, RpcError
from watcher.ledger.models import VoteAccounts
from watcher.ledger.models_accounts import MAX_KEYS_PER_CALL, Account, MultipleAccounts

# Calls per HTTP request unless the settings say otherwise. Measured (2,000 calls, simulator at
# 30 ms latency, 8 requests in flight, 2 cores): batch 1: 3.2-3.5 s client CPU per 1,000 calls;
# 5: 0.74 s; 10: 0.38-0.51 s and a tenth of the requests. getSignaturesForAddress (the calls that
# come by the thousand) is capped at 10 anyway; 20 to 50 help only uncapped methods, whose
# targets are few (mints, cluster-wide lists), and meet providers' batch caps (20 to 100).
DEFAULT_BATCH_SIZE: Final = 10
# Providers cap "historical" calls per batch at 10 (Helius bills them 10 credits each).
METHOD_CAPS: Final[Mapping[str, int]] = {"getSignaturesForAddress": 10}

# (method, params of each call, model, called once the request leaves) -> value or error per call
SendBatch = Callable[
    [str, Sequence[list[Any] | None], Any, Callable[[], None]], Awaitable[list[Any]]
]


@dataclass
class _Queue:
    method: str
    model: Any
    cap: int  # calls per batch (``Batcher.cap``)
    calls: deque[tuple[list[Any] | None, asyncio.Future[Any]]] = field(default_factory=deque)
    # The running loop, read when the queue was last empty: ``asyncio.get_running_loop`` is a
    # getpid system call in CPython 3.11, once per call it was 1.6% of a sweep's CPU.
    loop: asyncio.AbstractEventLoop | None = None
    partial_waiting: bool = False  # a partial batch was handed over and has not left yet
    tick_scheduled: bool = False
    calls_at_tick: int = 0  # queued calls when the last tick looked


class Batcher:
    """Coalesces concurrent calls into batches of at most ``cap(method)`` calls."""

    def __init__(
        self, send: SendBatch, batch_size: int, caps: Mapping[str, int] = METHOD_CAPS
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1: {batch_size}")
        self._send = send
        self.batch_size = batch_size
        self._caps = dict(caps)
        self._queues: dict[tuple[str, Any], _Queue] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def cap(self, method: str) -> int:
        """Calls of ``method`` per HTTP request."""
        return max(1, min(self.batch_size, self._caps.get(method, self.batch_size)))

    async def call(self, method: str, params: list[Any] | None, model: Any) -> Any:
        """The call's value; raises its ``RpcError``."""
        key = (method, model)  # list[X] is a new object each time, equal to the others
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _Queue(method, model, self.cap(method))
        if not queue.calls or queue.loop is None:
            queue.loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = queue.loop.create_future()
        queue.calls.append((params, future))
        self._kick(queue)
        return await future

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))

    @staticmethod
    def _loop(queue: _Queue) -> asyncio.AbstractEventLoop:
        return queue.loop if queue.loop is not None else asyncio.get_running_loop()

    def _kick(self, queue: _Queue) -> None:
        cap = queue.cap
        while len(queue.calls) >= cap:
            self._launch(queue, cap, partial=False)
        if queue.calls and not queue.partial_waiting and not queue.tick_scheduled:
            queue.tick_scheduled = True
            self._loop(queue).call_soon(self._tick, queue)

    def _tick(self, queue: _Queue) -> None:
        queue.tick_scheduled = False
        cap = queue.cap
        while len(queue.calls) >= cap:
            self._launch(queue, cap, partial=False)
        if queue.calls and not queue.partial_waiting:
            if len(queue.calls) > queue.calls_at_tick:
                # Still growing: callers woken in the same turn come a turn or two apart (one
                # gave the loop a turn, one read its chunk's states). Another turn, at most
                # ``cap`` in all, fills the batch instead of sending a partial one per turn.
                queue.calls_at_tick = len(queue.calls)
                queue.tick_scheduled = True
                self._loop(queue).call_soon(self._tick, queue)
                return
            self._launch(queue, len(queue.calls), partial=True)

    def _launch(self, queue: _Queue, count: int, *, partial: bool) -> None:
        calls = [queue.calls.popleft() for _ in range(count)]
        queue.calls_at_tick = 0  # the calls left start the next batch
        if partial:
            queue.partial_waiting = True
        left = False

        def on_sent() -> None:
            nonlocal left
            if partial and not left:
                left = True
                queue.partial_waiting = False
                if queue.calls:
                    self._kick(queue)

        task = self._loop(queue).create_task(self._run(queue, calls, on_sent))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(
        self,
        queue: _Queue,
        calls: list[tuple[list[Any] | None, asyncio.Future[Any]]],
        on_sent: Callable[[], None],
    ) -> None:
        try:
            outcomes = await self._send(
                queue.method, [params for params, _ in calls], queue.model, on_sent
            )
        except asyncio.CancelledError:
            for _, future in calls:
                future.cancel()
            raise
        except Exception as exc:  # a bug below: each caller sees it
            for _, future in calls:
                if not future.done():
                    future.set_exception(exc)
            return
        finally:
            on_sent()
        # Every caller of the batch woken in this turn: each steps its one poll and makes its
        # next call, so the next batch fills at once (woken one per turn, a sweep sent 6% more
        # requests, partial batches). A call serving many polls paces their waking itself
        # (``AccountBatcher``: a getMultipleAccounts of 100 keys), so that a scrape or a
        # lease renewal does not wait behind a thousand polls stepped in one turn.
        for (_, future), outcome in zip(calls, outcomes, strict=True):
            if future.done():  # its caller gave up (a cancelled sweep)
                continue
            if isinstance(outcome, RpcError):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)


def refuses_batches(err: RpcError) -> bool:
    """Whether a batch was refused as such (a provider plan without batches), not failed."""
    if isinstance(err, HttpClientError):
        return err.status in (400, 403, 405)
    return err.code == -32600


# -- the reads concurrent polls share --------------------------------------------------------------

WAKE_PER_TURN = 10  # polls a getMultipleAccounts answer wakes per turn of the event loop


def chunks(keys: Sequence[str], size: int = MAX_KEYS_PER_CALL) -> list[list[str]]:
    """Distinct keys, in order, in lists of at most ``size``."""
    distinct = list(dict.fromkeys(keys))
    return [distinct[start : start + size] for start in range(0, len(distinct), size)]


@dataclass(frozen=True)
class AccountRead:
    account: Account | None  # None: the account does not exist
    slot: int


class AccountsReader(Protocol):
    async def get_multiple_accounts(self, keys: Sequence[str]) -> MultipleAccounts: ...


class AccountBatcher:
    """Reads of single accounts made in the same round (concurrent polls) through ``reader``
    become getMultipleAccounts calls of at most 100 keys each."""

    def __init__(self, reader: AccountsReader) -> None:
        self._reader = reader
        self._pending: dict[str, asyncio.Future[AccountRead]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def read(self, key: str) -> AccountRead:
        loop = asyncio.get_running_loop()
        futures = self._pending
        if futures is None:
            futures = self._pending = {}
            task = loop.create_task(self._flush())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        future = futures.get(key)
        if future is None:
            future = futures[key] = loop.create_future()
        return await asyncio.shield(future)

    async def _flush(self) -> None:
        for _ in range(3):  # let the other polls of the round ask first
            await asyncio.sleep(0)
        futures, self._pending = self._pending or {}, None
        await asyncio.gather(*(self._call(chunk, futures) for chunk in chunks(list(futures))))

    async def _call(self, keys: list[str], futures: dict[str, asyncio.Future[AccountRead]]) -> None:
        try:
            answer = await self._reader.get_multiple_accounts(keys)
        except Exception as exc:  # handed to every waiting poll
            for key in keys:
                futures[key].set_exception(exc)
                futures[key].exception()  # retrieved here too: a cancelled poll must not warn
            return
        # A few polls woken per turn of the loop: the hundred this call serves, all at once (and
        # the other calls' of the batch with them), would hold it for tens of milliseconds.
        try:
            for index, (key, account) in enumerate(zip(keys, answer.value, strict=True)):
                if index and not index % WAKE_PER_TURN:
                    await asyncio.sleep(0)
                futures[key].set_result(AccountRead(account, answer.context.slot))
        except asyncio.CancelledError:
            for key in keys:
                futures[key].cancel()  # no-op for those answered already
            raise


class SharedReads:
    """What one reader shares between its concurrent polls; each reader holds its own."""

    def __init__(self, reader: AccountsReader) -> None:
        self.accounts = AccountBatcher(reader)
        # getVoteAccounts in flight outside a tick (None: none), forgotten once it ends.
        self.vote_accounts: asyncio.Task[VoteAccounts] | None = None
