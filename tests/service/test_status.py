"""``watcher status`` of a shared database: each instance's last round of a source, and only the
running instances' rounds count for ``--health``; and the command's ages at frozen wall-clock
times."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from freezegun import freeze_time
from typer.testing import CliRunner

from watcher.cli import app
from watcher.core.clock import iso
from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import Destination
from watcher.service.status import STUCK_SECONDS, Status, status_of
from watcher.state.interface import StepToCommit
from watcher.state.records import CONFIG_SOURCE, SourceRound, config_round
from watcher.state.snapshot import InstanceShards, Outbox, StoreStatus
from watcher.state.store import SqliteStore
from watcher.testing.daemon import write_config

NOW = 1_800_000_000.0
QUIET = Outbox(0, None, 0)


def instance(name: str) -> InstanceShards:
    return InstanceShards(name, f"box-{name}", 1, NOW - 60, NOW - 1, 512)


def test_each_instance_shows_its_own_last_round_of_a_source() -> None:
    status = Status(
        [],
        QUIET,
        [
            SourceRound("votes", NOW - 5, 4, 0, 0.5, NOW - 5, instance="a"),
            SourceRound("votes", NOW - 3, 3, 3, 0.7, None, instance="b"),
        ],
        instances=[instance("a"), instance("b")],
        now=NOW,
    )
    lines = status.lines()
    assert lines[1] == "sources: 1"
    assert lines[2].startswith("  votes      last round 2027-01-15T07:59:55Z on a: 4 targets")
    assert lines[3].startswith("  votes      last round 2027-01-15T07:59:57Z on b: 3 targets")
    assert status.problems(NOW) == [
        "votes: every poll of its last round failed (2027-01-15T07:59:57Z) on b"
    ]
    shown = json.loads(status.as_json())["sources"]
    assert [(s["source"], s["instance"]) for s in shown] == [("votes", "a"), ("votes", "b")]


def test_the_round_of_an_instance_no_longer_running_is_no_problem() -> None:
    failed = SourceRound("votes", NOW - 3, 3, 3, 0.7, None, instance="b")
    assert Status([], QUIET, [failed], instances=[instance("a")], now=NOW).problems(NOW) == []
    alone = Status([], QUIET, [failed], instances=[instance("b")], now=NOW)
    assert len(alone.problems(NOW)) == 1


def test_one_instance_on_sqlite_reads_as_before() -> None:
    status = Status([], QUIET, [SourceRound("votes", NOW - 5, 4, 4, 0.5, None)])
    assert status.lines()[2].startswith("  votes      last round 2027-01-15T07:59:55Z: 4 targets")
    assert status.problems(NOW) == [
        "votes: every poll of its last round failed (2027-01-15T07:59:55Z)"
    ]


# -- the command at frozen wall-clock times ------------------------------------------------------


def test_status_health_tells_a_pending_delivery_stuck_from_the_second_past_its_limit(
    tmp_path: Path,
) -> None:
    """``watcher status`` reads the wall clock: frozen, a delivery queued at 12:00 and never sent
    is healthy at 12:05:00 (``STUCK_SECONDS``, 300 s) and ``outbox not draining`` at 12:05:01."""
    config = write_config(
        tmp_path,
        rpc_url="http://127.0.0.1:9/",
        channels={"ops": ["json://127.0.0.1:9/"]},
        rules=[],
    )
    alert = AlertMessage(
        rule="treasury",
        severity="warning",
        subject="s",
        reason="event",
        dedup_key="k",
        title="moved",
        body="",
        channels=("ops",),
        facts={},
    )
    with freeze_time("2026-11-21 12:00:00", real_asyncio=True) as clock:
        queued = time.time()
        with SqliteStore(tmp_path / "state" / "watcher.db") as store:
            ops = [Destination("ops", "json://127.0.0.1:9/")]
            store.commit_step(StepToCommit.of("s", "t", {}, [alert], lambda _: ops, queued))

        def status(*args: str) -> tuple[int, str, str]:
            done = CliRunner().invoke(app, ["status", "--config", str(config), *args])
            return done.exit_code, done.stdout, done.stderr

        clock.move_to("2026-11-21 12:05:00")
        assert STUCK_SECONDS == 300
        code, shown, _ = status("--health")
        assert code == 0
        assert f"deliveries: 1 pending (oldest since {iso(queued)}), 0 dead" in shown
        assert "2026-11-21T12:00:00Z" in shown

        clock.tick(1)  # 12:05:01
        assert status("--health")[::2] == (
            1,
            "watcher: unhealthy: outbox not draining: oldest pending delivery 301s old\n",
        )
        assert status()[0] == 0  # without --health: shown, not judged


def test_a_refused_reload_is_a_problem_until_a_load_succeeds() -> None:
    """The last load of the settings and rules is kept as a round of ``(config)``: refused, it
    keeps the last successful load's time, and ``--health`` names it; it is no source."""
    refused = config_round(ok=False, at=NOW - 10)
    assert refused.source == CONFIG_SOURCE
    found = StoreStatus([], QUIET, [SourceRound("votes", NOW - 5, 4, 0, 0.5, NOW - 5), refused])
    status = status_of(found, NOW)
    assert [s.source for s in status.sources] == ["votes"]
    assert status.problems(NOW) == [
        "the last reload (2027-01-15T07:59:50Z) was refused: the settings and rules on disk "
        "are not those running (see the log)"
    ]
    assert "config: last reload refused 2027-01-15T07:59:50Z" in status.lines()[-2]
    assert json.loads(status.as_json())["reloads"] == [
        {"at": NOW - 10, "refused": True, "last_success_at": None, "instance": ""}
    ]
    fixed = status_of(StoreStatus([], QUIET, [config_round(ok=True, at=NOW - 1)]), NOW)
    assert fixed.problems(NOW) == []
    assert not any(line.startswith("config") for line in fixed.lines())


def test_only_a_running_instances_refused_reload_counts() -> None:
    refused = replace(config_round(ok=False, at=NOW - 10), instance="b")
    gone = Status([], QUIET, [], instances=[instance("a")], now=NOW, loads=[refused])
    assert gone.problems(NOW) == []
    running = Status([], QUIET, [], instances=[instance("b")], now=NOW, loads=[refused])
    assert running.problems(NOW)[0].startswith("the last reload (2027-01-15T07:59:50Z) on b ")
