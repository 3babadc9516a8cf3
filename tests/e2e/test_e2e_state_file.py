"""End to end, the state file shared by the real processes: the read-only commands work beside a
running `watcher run` (its database in WAL mode), and a second `watcher run` on the same file
exits at once naming the first's PID, leaving the first's in-flight send alone."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from watcher.state.database import MIGRATIONS
from watcher.testing.daemon import DaemonProcess
from watcher.testing.receivers import TrickleReceiver, wait_until

from support.world import TREASURY, World, make_world, small_cluster

pytestmark = pytest.mark.e2e


def treasury_only() -> list[dict[str, Any]]:
    return [
        {
            "name": "treasury",
            "kind": "new_transactions",
            "addresses": [TREASURY],
            "every": "200ms",
            "group_wait": "0s",  # one address: nothing to group, the test waits on each send
            "notify": ["hooks"],
        },
    ]


def command(world: World, *args: str) -> subprocess.CompletedProcess[str]:
    """A `watcher` command as a user runs it beside the daemon."""
    return subprocess.run(
        [sys.executable, "-m", "watcher", *args, "--config", str(world.config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def state_file(world: World) -> Path:
    return world.config.parent / "state" / "watcher.db"


def query(world: World, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(f"{state_file(world).as_uri()}?mode=ro", uri=True)) as conn:
        return conn.execute(sql).fetchall()


def delivery_is(world: World, status: str) -> bool:
    return query(world, "SELECT status FROM deliveries") == [(status,)]


def test_read_only_commands_work_beside_a_running_daemon(tmp_path: Path) -> None:
    for world in make_world(tmp_path, small_cluster(), rules=treasury_only()):
        world.daemon.start()
        world.wait_polls("getSignaturesForAddress", 2)  # past the first poll, which sets the cursor
        [signature] = world.ledger.add_transactions(TREASURY, 1)
        world.wait_notes(1)
        wait_until(partial(delivery_is, world, "sent"), 15.0, "the delivery marked sent")
        assert state_file(world).with_name("watcher.db-wal").exists()  # WAL, open by the daemon

        alerts = command(world, "alerts")
        assert (alerts.returncode, alerts.stderr) == (0, "")
        [line] = alerts.stdout.splitlines()
        assert "treasury: " in line and "1 new transaction" in line
        status = command(world, "status")
        assert (status.returncode, status.stderr) == (0, "")
        assert status.stdout.startswith("firing: 0\nsources: 1\n"), status.stdout
        assert status.stdout.endswith("\ndeliveries: 0 pending, 0 dead\n"), status.stdout
        silences = command(world, "silence", "list")
        assert (silences.returncode, silences.stdout) == (0, "no active silences\n")

        # The daemon goes on: the next transaction is still noticed and sent.
        [later] = world.ledger.add_transactions(TREASURY, 1)
        notes = world.wait_notes(2)
        assert signature in notes[0]["message"] and later in notes[1]["message"]
        assert query(world, "SELECT MAX(version) FROM schema_migrations") == [(len(MIGRATIONS),)]
        assert world.daemon.stop() == 0


def test_a_second_daemon_on_the_same_state_file_exits_and_leaves_the_first_alone(
    tmp_path: Path,
) -> None:
    with TrickleReceiver() as slow:
        for world in make_world(
            tmp_path, small_cluster(), rules=treasury_only(), channels={"hooks": [slow.url]}
        ):
            first = world.daemon.start()
            world.wait_polls("getSignaturesForAddress", 2)
            world.ledger.add_transactions(TREASURY, 1)
            # The first daemon's send is in flight: claimed (`sending`), its answer trickling.
            wait_until(lambda: slow.stalled == 1, 15.0, "the send in flight")
            assert query(world, "SELECT status FROM deliveries") == [("sending",)]
            assert first.proc is not None

            second = DaemonProcess(world.config)
            second.log_path = tmp_path / "second.log"
            second.start()
            assert second.proc is not None
            assert second.proc.wait(timeout=30) == 1, second.output()
            assert (
                f"watcher: refusing to start: state database {state_file(world)} is in use by "
                f"another `watcher run` (pid {first.proc.pid}; lock {state_file(world)}.lock)"
            ) in second.output()

            # Untouched: still the first's, still in flight, sent once when the channel answers.
            assert query(world, "SELECT status FROM deliveries") == [("sending",)]
            first.assert_alive()
            slow.release()
            wait_until(partial(delivery_is, world, "sent"), 15.0, "the delivery marked sent")
            world.wait_polls("getSignaturesForAddress", 5)
            assert len(slow.received) == 1
            assert world.daemon.stop() == 0
