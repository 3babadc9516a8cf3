"""End to end: ``vat_eligibility`` in a real `watcher run` against the simulator. A validator
past the cut fires at the first poll with its rank and the stake it lacks; a drained vote
account fires with the SOL short and resolves when topped up; stake removed fires naming it; and
through a 5 s outage of the ledger nothing fires or resolves."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.kinds.toolkit.vat_ticket import VOTE_RENT_EXEMPT_LAMPORTS
from watcher.testing.receivers import wait_until

from support.world import (
    DRIFT_NODE,
    DRIFT_VOTE,
    OUR_VOTE,
    World,
    make_world,
    small_cluster,
)

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    http = {"listen": f"127.0.0.1:{free_port()}"}
    yield from make_world(tmp_path, small_cluster(), rules=[vat_rule()], http=http)


def metric(world: World, name: str) -> float | None:
    """The drift validator's series of ``name`` on /metrics (None: not shown)."""
    listen = yaml.safe_load(world.config.read_text())["http"]["listen"]
    with urllib.request.urlopen(f"http://{listen}/metrics", timeout=5) as response:
        text = response.read().decode()
    series = f'{name}{{nodekey="{DRIFT_NODE}",votekey="{DRIFT_VOTE}"}}'
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


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
    wait_until(
        lambda: metric(world, "solana_validator_vat_rank") == 3.0, 15.0, "the rank on /metrics"
    )
    assert metric(world, "solana_validator_vat_stake_gap") == 10_000.000000001
    assert metric(world, "solana_validator_vote_account_balance") == 5.0270744

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


@pytest.fixture
def three_sources(tmp_path: Path) -> Iterator[World]:
    """The VAT of two validators, delinquency and version drift, at one interval."""
    common = {"every": "300ms", "notify": ["hooks"]}
    rules = [
        {**vat_rule(), **common},
        {"name": "down", "kind": "delinquent_validators", "validators": [OUR_VOTE], **common},
        {"name": "drift", "kind": "version_drift", "validators": [DRIFT_NODE], **common},
    ]
    yield from make_world(tmp_path, small_cluster(), rules=rules)


def test_one_get_vote_accounts_a_tick_serves_the_vat_the_votes_and_the_nodes(
    three_sources: World,
) -> None:
    """Each tick is one getVoteAccounts (counted against getClusterNodes, which only
    version_drift calls, once a tick), not one per source or validator."""
    world = three_sources
    world.daemon.start()
    wait_until(lambda: world.polls("getClusterNodes") >= 8, 20, "eight ticks")
    ticks, calls = world.polls("getClusterNodes"), world.polls("getVoteAccounts")
    # A tick's call may be under way when counted: one either way.
    assert abs(calls - ticks) <= 1, (calls, ticks)
    assert world.daemon.stop() == 0
