"""End to end: `watcher run` applies `retention` at start-up and says so in one log line; what
still fires stays, and /metrics counts it."""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from watcher.core.events import AlertMessage, Reason
from watcher.core.outbox_rows import Destination
from watcher.state.interface import StepToCommit
from watcher.state.store import SqliteStore
from watcher.testing.net import free_port
from watcher.testing.receivers import wait_until

from support.world import make_world, small_cluster

pytestmark = pytest.mark.e2e

DAY = 86400.0
OPS = Destination("ops", "json://127.0.0.1:9/")


def pruned_lines(output: str) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in output.splitlines() if x.startswith("{")]
    return [line for line in lines if line.get("event") == "history pruned"]


def seed(path: Path, seeded: list[tuple[str, Reason, float]]) -> None:
    """Alerts (title, reason, when: queued and sent then) in the state database."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with SqliteStore(path) as store:
        for title, reason, at in seeded:
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
            [alert_id] = store.commit_step(
                StepToCommit.of("s", title, {}, [alert], lambda _: [OPS], at)
            )
            rows = store.db.execute("SELECT id FROM deliveries WHERE alert_id = ?", [alert_id])
            store.mark_sent([row[0] for row in rows], at)


def test_the_daemon_deletes_history_past_retention_at_start_and_keeps_what_fires(
    tmp_path: Path,
) -> None:
    """`watcher run` started at 12:00 (its wall clock set there) with ``retention: 90d``: an
    event sent 90 days and a minute ago is deleted, one sent 90 days less 59 minutes ago is kept
    (a horizon off by an hour either way tells), and an alert firing for 91 days stays."""
    port = free_port()
    state = tmp_path / "state" / "watcher.db"
    start = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC).timestamp()
    seed(
        state,
        [
            ("91 days old: gone", "event", start - 91 * DAY),
            ("90 days 1 minute old: gone", "event", start - 90 * DAY - 60),
            ("89 days 23 hours 1 minute old: kept", "event", start - 90 * DAY + 59 * 60),
            ("89 days old: kept", "event", start - 89 * DAY),
            ("firing for 91 days: kept", "firing", start - 91 * DAY),
        ],
    )
    # The ledger's history a minute before the daemon's start, on the daemon's clock: history
    # that predates the watch, which stays quiet.
    ledger = small_cluster(clock=lambda: start - 60)
    with contextmanager(make_world)(
        tmp_path, ledger, retention="90d", http={"listen": f"127.0.0.1:{port}"}
    ) as world:
        world.daemon.started_at = "2026-11-21 12:00:00"
        world.daemon.start()
        wait_until(lambda: pruned_lines(world.daemon.output()), 20, "a history pruned line")
        [line] = pruned_lines(world.daemon.output())
        assert (line["alerts"], line["deliveries"], line["retention"]) == (2, 2, "90d"), line
        assert line["timestamp"].startswith("2026-11-21T12:00:"), line
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert "watcher_firing_alerts 1.0" in metrics
        assert world.daemon.stop() == 0
    with SqliteStore(state) as store:
        assert sorted(record.alert.title for record in store.history()) == [
            "89 days 23 hours 1 minute old: kept",
            "89 days old: kept",
            "firing for 91 days: kept",
        ]
