"""End to end: the life cycle of state alerts (`for`, `keep_firing_for`, `repeat`) with the real
daemon against the simulator. Durations are a second or two; polls every 200 ms."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from watcher.state.store import SqliteStore
from watcher.testing.receivers import wait_until

from support.world import OUR_NODE, OUR_VOTE, World, make_world, small_cluster

pytestmark = pytest.mark.e2e


def validator_rule(**lifecycle: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": "my-validator",
            "kind": "delinquent_validators",
            "validators": [OUR_VOTE],
            "every": "200ms",
            "notify": ["hooks"],
            "severity": "critical",
            **lifecycle,
        },
    ]


@contextmanager
def world_with(tmp: Path, **lifecycle: Any) -> Iterator[World]:
    yield from make_world(tmp, small_cluster(), rules=validator_rule(**lifecycle))


def first_poll_after(world: World, moment: float) -> float:
    """When the simulator received the daemon's first getVoteAccounts call after ``moment``."""
    return min(
        r.at for r in world.server.requests if r.method == "getVoteAccounts" and r.at >= moment
    )


def fired_at(world: World) -> float:
    """The daemon's own time of the firing, from its alert history (not the receiver's clock,
    so a slow start or a busy machine cannot move it)."""
    store = SqliteStore(world.config.parent / "state" / "watcher.db")
    try:
        [record] = [r for r in store.history() if r.alert.reason == "firing"]
        return record.created_at
    finally:
        store.close()


def test_for_delays_firing_and_a_shorter_blip_never_fires(tmp_path: Path) -> None:
    with world_with(tmp_path, **{"for": "1500ms"}) as world:
        world.daemon.start()
        world.wait_polls("getVoteAccounts", 2)

        world.ledger.mark_delinquent(OUR_VOTE)  # a blip: back before `for` has passed
        world.wait_polls("getVoteAccounts", 2)
        world.ledger.mark_current(OUR_VOTE)
        world.wait_polls("getVoteAccounts", 10)  # well past 1.5 s since the blip began
        assert world.notes() == [], world.titles()

        marked = time.time()
        world.ledger.mark_delinquent(OUR_VOTE)
        [note] = world.wait_notes(1)
        seen = first_poll_after(world, marked)
        assert fired_at(world) - seen >= 1.5, "fired before the condition held for 1.5 s"
        assert OUR_NODE in note["message"]
        assert world.daemon.stop() == 0


def test_pending_survives_a_restart(tmp_path: Path) -> None:
    with world_with(tmp_path, **{"for": "2s"}) as world:
        world.daemon.start()
        world.wait_polls("getVoteAccounts", 2)
        marked = time.time()
        world.ledger.mark_delinquent(OUR_VOTE)
        world.wait_polls("getVoteAccounts", 2)  # pending now
        assert world.daemon.stop() == 0
        assert world.notes() == [], world.titles()
        seen = first_poll_after(world, marked)
        # Stay stopped until `for` has passed since the daemon first saw the problem.
        wait_until(lambda: time.time() - seen > 2.2, 10, "`for` to pass while stopped")

        restarted = time.time()
        world.daemon.start()
        [note] = world.wait_notes(1)
        # Pending began before the restart, so the first poll after it fires; a pending state
        # lost in the restart would need `for` (2 s) of the daemon's own time after that poll.
        assert fired_at(world) - first_poll_after(world, restarted) < 2.0
        assert "my-validator" in note["title"]
        assert world.daemon.stop() == 0


def test_flapping_within_keep_firing_for_sends_nothing_new(tmp_path: Path) -> None:
    with world_with(tmp_path, keep_firing_for="2s") as world:
        world.daemon.start()
        world.wait_polls("getVoteAccounts", 2)
        world.ledger.mark_delinquent(OUR_VOTE)
        world.wait_notes(1)
        for _ in range(3):  # flaps shorter than keep_firing_for
            world.ledger.mark_current(OUR_VOTE)
            world.wait_polls("getVoteAccounts", 2)
            world.ledger.mark_delinquent(OUR_VOTE)
            world.wait_polls("getVoteAccounts", 2)
        assert len(world.notes()) == 1, world.titles()

        world.ledger.mark_current(OUR_VOTE)  # a real recovery, longer than keep_firing_for
        note = world.wait_notes(2)[-1]
        assert "resolved" in (note["title"] + note["message"]).lower()
        world.wait_polls("getVoteAccounts", 5)
        assert len(world.notes()) == 2, world.titles()
        assert world.daemon.stop() == 0


def test_reminders_while_firing_then_one_resolved(tmp_path: Path) -> None:
    with world_with(tmp_path, repeat="1s") as world:
        world.daemon.start()
        world.wait_polls("getVoteAccounts", 2)
        world.ledger.mark_delinquent(OUR_VOTE)
        notes = world.wait_notes(3, timeout=20)  # the firing and two reminders
        assert "delinquent" in notes[0]["title"]
        reminders = notes[1:3]
        assert all("my-validator" in n["title"] for n in reminders)
        assert all("still" in (n["title"] + n["message"]).lower() for n in reminders), [
            n["title"] for n in reminders
        ]
        world.ledger.mark_current(OUR_VOTE)
        wait_until(
            lambda: any("resolved" in (n["title"] + n["message"]).lower() for n in world.notes()),
            15,
            "the resolved notification",
        )
        assert world.daemon.stop() == 0
