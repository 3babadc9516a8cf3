"""End to end, the account-decoding kinds of "who can move the funds": a real `watcher run`
against the simulator, polling every 200 ms. ``token_authorities``: the first poll's inventory,
a mint authority handed over notified once, a mint no rule watches never; through a 5 s outage
of the ledger nothing is said, and the freeze authority removed during it is said once after; a
mint that stops decoding cannot be verified, then resolves. ``upgrade_authority``: a redeploy
during an outage said once after, then the program made immutable. ``multisig_changed``: its
transaction counter moving is no change; a member added during an outage is said once after.
``token_accounts``: a delegate spending part of its allowance is quiet; approved for more, and a
close authority handed over, are said."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watcher.simulator import Ledger
from watcher.simulator.authorities import (
    TOKEN_PROGRAM,
    set_mint,
    set_multisig,
    set_upgradeable_program,
)
from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey

from support.world import World, make_world

pytestmark = pytest.mark.e2e

MINT, OTHER_MINT = derived_pubkey("e2e powers mint"), derived_pubkey("e2e unwatched mint")
COUNCIL, ATTACKER = derived_pubkey("e2e council"), derived_pubkey("e2e attacker")


def short(key: str) -> str:
    return f"{key[:4]}…{key[-4:]}"


def power_rules() -> list[dict[str, Any]]:
    common = {"every": "200ms", "group_wait": "0s", "severity": "critical", "notify": ["hooks"]}
    return [{"name": "mint-powers", "kind": "token_authorities", "mints": [MINT], **common}]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    ledger = Ledger(seed=13)
    set_mint(ledger, MINT, mint_authority=COUNCIL, freeze_authority=COUNCIL)
    set_mint(ledger, OTHER_MINT, mint_authority=COUNCIL)
    # The outage fails every call for 5 s: rpc_unhealthy (tested on its own) stays out of it.
    yield from make_world(tmp_path, ledger, rules=power_rules(), health={"unhealthy_after": 10_000})


def test_token_authorities_inventory_change_outage_and_unverifiable(world: World) -> None:
    world.daemon.start()
    [inventory] = world.wait_notes(1)
    assert inventory["title"] == "[INFO] mint-powers: 1 watched mint, 1 decoded (inventory)"
    assert f"{MINT}: mint authority {COUNCIL}, freeze authority {COUNCIL}" in inventory["message"]

    set_mint(world.ledger, OTHER_MINT, mint_authority=ATTACKER)  # no rule watches it
    set_mint(world.ledger, MINT, mint_authority=ATTACKER)
    notes = world.wait_notes(2)
    assert notes[1]["title"] == (
        f"[CRITICAL] mint-powers: mint {short(MINT)}: mint authority changed: "
        f"{short(COUNCIL)} -> {short(ATTACKER)}"
    )

    world.ledger.faults.inject("http_503_html", count=1_000_000)
    world.wait_polls("getMultipleAccounts", 2)
    set_mint(world.ledger, MINT, freeze_authority=None)
    time.sleep(5)
    assert len(world.notes()) == 2
    world.ledger.faults.clear()
    notes = world.wait_notes(3)
    assert notes[2]["title"] == (
        f"[CRITICAL] mint-powers: mint {short(MINT)}: freeze authority removed "
        f"(was {short(COUNCIL)})"
    )
    world.wait_polls("getMultipleAccounts", 6)
    assert len(world.notes()) == 3

    das_of(world.ledger).programs.set_program_account(TOKEN_PROGRAM, MINT, bytes(82))
    notes = world.wait_notes(4)
    assert notes[3]["title"] == f"[CRITICAL] mint-powers: mint {short(MINT)} cannot be verified"
    set_mint(world.ledger, MINT)
    notes = world.wait_notes(5)
    assert notes[4]["title"] == (
        f"[RESOLVED] mint-powers: mint {short(MINT)} can be verified again"
    )
    world.wait_polls("getMultipleAccounts", 4)
    assert len(world.notes()) == 5
    assert OTHER_MINT not in "".join(note["message"] for note in world.notes())


PROGRAM = derived_pubkey("e2e watched program")


@pytest.fixture
def program_world(tmp_path: Path) -> Iterator[World]:
    ledger = Ledger(seed=14)
    set_upgradeable_program(ledger, PROGRAM, upgrade_authority=COUNCIL)
    common = {"every": "200ms", "group_wait": "0s", "notify": ["hooks"]}
    rules = [{"name": "upgrades", "kind": "upgrade_authority", "programs": [PROGRAM], **common}]
    yield from make_world(tmp_path, ledger, rules=rules, health={"unhealthy_after": 10_000})


def test_upgrade_authority_redeploy_through_an_outage_then_immutable(program_world: World) -> None:
    world = program_world
    world.daemon.start()
    [inventory] = world.wait_notes(1)
    assert inventory["title"] == "[INFO] upgrades: 1 watched program, 1 decoded (inventory)"
    assert f"{PROGRAM}: upgrade authority {COUNCIL}, deploy slot " in inventory["message"]

    world.ledger.faults.inject("http_503_html", count=1_000_000)
    world.wait_polls("getMultipleAccounts", 2)
    set_upgradeable_program(world.ledger, PROGRAM, redeploy=True)
    time.sleep(5)
    assert len(world.notes()) == 1
    world.ledger.faults.clear()
    notes = world.wait_notes(2)
    assert notes[1]["title"].startswith(
        f"[WARNING] upgrades: program {short(PROGRAM)}: redeployed (deploy slot "
    )
    set_upgradeable_program(world.ledger, PROGRAM, upgrade_authority=None)
    notes = world.wait_notes(3)
    assert notes[2]["title"] == (
        f"[WARNING] upgrades: program {short(PROGRAM)}: made immutable: upgrade authority "
        f"removed (was {short(COUNCIL)})"
    )
    world.wait_polls("getMultipleAccounts", 6)
    assert len(world.notes()) == 3


MULTISIG = derived_pubkey("e2e watched multisig")
MEMBER = derived_pubkey("e2e member")


@pytest.fixture
def multisig_world(tmp_path: Path) -> Iterator[World]:
    ledger = Ledger(seed=15)
    set_multisig(ledger, MULTISIG, members={COUNCIL: 7, MEMBER: 7}, threshold=2)
    common = {"every": "200ms", "group_wait": "0s", "notify": ["hooks"]}
    rules = [{"name": "ms", "kind": "multisig_changed", "multisigs": [MULTISIG], **common}]
    yield from make_world(tmp_path, ledger, rules=rules, health={"unhealthy_after": 10_000})


def test_multisig_changed_counters_are_quiet_a_change_through_an_outage_is_said_once(
    multisig_world: World,
) -> None:
    world = multisig_world
    world.daemon.start()
    [inventory] = world.wait_notes(1)
    assert inventory["title"] == "[INFO] ms: 1 watched multisig, 1 decoded (inventory)"
    set_multisig(world.ledger, MULTISIG, transaction_index=5)  # no change of its powers
    world.wait_polls("getMultipleAccounts", 4)
    assert len(world.notes()) == 1

    world.ledger.faults.inject("http_503_html", count=1_000_000)
    world.wait_polls("getMultipleAccounts", 2)
    set_multisig(world.ledger, MULTISIG, members={COUNCIL: 7, MEMBER: 7, ATTACKER: 7})
    time.sleep(5)
    assert len(world.notes()) == 1
    world.ledger.faults.clear()
    notes = world.wait_notes(2)
    assert notes[1]["title"] == (
        f"[WARNING] ms: multisig {short(MULTISIG)}: member added: {short(ATTACKER)} "
        "(initiate, vote, execute)"
    )
    world.wait_polls("getMultipleAccounts", 6)
    assert len(world.notes()) == 2


TREASURY = derived_pubkey("e2e powers treasury")
TOKEN_ACCOUNT, DELEGATE = derived_pubkey("e2e treasury usdc"), derived_pubkey("e2e delegate")


@pytest.fixture
def delegates_world(tmp_path: Path) -> Iterator[World]:
    ledger = Ledger(seed=16)
    das_of(ledger).set_token_account(
        TOKEN_ACCOUNT, mint=MINT, owner=TREASURY, amount=5_000_000, delegate=DELEGATE
    )
    changes = ["delegated", "undelegated", "allowance_increased", "close_authority_changed"]
    common = {"every": "200ms", "group_wait": "0s", "notify": ["hooks"], "changes": changes}
    rules = [{"name": "delegates", "kind": "token_accounts", "owners": [TREASURY], **common}]
    yield from make_world(tmp_path, ledger, rules=rules, health={"unhealthy_after": 10_000})


def test_token_accounts_allowance_spent_is_quiet_increased_is_said(delegates_world: World) -> None:
    world = delegates_world
    world.daemon.start()
    world.wait_polls("getTokenAccounts", 3)  # the quiet baseline
    das = das_of(world.ledger)
    das.set_token_account(TOKEN_ACCOUNT, amount=4_000_000, delegated_amount=4_000_000)
    world.wait_polls("getTokenAccounts", 4)
    assert world.notes() == []  # the delegate spent part of its allowance
    das.set_token_account(TOKEN_ACCOUNT, delegated_amount=10**12, close_authority=DELEGATE)
    [note] = world.wait_notes(1)
    assert note["title"] == f"[WARNING] delegates: 2 token account changes of {short(TREASURY)}"
    assert f"allowance 4000000 -> {10**12}, raw" in note["message"]
    assert f"(close authority none (the owner) -> {DELEGATE})" in note["message"]
    world.wait_polls("getTokenAccounts", 4)
    assert len(world.notes()) == 1
