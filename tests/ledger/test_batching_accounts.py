"""AccountBatcher (``watcher.ledger.batching``): the reads of one round become getMultipleAccounts
calls of at most 100 keys, and an answer wakes its polls a few per turn of the event loop, not all
at once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from watcher.ledger.batching import WAKE_PER_TURN, AccountBatcher, AccountRead


class Reader:
    """Answers getMultipleAccounts: no such account, at slot 7; keeps the keys of each call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def get_multiple_accounts(self, keys: Sequence[str]) -> Any:
        self.calls.append(list(keys))
        return SimpleNamespace(value=[None] * len(keys), context=SimpleNamespace(slot=7))


async def test_an_answer_of_250_keys_wakes_its_polls_a_few_per_turn() -> None:
    batcher = AccountBatcher(reader := Reader())
    turn = 0

    async def ticker() -> None:  # counts the event loop's turns
        nonlocal turn
        while True:
            await asyncio.sleep(0)
            turn += 1

    async def poll(key: str) -> tuple[AccountRead, int]:
        read = await batcher.read(key)
        return read, turn

    ticking = asyncio.ensure_future(ticker())
    try:
        results = await asyncio.gather(*(poll(f"key{i}") for i in range(250)))
    finally:
        ticking.cancel()
    assert [len(keys) for keys in reader.calls] == [100, 100, 50]
    assert {read for read, _ in results} == {AccountRead(None, 7)}
    woken_per_turn: dict[int, int] = {}
    for _, woken_at in results:
        woken_per_turn[woken_at] = woken_per_turn.get(woken_at, 0) + 1
    # Three calls answered together: at most WAKE_PER_TURN polls of each woken in one turn.
    assert max(woken_per_turn.values()) <= 3 * WAKE_PER_TURN
    assert len(woken_per_turn) >= 100 // WAKE_PER_TURN
