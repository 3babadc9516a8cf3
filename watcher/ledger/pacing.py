"""``max_rps``: HTTP requests to one endpoint spread evenly, never faster, shared by every sweep.

A pacer hands out send times ("slots") one ``spacing`` apart: the first request of a quiet
spell goes at once, each later one waits for the slot after the last one given out. There is
no burst allowance (a token bucket with a bucket of one): a provider counting requests in a
sliding one-second window never sees more than ``max_rps`` of them, wherever the window falls.

The spacing is ``(1 + HEADROOM) / max_rps``: requests leave evenly but arrive with some jitter
(the event loop, the network, the provider's own clock), and a request that arrives late next
to one that arrives early would put ``max_rps + 1`` in one window. 3.5% is 35 ms of slack per
window at any rate (half for a busy event loop, half for the network and the provider), and
costs a sweep 3.5% of its time (the issue allows 5%). Measured on a 2-core box against a server
enforcing the rate: 0 429s at 10, 25 and 100 req/s, with one or two busy processes beside the
daemon; 3% had given 429s on a loaded box with the heavier HTTP engine. When a provider still
answers 429 (its clock, its jitter), ``slow_down`` widens the spacing by 5% each time, up to
half as slow again.

``Pacer.reserve`` takes the time as a value and returns how long to wait (pure but for its
own next slot); ``Pacer.wait`` is the same with a clock and a sleep, both injected, one waiter at
a time. ``Pacer.sent`` is told when a request really left (``paced``: when httpcore starts
writing its headers, after any new connection; for the first request after a quiet spell, when
its answer came back): one that left late pushes the next slots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

HEADROOM = 0.035
SLOWEST = 1.5


class Pacer:
    """Send slots at most ``max_rps`` a second, evenly spaced."""

    def __init__(self, max_rps: float, *, headroom: float = HEADROOM) -> None:
        if max_rps <= 0:
            raise ValueError(f"max_rps must be positive: {max_rps}")
        if headroom < 0:
            raise ValueError(f"headroom must not be negative: {headroom}")
        self.max_rps = max_rps
        self.spacing = self.base_spacing = (1.0 + headroom) / max_rps
        # Seconds a request may leave after its slot without moving the next one: half the
        # slack per one-second window; the other half is for the network and the far end.
        self.tolerance = headroom / 2
        self._next: float | None = None  # the next slot, unless it is too far in the past
        self._not_before = float("-inf")  # pushed by a request that left late
        self._slot = 0.0  # the last slot given
        self.opened_spell = False  # whether the last slot was the first after a quiet spell
        self._lock = asyncio.Lock()

    def slow_down(self) -> bool:
        """A 429 despite the pace: 5% more spacing, up to ``SLOWEST`` times the first one.
        Whether it changed."""
        slower = min(self.spacing * 1.05, self.base_spacing * SLOWEST)
        changed, self.spacing = slower > self.spacing, slower
        return changed

    def reserve(self, now: float) -> float:
        """Takes the next slot; returns the seconds to wait until it (0 when it is now). After a
        quiet spell (the planned slot more than ``tolerance`` ago) the slot is now."""
        quiet = self._next is None or now - self._next > self.tolerance
        slot = max(now if quiet or self._next is None else self._next, self._not_before)
        self.opened_spell = quiet
        self._slot, self._next = slot, slot + self.spacing
        return max(0.0, slot - now)

    def sent(self, now: float, slot: float) -> None:
        """The request of ``slot`` left at ``now``. One that left more than ``tolerance`` after
        its slot (a busy event loop, a new connection) pushes the slots after it, so that the
        requests behind it do not catch up in a burst; a little lateness keeps the pace (a push
        at each millisecond late would slow every sweep down)."""
        if now - slot > self.tolerance:
            self._not_before = max(self._not_before, now + self.spacing)

    async def wait(
        self,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> float:
        """Waits for the next slot and returns it. One waiter at a time, in arrival order; a
        waiter whose slot was pushed meanwhile (``sent``) waits on."""
        async with self._lock:
            delay = self.reserve(clock())
            while delay > 0:
                await sleep(delay)
                delay = self._not_before - clock()
                if delay > 0:
                    self._slot, self._next = self._not_before, self._not_before + self.spacing
            return self._slot


async def paced(
    pacer: Pacer, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]]
) -> dict[str, Any]:
    """Waits for a request's slot; returns the httpx extensions that tell the pacer when the
    request really leaves (httpcore's trace: after a new connection, as its headers go out)."""
    slot = await pacer.wait(clock, sleep)
    opened_spell = pacer.opened_spell
    pacer.sent(clock(), slot)

    async def trace(event: str, info: dict[str, Any]) -> None:
        if event.endswith("send_request_headers.started"):
            pacer.sent(clock(), slot)
        elif opened_spell and event.endswith("receive_response_headers.complete"):
            # The first request after a quiet spell meets cold paths at both ends (a new
            # connection, a new handler): it may reach the provider as late as its answer came
            # back. Counting it so costs one round trip per spell, not a 429.
            pacer.sent(clock(), slot)

    return {"trace": trace}
