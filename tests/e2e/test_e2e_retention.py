"""End to end: `watcher run` applies `retention` at start-up and says so in one log line; what
still fires stays, and /metrics counts it."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from watcher.core.events import AlertMessage, Reason
from watcher.core.outbox_rows import Destination
from watcher.state.store import SqliteStore

from support.net import free_port
from support.receivers import wait_until
from support.world import make_world, small_cluster

pytestmark = pytest.mark.e2e

DAY = 86400.0
OPS = Destination("ops", "json://127.0.0.1:9/")


def pruned_lines(output: str) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in output.splitlines() if x.startswith("{")]
    return [line for line in lines if line.get("event") == "history pruned"]


def seed(path: Path, at: float) -> None:
    """An old event (sent long ago: past retention) and an old alert still firing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with SqliteStore(path) as store:
        seeded: tuple[tuple[str, Reason], ...] = (("old event", "event"), ("old firing", "firing"))
        for title, reason in seeded:
            alert = AlertMessage(
                rule="r",
                severity="warning",
                subject=title,
                reason=reason,
                dedup_key=title,
                title=title,
                body="",
                channels=("ops",),
                facts={},
            )
            [alert_id] = store.commit_step("s", title, {}, [alert], lambda _: [OPS], at)
            rows = store.db.execute("SELECT id FROM deliveries WHERE alert_id = ?", [alert_id])
            store.mark_sent([row[0] for row in rows], at)


def test_the_daemon_deletes_history_past_retention_at_start_and_keeps_what_fires(
    tmp_path: Path,
) -> None:
    port = free_port()
    state = tmp_path / "state" / "watcher.db"
    seed(state, time.time() - 31 * DAY)
    with contextmanager(make_world)(
        tmp_path, small_cluster(), retention="30d", http={"listen": f"127.0.0.1:{port}"}
    ) as world:
        world.daemon.start()
        wait_until(lambda: pruned_lines(world.daemon.output()), 20, "a history pruned line")
        [line] = pruned_lines(world.daemon.output())
        assert (line["alerts"], line["deliveries"], line["retention"]) == (1, 1, "30d"), line
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert "watcher_firing_alerts 1.0" in metrics
        assert world.daemon.stop() == 0
    with SqliteStore(state) as store:
        assert [record.alert.title for record in store.history()] == ["old firing"]
