"""``max_rps``: HTTP requests to one endpoint spread evenly, never faster, shared by every sweep.

A pacer hands out send times ("slots") one ``spacing`` apart: the first request of a quiet
spell goes at once, each later one waits for the slot after the last one given out. There is
no burst allowance (a token bucket with a bucket of one).

The spacing is ``(1 + HEADROOM) / max_rps``: requests leave evenly but arrive with some jitter
(the event loop, the network, the provider's own clock), and a request that arrives late next
to one that arrives early would put ``max_rps + 1`` in one window. 3.5% is 35 ms of slack per
window at any rate (half for a busy event loop, half for the network and the provider), and
costs a sweep 3.5% of its time (the issue allows 5%). When a provider still answers 429 (its
clock, its jitter), ``slow_down`` widens the spacing by 5% each time, up to half as slow again.

Slots alone are not enough: they are spaced when given out, not when requests really leave. On
a loaded box the first request of a spell spent 25-55 ms opening its connection; the next one
found its slot due, left beside it, and the evenly spaced 19 after them put 21 requests in one
second at the provider (a 429 in 4 of 54 runs of the end-to-end test beside busy processes; a
request held up by a slot's length does the same mid-sweep). So the pacer also keeps a sliding
window of real departures: a request is not let go while ``ceil(max_rps)`` others left within
the last ``1 s + tolerance`` (``window``) or may still be leaving (let go, not yet out). That
holds for any window a provider counts in, however the loop or the connection pool delays a
request, as long as the network and the provider add less than ``tolerance`` of jitter; on
time it never binds (``max_rps`` slots span ``1 s + headroom``), so it costs a sweep nothing.

``Pacer.reserve`` takes the time as a value and returns how long to wait until the next slot;
``Pacer.wait`` adds the window, with a clock and a sleep, both injected, one waiter at a time,
and returns the request's ``Ticket``. The pacer is told when the request really left:
``sent`` as its headers go out (after any new connection; aiohttp writes them with the body), the
first request after a quiet spell ``answered`` (its answer came back: it met cold paths at both
ends and may have reached the provider only then), and ``done`` when it is over, whatever
happened (a request never seen leaving counts as leaving then: later is the safe side).
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

HEADROOM = 0.035
SLOWEST = 1.5
WINDOW_SECONDS = 1.0  # what providers count requests in


@dataclass(eq=False, slots=True)
class Ticket:
    """One request let go by a pacer."""

    slot: float  # when it was meant to leave
    opens_spell: bool  # the first after a quiet spell
    left: bool = False  # whether its departure is in the pacer's window yet


class Pacer:
    """Send slots at most ``max_rps`` a second, evenly spaced, and never more than
    ``ceil(max_rps)`` real departures in any ``window``."""

    def __init__(self, max_rps: float, *, headroom: float = HEADROOM) -> None:
        if max_rps <= 0:
            raise ValueError(f"max_rps must be positive: {max_rps}")
        if headroom < 0:
            raise ValueError(f"headroom must not be negative: {headroom}")
        self.max_rps = max_rps
        self.headroom = headroom
        self.spacing = self.base_spacing = (1.0 + headroom) / max_rps
        # Seconds a request may leave after its slot without moving the next one: half the
        # slack per one-second window; the other half is for the network and the far end.
        self.tolerance = headroom / 2
        self.limit = math.ceil(max_rps * WINDOW_SECONDS)
        self.window = WINDOW_SECONDS + self.tolerance
        self._next: float | None = None  # the next slot, unless it is too far in the past
        self._not_before = float("-inf")  # pushed by a request that left late
        self._slot = 0.0  # the last slot given
        self.opened_spell = False  # whether the last slot was the first after a quiet spell
        self._left: deque[float] = deque()  # departures within the window, oldest first
        self._leaving = 0  # requests let go that have not left yet
        self._lock = asyncio.Lock()

    def set_share(self, fraction: float) -> None:
        """Spend ``fraction`` (0 < fraction <= 1) of ``max_rps``: several instances share one
        provider key, each by the part of the targets it holds. A slow-down after a 429 is kept
        in proportion. The window's limit is rounded down (at least one), so that the shares
        never sum above ``max_rps``."""
        if not 0 < fraction <= 1:
            raise ValueError(f"a share of max_rps must be in (0, 1]: {fraction}")
        slowed = self.spacing / self.base_spacing
        rate = self.max_rps * fraction
        self.base_spacing = (1.0 + self.headroom) / rate
        self.spacing = self.base_spacing * slowed
        self.limit = (
            math.ceil(rate * WINDOW_SECONDS)
            if fraction == 1
            else max(1, math.floor(rate * WINDOW_SECONDS))
        )

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

    def window_wait(self, now: float) -> float:
        """Seconds until one more request may leave without ``limit + 1`` in one window: 0 when
        it may now; while only requests still leaving fill it, a spacing (then ask again)."""
        while self._left and self._left[0] <= now - self.window:
            self._left.popleft()
        if len(self._left) + self._leaving < self.limit:
            return 0.0
        return self._left[0] + self.window - now if self._left else self.spacing

    def let_go(self, slot: float) -> Ticket:
        """The request of ``slot`` goes now: it counts in the window from now on."""
        self._leaving += 1
        return Ticket(slot, self.opened_spell)

    def sent(self, ticket: Ticket, now: float) -> None:
        """The request of ``ticket`` is leaving at ``now``. One that leaves more than
        ``tolerance`` after its slot (a busy event loop, a new connection) pushes the slots
        after it, so that the requests behind it do not catch up in a burst; a little lateness
        keeps the pace (a push at each millisecond late would slow every sweep down)."""
        self.late(ticket, now)
        if not ticket.opens_spell:
            self._leave(ticket, now)

    def answered(self, ticket: Ticket, now: float) -> None:
        """The answer to ``ticket`` came back at ``now``: the first request of a spell counts
        as leaving now (it may have reached the provider only now). Counting it so costs one
        round trip per spell, not a 429."""
        if ticket.opens_spell:
            self.late(ticket, now)
            self._leave(ticket, now)

    def done(self, ticket: Ticket, now: float) -> None:
        """The request of ``ticket`` is over; if it was never seen leaving, it left now."""
        self._leave(ticket, now)

    def late(self, ticket: Ticket, now: float) -> None:
        """Pushes the slots after ``ticket``'s when it is later than ``tolerance`` at ``now``."""
        if now - ticket.slot > self.tolerance:
            self._not_before = max(self._not_before, now + self.spacing)

    def _leave(self, ticket: Ticket, now: float) -> None:
        if not ticket.left:
            ticket.left = True
            self._leaving -= 1
            self._left.append(now)  # the clock only moves on: the deque stays in order

    async def wait(
        self,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> Ticket:
        """Waits for the next slot, and for room in the window; the request's ticket. One
        waiter at a time, in arrival order; a waiter whose slot was pushed meanwhile (``sent``)
        waits on."""
        async with self._lock:
            delay = self.reserve(clock())
            while delay > 0:
                await sleep(delay)
                now = clock()
                delay = self._not_before - now
                if delay > 0:
                    self._slot, self._next = self._not_before, self._not_before + self.spacing
            while (delay := self.window_wait(now := clock())) > 0:
                await sleep(delay)
                # The window held it back: the even pace starts again from when it leaves.
                self._slot, self._next = now + delay, now + delay + self.spacing
            return self.let_go(self._slot)


@asynccontextmanager
async def paced(
    pacer: Pacer, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]]
) -> AsyncIterator[dict[str, Any]]:
    """Waits for a request's slot; gives the httpx extensions that tell the pacer when the
    request really leaves (the engine's trace: after a new connection, as its first bytes go
    out), for the request to be sent within the block."""
    ticket = await pacer.wait(clock, sleep)
    pacer.late(ticket, clock())  # a busy loop woke it late: the next slots move already

    async def trace(event: str, info: dict[str, Any]) -> None:
        # httpcore writes the headers as it says; aiohttp with the body (watcher.ledger.transport).
        if event.endswith(("send_request_headers.started", "send_request_body.started")):
            pacer.sent(ticket, clock())
        elif event.endswith("receive_response_headers.complete"):
            pacer.answered(ticket, clock())

    try:
        yield {"trace": trace}
    finally:
        pacer.done(ticket, clock())
