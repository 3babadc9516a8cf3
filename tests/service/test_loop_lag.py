"""The event loop's lag (``watcher.service.loop_lag``): a tick notes how late it woke, so that
work holding the loop shows on /metrics as ``watcher_event_loop_lag_seconds``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from watcher.service.loop_lag import watch_loop_lag
from watcher.service.metrics import Metrics


def test_a_hold_of_the_loop_is_one_late_tick_and_the_others_are_on_time() -> None:
    lags: list[float] = []

    async def run() -> None:
        probe = asyncio.create_task(watch_loop_lag(lags.append, tick=0.01))
        await asyncio.sleep(0.055)
        time.sleep(0.15)  # noqa: ASYNC251 - the loop held: the tick due meanwhile wakes late
        await asyncio.sleep(0.055)
        probe.cancel()

    asyncio.run(run())
    late = [lag for lag in lags if lag >= 0.1]
    assert len(late) == 1 and late[0] >= 0.13, lags
    assert len(lags) >= 6 and all(lag >= 0 for lag in lags)


def test_the_lag_is_a_histogram_on_metrics(tmp_path: Path) -> None:
    metrics = Metrics(time.time)
    metrics.loop_lagged(0.0004)
    metrics.loop_lagged(0.03)
    text = metrics.exposition().decode()
    assert 'watcher_event_loop_lag_seconds_bucket{le="0.001"} 1.0' in text
    assert 'watcher_event_loop_lag_seconds_bucket{le="0.02"} 1.0' in text
    assert 'watcher_event_loop_lag_seconds_bucket{le="0.05"} 2.0' in text
    assert "watcher_event_loop_lag_seconds_count 2.0" in text
    # Rendered last: a scrape reads it once the rest is rendered.
    assert text.rstrip().splitlines()[-1].startswith("watcher_event_loop_lag_seconds_created")
