"""End to end: ``vat_eligibility`` in a real `watcher run` against the simulator. A validator
past the cut fires at the first poll with its rank and the stake it lacks; a drained vote
account fires with the SOL short and resolves when topped up; stake removed fires naming it; and
through a 5 s outage of the ledger nothing fires or resolves."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watcher.kinds.vat import VOTE_RENT_EXEMPT_LAMPORTS

from support.receivers import wait_until
from support.world import DRIFT_VOTE, OUR_VOTE, World, make_world, small_cluster

pytestmark = pytest.mark.e2e

SOL = 10**9


def vat_rule() -> dict[str, Any]:
    # Three staked validators and a cut at two: the drift validator (40,000 SOL, third) is out.
    return {
        "name": "vat",
        "kind": "vat_eligibility",
        "validators": [OUR_VOTE, DRIFT_VOTE],
        "max_rank": 2,
        "every": "200ms",
        "notify": ["hooks"],
        "severity": "critical",
    }


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, small_cluster(), rules=[vat_rule()])


def vat_titles(world: World, since: int = 0) -> list[str]:
    """The titles of the vat rule's notifications (the outage also fires rpc_unhealthy)."""
    return [title for title in world.titles()[since:] if title.startswith("[") and " vat:" in title]


def note(world: World, *parts: str) -> dict[str, Any]:
    """Wait for the notification whose title holds every part."""
    found: dict[str, Any] = wait_until(
        lambda: next((n for n in world.notes() if all(p in n["title"] for p in parts)), None),
        15.0,
        f"a notification titled with {parts} (have {world.titles()})\n"
        + world.daemon.output()[-3000:],
    )
    return found


def test_the_ticket_fires_and_resolves_and_an_outage_changes_nothing(world: World) -> None:
    world.daemon.start()
    past = note(world, "would miss the VAT", "rank 3 past 2")
    assert "it needs 10,000.000000001 SOL more to pass the 50,000 SOL at place 2" in past["message"]
    assert "Next epoch boundary: epoch" in past["message"]

    world.ledger.update_validator(OUR_VOTE, balance=VOTE_RENT_EXEMPT_LAMPORTS + SOL)
    drained = note(world, "would miss the VAT", "vote account 0.6 SOL short")
    assert "0.6 SOL short of 1.6270744 SOL" in drained["message"]
    world.ledger.update_validator(OUR_VOTE, balance=VOTE_RENT_EXEMPT_LAMPORTS + 2 * SOL)
    note(world, "[RESOLVED]", "passes the VAT again")

    # A 5 s outage: our stake withdrawn (would fire), the drift validator's grown past ours
    # (would resolve); nothing may come of either until the ledger answers again.
    seen = len(world.notes())
    before = len(vat_titles(world))
    world.ledger.faults.inject("http_503_html", count=1_000_000)
    world.ledger.update_validator(OUR_VOTE, stake=0)
    world.ledger.update_validator(DRIFT_VOTE, stake=60_000 * SOL)
    time.sleep(5.0)
    assert len(vat_titles(world)) == before, world.titles()
    world.ledger.faults.clear()

    gone = note(world, "would miss the VAT", "no activated stake")
    assert "No activated stake" in gone["message"]
    wait_until(lambda: len(vat_titles(world, seen)) >= 2, 15.0, "the drift validator resolved")
    resolved = [title for title in vat_titles(world, seen) if title.startswith("[RESOLVED]")]
    assert len(resolved) == 1 and "passes the VAT again" in resolved[0], world.titles()
    world.daemon.assert_alive()
    assert world.daemon.stop() == 0
