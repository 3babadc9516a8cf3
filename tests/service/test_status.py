"""``watcher status`` of a shared database: each instance's last round of a source, and only the
running instances' rounds count for ``--health``."""

from __future__ import annotations

import json

from watcher.service.status import Status
from watcher.state.snapshot import InstanceShards, Outbox
from watcher.state.source_rounds import SourceRound

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
