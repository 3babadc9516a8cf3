"""End to end, the program and asset kinds: a real `watcher run` against the simulator on
loopback, delivering to a real local receiver. The first poll is the baseline, RPC faults on
every method of these kinds produce nothing, then each kind notifies its change once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watcher.simulator import Ledger
from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey
from watcher.testing.receivers import wait_until

from support.world import World, make_world

pytestmark = pytest.mark.e2e

OWNER, MINT = derived_pubkey("e2e das owner"), derived_pubkey("e2e das mint")
ACCOUNT, NEW_ACCOUNT = derived_pubkey("e2e das account"), derived_pubkey("e2e das account 2")
COLLECTION, HOLDER = derived_pubkey("e2e das collection"), derived_pubkey("e2e das holder")
ASSET, NEW_ASSET = derived_pubkey("e2e das asset"), derived_pubkey("e2e das asset 2")
PROGRAM, POOL = derived_pubkey("e2e das program"), derived_pubkey("e2e das pool")
MASTER, PRINT = derived_pubkey("e2e das master"), derived_pubkey("e2e das print")
METHODS = (
    "getTokenAccounts",
    "getAssetsByGroup",
    "getAssets",
    "getProgramAccounts",
    "getNftEditions",
)


def das_ledger() -> Ledger:
    ledger = Ledger(seed=11)
    das = das_of(ledger)
    das.set_token_account(ACCOUNT, mint=MINT, owner=OWNER, amount=5)
    das.assets.set_asset(ASSET, owner=HOLDER, collection=COLLECTION, name="Lad #1")
    das.programs.set_program_account(PROGRAM, POOL, bytes(165))
    das.editions.set_master(MASTER, None)
    return ledger


def das_rules() -> list[dict[str, Any]]:
    every = {"every": "200ms", "notify": ["hooks"]}
    return [
        {"name": "deposits", "kind": "token_accounts", "owners": [OWNER], **every},
        {"name": "mints", "kind": "new_assets", "collection": COLLECTION, **every},
        {"name": "vault", "kind": "asset_changed", "assets": [ASSET], **every},
        {
            "name": "pools",
            "kind": "program_accounts",
            "program": PROGRAM,
            "filters": [{"dataSize": 165}],
            **every,
        },
        {"name": "prints", "kind": "new_editions", "mints": [MASTER], **every},
    ]


def ours(world: World) -> list[dict[str, Any]]:
    """The notifications of the rules above (the built-in rpc_unhealthy may speak of faults)."""
    return [note for note in world.notes() if "rpc_unhealthy" not in note["title"]]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, das_ledger(), rules=das_rules())


def test_program_and_asset_kinds_fire_once_and_faults_are_never_evidence(world: World) -> None:
    world.daemon.start()
    world.wait_polls_of(METHODS, 2)
    assert ours(world) == [], world.titles()

    # Whole rounds fail, and one answer of each has the wrong shape: none of it is news.
    for method in METHODS:
        for kind in ("rpc_error", "wrong_shape"):
            world.ledger.faults.inject(kind, method=method, count=3)
    faults = world.ledger.faults
    wait_until(lambda: faults.pending() == 0, 30, "faults consumed")
    world.wait_polls_of(METHODS, 2)
    world.daemon.assert_alive()
    assert ours(world) == [], world.titles()

    das = das_of(world.ledger)
    das.set_token_account(NEW_ACCOUNT, mint=MINT, owner=OWNER)
    das.set_token_account(ACCOUNT, frozen=True)
    das.assets.set_asset(NEW_ASSET, owner=HOLDER, collection=COLLECTION, name="Lad #2")
    das.assets.set_asset(ASSET, owner=OWNER)
    das.programs.close_program_account(PROGRAM, POOL)
    das.editions.print_edition(MASTER, PRINT)
    notes = wait_until(
        lambda: ours(world) if len(ours(world)) >= 5 else None, 15, "5 notifications"
    )
    world.wait_polls_of(METHODS, 2)
    titles = sorted(note["title"] for note in ours(world))
    assert len(titles) == 5, titles
    assert "deposits: 2 token account changes" in titles[0]
    assert "mints: 1 new asset in collection" in titles[1]
    assert "pools: 1 account change under" in titles[2] and "(1 closed)" in titles[2]
    assert "prints: 1 new edition of" in titles[3] and "(supply 1 of unlimited)" in titles[3]
    assert "vault: asset" in titles[4] and "changed: owner" in titles[4]
    bodies = " ".join(note["message"] for note in notes)
    for key in (NEW_ACCOUNT, ACCOUNT, NEW_ASSET, POOL, PRINT):
        assert key in bodies
    assert world.daemon.stop() == 0
