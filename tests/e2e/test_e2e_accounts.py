"""End to end, the account, fee and supply kinds: a real `watcher run` against the simulator.
balance_below and fee_above fire, an RPC fault then concludes nothing, and once the endpoint
answers again the balance resolves and the account and supply changes go out; an expired
blockhash resolves nothing and the log says why. Polls every 200 ms."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watcher.simulator import Ledger
from watcher.simulator.accounts import sample_message
from watcher.simulator.keys import derived_pubkey
from watcher.testing.receivers import wait_until

from support.world import World, make_world

pytestmark = pytest.mark.e2e

IDENTITY = derived_pubkey("e2e identity")
PROGRAM = derived_pubkey("e2e program data")
MINT = derived_pubkey("e2e supply mint")
HOLDER = derived_pubkey("e2e supply holder")
SOL = 1_000_000_000


def ledger() -> Ledger:
    ledger = Ledger(seed=11)
    ledger.accounts.set_account(IDENTITY, lamports=SOL // 2)
    ledger.accounts.set_account(PROGRAM, lamports=2 * SOL, data=b"program v1")
    ledger.set_holders(MINT, [(HOLDER, 5_000_000)], decimals=6)
    return ledger


def account_rules() -> list[dict[str, Any]]:
    common: dict[str, Any] = {"every": "200ms", "notify": ["hooks"]}
    events = {**common, "group_wait": "0s"}
    return [
        {
            "name": "low",
            "kind": "balance_below",
            "accounts": [IDENTITY, PROGRAM],
            "min_sol": 1,
            **common,
        },
        {
            "name": "fees",
            "kind": "fee_above",
            "message": sample_message(),
            "max_lamports": 4000,
            **common,
        },
        {"name": "supply", "kind": "supply_changed", "mints": [MINT], **events},
        {"name": "upgrade", "kind": "account_changed", "accounts": [PROGRAM], **events},
    ]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    # The faults below fail whole rounds of two sources; however many rounds a busy machine
    # fits in before they clear, rpc_unhealthy (tested on its own) stays out of this test.
    yield from make_world(
        tmp_path, ledger(), rules=account_rules(), health={"unhealthy_after": 10_000}
    )


def test_account_kinds_fire_resolve_and_ignore_faults(world: World) -> None:
    world.daemon.start()
    world.wait_notes(2)
    assert sorted(world.titles()) == [
        "[WARNING] fees: fee 5000 lamports, above 4000 lamports",
        f"[WARNING] low: balance of {IDENTITY[:4]}…{IDENTITY[-4:]} below 1 SOL: 0.5 SOL",
    ]
    # Both watched accounts ride one getMultipleAccounts call per round.
    calls = [r for r in world.server.requests if r.method == "getMultipleAccounts"]
    assert all(sorted(r.params[0]) == sorted([IDENTITY, PROGRAM]) for r in calls)

    # The accounts and supply calls fail: what changes meanwhile concludes nothing.
    for method in ("getMultipleAccounts", "getTokenSupply"):
        world.ledger.faults.inject("rpc_error", method=method, count=100_000)
    world.ledger.accounts.set_account(IDENTITY, lamports=3 * SOL)
    world.ledger.accounts.set_account(PROGRAM, data=b"program v2")
    world.ledger.set_holder_amount(MINT, HOLDER, 7_500_000)
    world.wait_polls("getMultipleAccounts", 3)
    world.wait_polls("getTokenSupply", 3)
    assert len(world.notes()) == 2

    world.ledger.faults.clear()
    world.ledger.accounts.set_fee(1000, expired=True)  # null fees: not evidence either
    notes = world.wait_notes(5)
    titles = sorted(note["title"] for note in notes[2:])
    assert titles == [
        f"[RESOLVED] low: balance of {IDENTITY[:4]}…{IDENTITY[-4:]} back to 3 SOL",
        f"[WARNING] supply: 2.5 tokens minted on {MINT[:4]}…{MINT[-4:]}",
        f"[WARNING] upgrade: account {PROGRAM[:4]}…{PROGRAM[-4:]} changed: data",
    ]
    world.wait_polls("getFeeForMessage", 2)
    assert len(world.notes()) == 5  # the fee never resolved on a null answer
    wait_until(lambda: "needs a fresh blockhash" in world.daemon.output(), 5, "the log says why")
