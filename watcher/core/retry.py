"""The pauses of a loop that retries until it works: ``first`` seconds, then twice the last, at
most ``longest``; a success starts them over (``reset``). Not for RPC calls, whose rounds of
attempts and jittered backoff are ``watcher.ledger.retrying``'s, nor for a delivery's next try,
kept in the outbox (``watcher.delivery.outbox``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class RetryPauses:
    first: float
    longest: float
    _next: float = field(init=False)

    def __post_init__(self) -> None:
        self._next = self.first

    def next(self) -> float:
        """The pause before the next try (each one twice the last, at most ``longest``)."""
        pause = self._next
        self._next = min(pause * 2, self.longest)
        return pause

    async def sleep(self) -> None:
        await asyncio.sleep(self.next())

    def reset(self) -> None:
        """A try worked: the next failure pauses ``first`` again."""
        self._next = self.first
