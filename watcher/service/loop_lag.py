"""How late the event loop runs: a tick every ``http.loop_lag_every`` seconds notes how much
later than asked it woke (``watcher_event_loop_lag_seconds``, a histogram). Work that holds the
loop (a long step, a database call on the loop's thread, a thread keeping the GIL) delays every
poll, send and scrape waiting behind it; this is where it shows. A tick is a sample, not a trace:
a hold of D seconds is seen by the tick falling due during it (with D under the tick's period,
one time in ``every / D``), and then as the time left of it. A long hold is one late tick, not
many: the next tick is asked for from when the late one woke. Each tick wakes the process, so
it runs only where /metrics shows it, and two a second by default."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

# Up to a millisecond is the loop's timer resolution (epoll waits whole milliseconds); 20 ms is
# what a scrape may cost the loop at most (bench/README.md); seconds are a loop held by one job.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class LoopLagProbe:
    """The tick, every ``every`` seconds, telling ``observe`` how late it woke: a part of the
    runtime when something shows it (``http``), none otherwise."""

    every: float
    observe: Callable[[float], None]

    async def run(self) -> None:
        await watch_loop_lag(self.observe, self.every)


async def watch_loop_lag(observe: Callable[[float], None], tick: float) -> None:
    """Forever: sleep ``tick``, then ``observe`` how late the wake-up came (seconds, >= 0)."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + tick
        await asyncio.sleep(tick)
        observe(max(0.0, loop.time() - due))
