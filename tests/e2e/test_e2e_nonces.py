"""End to end, ``nonce_accounts``: a real `watcher run` against the simulator, polling every
200 ms. The first poll's inventory lists the nonce account already on a signer's key; a nonce
account staged on the other signer's key is notified once, one on a key no rule watches never;
through a 5 s outage of the ledger nothing is said, and the nonce advanced during it is said
once after; the authority handed away and a close are told apart; a provider refusing the
filtered call is one "cannot be verified" alert, resolved once it answers again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watcher.simulator import Ledger
from watcher.simulator.keys import derived_pubkey
from watcher.simulator.nonces import close_nonce_account, set_nonce_account

from support.world import API_KEY, World, make_world

pytestmark = pytest.mark.e2e

SIGNER, SIGNER_2 = derived_pubkey("e2e signer 1"), derived_pubkey("e2e signer 2")
STRANGER = derived_pubkey("e2e stranger")
EXISTING, STAGED = derived_pubkey("e2e existing nonce"), derived_pubkey("e2e staged nonce")
THEIRS = derived_pubkey("e2e their nonce")


def short(key: str) -> str:
    return f"{key[:4]}…{key[-4:]}"


def nonce_rules() -> list[dict[str, Any]]:
    return [
        {
            "name": "signer-nonces",
            "kind": "nonce_accounts",
            "authorities": [SIGNER, SIGNER_2],
            "every": "200ms",
            "group_wait": "0s",
            "severity": "critical",
            "notify": ["hooks"],
        }
    ]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    ledger = Ledger(seed=12)
    set_nonce_account(ledger, EXISTING, authority=SIGNER)
    # The outage fails every call for 5 s: rpc_unhealthy (tested on its own) stays out of it.
    yield from make_world(tmp_path, ledger, rules=nonce_rules(), health={"unhealthy_after": 10_000})


def test_nonce_accounts_inventory_changes_outage_and_refusal(world: World) -> None:
    world.daemon.start()
    [inventory] = world.wait_notes(1)
    assert inventory["title"] == (
        "[INFO] signer-nonces: 1 durable nonce account on 2 watched keys (inventory)"
    )
    assert f"- {EXISTING}: authority {SIGNER}" in inventory["message"]

    set_nonce_account(world.ledger, THEIRS, authority=STRANGER)  # no rule watches that key
    set_nonce_account(world.ledger, STAGED, authority=SIGNER_2)
    notes = world.wait_notes(2)
    assert notes[1]["title"] == (
        f"[CRITICAL] signer-nonces: durable nonce account {short(STAGED)} created "
        f"(authority {short(SIGNER_2)})"
    )
    assert "its creating transaction (the account's oldest signature)" in notes[1]["message"]

    # A 5 s outage of the ledger, during which the staged nonce is used: nothing is said.
    world.ledger.faults.inject("http_503_html", count=1_000_000)
    world.wait_polls("getProgramAccounts", 2)
    set_nonce_account(world.ledger, STAGED, advance=True)
    time.sleep(5)
    assert len(world.notes()) == 2
    world.ledger.faults.clear()
    notes = world.wait_notes(3)
    assert notes[2]["title"] == (
        f"[CRITICAL] signer-nonces: durable nonce account {short(STAGED)} advanced (authority "
        f"{short(SIGNER_2)}): a transaction signed against it may have run"
    )
    world.wait_polls("getProgramAccounts", 6)
    assert len(world.notes()) == 3  # once

    # Handed to a key no rule watches (it leaves the filter: read again, it is there), then
    # the other one closed (read again, it is gone).
    set_nonce_account(world.ledger, STAGED, authority=STRANGER)
    notes = world.wait_notes(4)
    assert notes[3]["title"] == (
        f"[CRITICAL] signer-nonces: durable nonce account {short(STAGED)} authority changed: "
        f"{short(SIGNER_2)} -> {short(STRANGER)}"
    )
    close_nonce_account(world.ledger, EXISTING)
    notes = world.wait_notes(5)
    assert notes[4]["title"] == (
        f"[CRITICAL] signer-nonces: durable nonce account {short(EXISTING)} closed (authority "
        f"{short(SIGNER)})"
    )

    # The provider refuses the heavy call: said loudly, once, then resolved.
    world.ledger.faults.inject(
        "rpc_error",
        method="getProgramAccounts",
        count=1_000_000,
        code=-32010,
        message="11111111111111111111111111111111 excluded from account secondary indexes",
    )
    notes = world.wait_notes(7)
    titles = sorted(note["title"] for note in notes[5:])
    assert titles == [
        f"[CRITICAL] signer-nonces: nonce accounts of {short(key)} cannot be verified"
        for key in sorted([SIGNER, SIGNER_2], key=short)
    ]
    assert all("excluded from account secondary indexes" in n["message"] for n in notes[5:])
    world.wait_polls("getProgramAccounts", 4)
    assert len(world.notes()) == 7
    world.ledger.faults.clear()
    notes = world.wait_notes(9)
    assert all(note["title"].startswith("[RESOLVED]") for note in notes[7:])
    world.wait_polls("getProgramAccounts", 4)
    assert len(world.notes()) == 9
    said = "".join(note["title"] + note["message"] for note in world.notes())
    assert THEIRS not in said and API_KEY not in said  # the provider's error, its key masked
