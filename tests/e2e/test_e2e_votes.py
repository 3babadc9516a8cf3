"""End to end: the kinds riding getVoteAccounts (cluster_stalled, vote_lag, credits_low,
stake_changed, commission_changed) in a real `watcher run` against the simulator: each fires,
the state kinds resolve, and answers lost to RPC faults produce nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watcher.testing.receivers import wait_until

from support.world import OUR_VOTE, World, make_world, small_cluster

pytestmark = pytest.mark.e2e

EVENT_PACE = {"group_wait": "100ms"}


def vote_rules() -> list[dict[str, Any]]:
    common = {"every": "200ms", "notify": ["hooks"]}
    return [
        {"name": "halt", "kind": "cluster_stalled", "stalled_for": "1s", **common},
        {"name": "lag", "kind": "vote_lag", "validators": [OUR_VOTE], **common},
        {"name": "credits", "kind": "credits_low", "validators": [OUR_VOTE], **common},
        {
            "name": "stake",
            "kind": "stake_changed",
            "validators": [OUR_VOTE],
            "min_change_pct": 10,
            **common,
            **EVENT_PACE,
        },
        {
            "name": "commission",
            "kind": "commission_changed",
            "validators": [OUR_VOTE],
            **common,
            **EVENT_PACE,
        },
    ]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, small_cluster(), rules=vote_rules())


class Ticker:
    """The cluster making progress: a slot every 50 ms, until stopped."""

    def __init__(self, world: World) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(world,), daemon=True)

    def _run(self, world: World) -> None:
        while not self._stop.wait(0.05):
            world.ledger.tick()

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def titled(world: World, *parts: str) -> Any:
    """Wait for the notification whose title holds every part."""
    return wait_until(
        lambda: next((t for t in world.titles() if all(p in t for p in parts)), None),
        15.0,
        f"a notification titled with {parts} (have {world.titles()})\n"
        + world.daemon.output()[-3000:],
    )


def quiet_until_consumed(world: World, seen: int) -> bool:
    """Whether the injected faults are all consumed; asserts that nothing was notified while
    any was left (the notes are read first: a note read then was sent before that moment). The
    answer after the last fault may notify at once (a sweep that overran starts the next)."""
    notes = len(world.notes())
    if world.ledger.faults.pending() == 0:
        return True
    assert notes == seen, world.titles()
    return False


def test_validator_kinds_fire_resolve_and_ignore_rpc_faults(world: World) -> None:
    world.daemon.start()
    # Nothing moves the simulator's slot: the cluster is halted from the start.
    titled(world, "halt", "the cluster is stalled")
    with Ticker(world):
        titled(world, "halt", "making progress again")
        seen = len(world.notes())

        # Every watched value changes while the answers are lost: nothing may come of it.
        world.ledger.faults.inject("rpc_error", method="getVoteAccounts", count=6)
        world.ledger.update_validator(
            OUR_VOTE, behind=80, credits=1000, commission=10, stake=30_000_000_000_000
        )
        wait_until(lambda: quiet_until_consumed(world, seen), 15, "faults consumed")

        # The next answer shows it all.
        assert "votes 80 slots behind" in titled(world, "lag")
        titled(world, "credits", "under the median")
        titled(world, "stake", "(-40.00%)")
        titled(world, "commission", "commission 0% -> 10%")

        world.ledger.update_validator(OUR_VOTE, behind=0, credits=6_900_000)
        titled(world, "lag", "caught up")
        titled(world, "credits", "back near the median")
    world.daemon.assert_alive()
    assert world.daemon.stop() == 0
