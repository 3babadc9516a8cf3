"""The reads one reader shares between the polls running at once (``SharedReads``, carried by
the reader as ``shared_reads``): single accounts batched into getMultipleAccounts calls of at
most 100 keys (``AccountBatcher``, the one place that chunks them), and its getVoteAccounts call
in flight (``watcher.kinds.sources.vote_accounts`` decides when it is shared). A failed call
fails every read it served: never evidence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from watcher.ledger.models import VoteAccounts
from watcher.ledger.models_accounts import MAX_KEYS_PER_CALL, Account, MultipleAccounts

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
