"""``max_rps``: HTTP requests to one endpoint spread evenly, never faster, shared by every sweep.

A pacer hands out send times ("slots") one ``spacing`` apart: the first request of a quiet
spell goes at once, each later one waits for the slot after the last one given out. There is
no burst allowance (a token bucket with a bucket of one): a provider counting requests in a
sliding one-second window never sees more than ``max_rps`` of them, wherever the window falls.

The spacing is ``(1 + HEADROOM) / max_rps``: requests leave evenly but arrive with some jitter
(the event loop, the network, the provider's own clock), and a request that arrives late next
to one that arrives early would put ``max_rps + 1`` in one window. 3% is 30 ms of slack per
window at any rate, and costs a sweep 3% of its time.

``Pacer.reserve`` takes the time as a value and returns how long to wait (pure but for its
own next slot); ``Pacer.wait`` is the same with a clock and a sleep, both injected, one waiter at
a time, and the next slot counted from when the request really left (``Pacer.sent``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

HEADROOM = 0.03


class Pacer:
    """Send slots at most ``max_rps`` a second, evenly spaced."""

    def __init__(self, max_rps: float, *, headroom: float = HEADROOM) -> None:
        if max_rps <= 0:
            raise ValueError(f"max_rps must be positive: {max_rps}")
        if headroom < 0:
            raise ValueError(f"headroom must not be negative: {headroom}")
        self.max_rps = max_rps
        self.spacing = (1.0 + headroom) / max_rps
        self._next: float | None = None  # the earliest time the next slot may be given
        self._lock = asyncio.Lock()

    def reserve(self, now: float) -> float:
        """Takes the next slot; returns the seconds to wait until it (0 when it is now)."""
        slot = now if self._next is None or self._next <= now else self._next
        self._next = slot + self.spacing
        return slot - now

    def sent(self, now: float) -> None:
        """The request left at ``now``: a late one (a busy event loop) pushes the next slot, so
        the requests behind it do not catch up in a burst."""
        if self._next is not None:
            self._next = max(self._next, now + self.spacing)

    async def wait(self, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]],
                   ) -> None:
        """Waits for the next slot. One waiter at a time, in arrival order: each slot is
        measured from when the one before it was actually taken."""
        async with self._lock:
            delay = self.reserve(clock())
            if delay > 0:
                await sleep(delay)
            self.sent(clock())

