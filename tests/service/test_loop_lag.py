"""The event loop's lag (``watcher.service.loop_lag``): a tick notes how late it woke, so that
work holding the loop shows on /metrics as ``watcher_event_loop_lag_seconds``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from watcher.app import Daemon
from watcher.checks import load_config
from watcher.kinds.ruleset import RuleSet
from watcher.service.loop_lag import watch_loop_lag
from watcher.service.metrics import Metrics
from watcher.testing.daemon import write_config

from support.seeded import base_rules


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


async def test_the_probe_ticks_every_http_loop_lag_every_and_only_where_metrics_show_it(
    tmp_path: Path,
) -> None:
    def daemon(http: dict[str, Any] | None) -> Daemon:
        extra: dict[str, Any] = {"state_path": str(tmp_path / "watcher.db")}
        if http is not None:
            extra["http"] = http
        config = write_config(
            tmp_path,
            rpc_url="http://127.0.0.1:9/",
            channels={"hooks": ["json://127.0.0.1:9/"]},
            rules=base_rules(),
            extra=extra,
        )
        settings, rules = load_config(config)
        return Daemon(settings, RuleSet(rules))

    for http, probe_every in [
        ({"listen": "127.0.0.1:9108"}, 0.5),  # the default: two ticks a second
        ({"listen": "127.0.0.1:9108", "loop_lag_every": "100ms"}, 0.1),
        (None, None),  # nothing shows the histogram: no tick wakes the process
    ]:
        built = daemon(http)
        try:
            http_parts = built.runtime.parts.http
            probe = None if http_parts is None else http_parts.loop_lag
            assert (probe and probe.every) == probe_every
            assert probe is None or probe.observe == built.metrics.loop_lagged
        finally:
            await built.close()
            await built.store.close()
