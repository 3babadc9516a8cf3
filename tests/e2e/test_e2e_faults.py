"""End to end, a hostile run: a stalled channel, a kill -9 while a message is in
flight, a database locked by another process, a database broken for good. The real `watcher
run` process, the simulator on loopback, real local receivers; every wait has a deadline."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watcher.testing.receivers import TrickleReceiver, wait_until

from support.world import TREASURY, World, make_world, small_cluster

pytestmark = pytest.mark.e2e

ID_HEADER = "X-Watcher-Id"


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


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, small_cluster(), rules=treasury_only())


def started(world: World) -> None:
    world.daemon.start()
    world.wait_polls("getSignaturesForAddress", 2)


def delivered(world: World, signature: str) -> bool:
    return any(signature in note["message"] for note in world.notes())


def announced(world: World) -> int:
    """Transactions counted by the notifications received (one each, or digests)."""
    counts = (re.search(r"(\d+) new transactions?", note["title"]) for note in world.notes())
    return sum(int(found.group(1)) for found in counts if found)


def test_a_stalled_channel_does_not_hold_up_another(tmp_path: Path) -> None:
    """A receiver trickling its answer once held every other URL silent."""
    with TrickleReceiver() as slow:
        for world in make_world(
            tmp_path,
            small_cluster(),
            rules=treasury_only(),
            channels={"hooks": ["FAST", slow.url]},
        ):
            # make_world puts its own receiver where "FAST" is only when channels are not
            # given: write the real URL now that it is known.
            config = world.config.read_text().replace("FAST", world.receiver.url)
            world.config.write_text(config)
            started(world)
            [first] = world.ledger.add_transactions(TREASURY, 1)
            world.wait_notes(1)
            wait_until(lambda: slow.stalled == 1, 10.0, "the slow channel stalling")

            [second] = world.ledger.add_transactions(TREASURY, 1)
            # The slow channel stays stalled until released: far longer than this wait.
            world.wait_notes(2, timeout=8.0)
            assert delivered(world, second) and slow.stalled == 1

            slow.release()
            wait_until(lambda: len(slow.received) >= 2, 15.0, "the slow channel catching up")
            assert [first in p["message"] for p in slow.received] == [True, False]
            assert world.daemon.stop() == 0


def test_a_kill_after_the_channel_accepted_repeats_that_message_at_most_once_same_id(
    world: World,
) -> None:
    """Killed (SIGKILL) after the receiver took the message, before the daemon heard
    its 200. After a restart it arrives once more, with the same X-Watcher-Id; nothing lost."""
    killed = threading.Event()

    def kill_in_flight(body: dict[str, Any]) -> None:
        if not killed.is_set():
            killed.set()
            assert world.daemon.proc is not None
            world.daemon.proc.kill()

    world.receiver.on_accept = kill_in_flight
    started(world)
    [first] = world.ledger.add_transactions(TREASURY, 1)
    wait_until(killed.is_set, 15.0, "the first message in flight")
    assert world.daemon.proc is not None
    assert world.daemon.proc.wait(timeout=10) != 0

    world.daemon.start()
    world.wait_notes(2)  # the message in flight, again
    [second] = world.ledger.add_transactions(TREASURY, 1)
    world.wait_notes(3)
    world.wait_polls("getSignaturesForAddress", 5)
    notes, headers = world.notes(), world.receiver.headers
    assert len(notes) == 3
    assert [first in n["message"] for n in notes] == [True, True, False]
    assert second in notes[2]["message"]
    ids = [h.get(ID_HEADER) for h in headers]
    assert ids[0] is not None and ids[0] == ids[1] and ids[2] not in (None, ids[0])
    assert world.daemon.stop() == 0


def test_a_database_locked_longer_than_the_busy_timeout_loses_nothing(world: World) -> None:
    """Another process holds the write lock past the 2 s busy timeout: claims and
    commits fail meanwhile; once it lets go, every pending message still arrives."""
    world.receiver.refuse_all(True)  # so that a retry is due while the lock is held
    started(world)
    world.ledger.add_transactions(TREASURY, 1)
    wait_until(lambda: world.receiver.refused, 15.0, "a refused post")

    holder = sqlite3.connect(world.config.parent / "state" / "watcher.db", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        world.receiver.refuse_all(False)
        world.ledger.add_transactions(TREASURY, 2)
        # A write failed after waiting out the busy timeout (2 s); hold on for 2 more polls
        # (each waits out the timeout again): the sender's claims meet the lock too.
        wait_until(lambda: "database is locked" in world.daemon.output(), 15.0, "a lock failure")
        polls = world.polls("getSignaturesForAddress") + 2
        wait_until(lambda: world.polls("getSignaturesForAddress") >= polls, 30.0, "2 polls")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    world.ledger.add_transactions(TREASURY, 1)

    wait_until(lambda: announced(world) >= 4, 30.0, "all 4 transactions announced")
    world.wait_polls("getSignaturesForAddress", 5)
    assert announced(world) == 4
    world.daemon.assert_alive()
    output = world.daemon.output()
    assert output.count("state database failing") == 1
    assert "state database recovered" in output
    assert world.daemon.stop() == 0


def test_a_database_broken_for_good_makes_run_exit_non_zero(world: World) -> None:
    """A permanent database error (here: the outbox table gone) cannot be waited out: one
    clear line, and `watcher run` exits non-zero for systemd instead of running deaf."""
    started(world)
    breaker = sqlite3.connect(world.config.parent / "state" / "watcher.db", isolation_level=None)
    breaker.execute("PRAGMA foreign_keys = OFF")
    breaker.execute("DROP TABLE deliveries")
    breaker.close()
    world.ledger.add_transactions(TREASURY, 1)

    assert world.daemon.proc is not None
    assert world.daemon.proc.wait(timeout=20) == 1
    output = world.daemon.output()
    assert output.count("watcher cannot go on") == 1
    assert "no such table: deliveries" in output
