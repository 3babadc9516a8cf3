"""Kind ``token_authorities``: spl-token and Token-2022 mints decoded from real account bytes (a
table), the powers' diff and step, and the observation through the real client against the
simulator (a missing mint, a refused call, more than 100 mints)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import base58
import pytest

from watcher.kinds import KINDS, word
from watcher.kinds.sources.powers import PowersObservation, diff_powers
from watcher.kinds.token_authorities import TokenAuthoritiesRule
from watcher.kinds.toolkit.layouts import (
    TOKEN_2022_PROGRAM,
    TOKEN_PROGRAM,
    NotDecodable,
    decode_mint,
)
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.authorities import MintPowers, mint_bytes, set_mint
from watcher.simulator.keys import derived_pubkey

SOURCE = KINDS["token_authorities"].source
# Two well-known keys in their raw bytes, as authorities: the Vote and Stake programs.
VOTE = "Vote111111111111111111111111111111111111111"
VOTE_HEX = "0761481d357474bb7c4d7624ebd3bdb3d8355e73d11043fc0da3538000000000"
STAKE = "Stake11111111111111111111111111111111111111"
STAKE_HEX = "06a1d8179137542a983437bdfe2a7ab2557f535c8a78722b68a49dc000000000"
SOME, NONE = "01000000", "00000000"
ZERO_KEY = "00" * 32
# USDC's layout (spl-token Mint, 82 bytes): mint authority Some(VOTE), supply
# 1,000,000,000,000 (u64 LE), decimals 6, initialized, freeze authority Some(STAKE).
MINT = bytes.fromhex(SOME + VOTE_HEX + "0010a5d4e8000000" + "06" + "01" + SOME + STAKE_HEX)
NO_AUTHORITIES = bytes.fromhex(NONE + ZERO_KEY + "0000000000000000" + "09" + "01" + NONE + ZERO_KEY)
# Token-2022: the same 82 bytes, zeros to 165, account type 1 (Mint), then TLV entries:
# PermanentDelegate (12, 32 bytes) = STAKE, TransferHook (14, 64 bytes) = authority VOTE,
# program STAKE.
EXTENDED = (
    MINT.ljust(165, b"\0")
    + b"\x01"
    + bytes.fromhex("0c002000" + STAKE_HEX)
    + bytes.fromhex("0e004000" + VOTE_HEX + STAKE_HEX)
)


def test_the_test_keys_are_the_programs_keys() -> None:
    assert base58.b58decode(VOTE).hex() == VOTE_HEX
    assert base58.b58decode(STAKE).hex() == STAKE_HEX
    assert struct.unpack("<Q", MINT[36:44]) == (10**12,)


def powers(**given: str | None) -> dict[str, str | None]:
    return given


@pytest.mark.parametrize(
    ("owner", "data", "decoded"),
    [
        (TOKEN_PROGRAM, MINT, powers(mint_authority=VOTE, freeze_authority=STAKE)),
        (TOKEN_PROGRAM, NO_AUTHORITIES, powers(mint_authority=None, freeze_authority=None)),
        (
            TOKEN_2022_PROGRAM,
            MINT,
            powers(
                mint_authority=VOTE,
                freeze_authority=STAKE,
                permanent_delegate=None,
                transfer_hook_program=None,
            ),
        ),
        (
            TOKEN_2022_PROGRAM,
            EXTENDED,
            powers(
                mint_authority=VOTE,
                freeze_authority=STAKE,
                permanent_delegate=STAKE,
                transfer_hook_program=STAKE,
            ),
        ),
        (TOKEN_PROGRAM, EXTENDED, "a mint has 82"),  # extensions under the old program
        (TOKEN_PROGRAM, MINT[:81], "81 bytes of data, a mint has 82"),
        (TOKEN_PROGRAM, MINT[:45] + b"\0" + MINT[46:], "an uninitialized mint"),
        (TOKEN_PROGRAM, b"\2" + MINT[1:], "unknown mint authority option tag 2"),
        (TOKEN_2022_PROGRAM, MINT.ljust(165, b"\0") + b"\x02", "account type 2"),
        (TOKEN_2022_PROGRAM, EXTENDED[:-1], "extension 14 runs past the data"),
        (VOTE, MINT, f"owned by {VOTE}, not a token program"),
    ],
)
def test_decode_mint(owner: str, data: bytes, decoded: dict[str, Any] | str) -> None:
    if isinstance(decoded, str):
        with pytest.raises(NotDecodable, match=decoded):
            decode_mint(owner, data)
    else:
        assert decode_mint(owner, data) == decoded


def test_the_simulator_writes_the_layouts_the_watcher_reads() -> None:
    plain = MintPowers(mint_authority=VOTE, freeze_authority=STAKE, supply=10**12)
    assert mint_bytes(plain) == MINT
    extended = MintPowers(True, VOTE, STAKE, STAKE, STAKE, supply=10**12)
    assert mint_bytes(extended) == EXTENDED


# -- the step --------------------------------------------------------------------------------

MINT_A, MINT_B = derived_pubkey("mint a"), derived_pubkey("mint b")


def rule(**keys: Any) -> TokenAuthoritiesRule:
    return TokenAuthoritiesRule.model_validate({"name": "mints", "mints": [MINT_A], **keys})


def test_inventory_then_each_power_changed_is_one_event() -> None:
    rules = [rule(severity="critical")]
    target = rules[0].targets[0]
    first = PowersObservation({MINT_A: powers(mint_authority=VOTE, freeze_authority=STAKE)})
    start = SOURCE.step(rules, target, None, first, 0.0)
    [inventory] = start.alerts
    assert inventory.severity == "info"
    assert inventory.is_inventory  # never paged
    assert word(inventory, rules[0]).title == (
        "[INFO] mints: 1 watched mint, 1 decoded (inventory)"
    )
    later = PowersObservation({MINT_A: powers(mint_authority=STAKE, freeze_authority=None)})
    outcome = SOURCE.step(rules, target, start.state, later, 60.0)
    assert not any(alert.is_inventory for alert in outcome.alerts)
    titles = [word(alert, rules[0]).title for alert in outcome.alerts]
    short = f"{MINT_A[:4]}…{MINT_A[-4:]}"
    assert titles == [
        f"[CRITICAL] mints: mint {short}: freeze authority removed (was Stak…1111)",
        f"[CRITICAL] mints: mint {short}: mint authority changed: Vote…1111 -> Stak…1111",
    ]
    assert SOURCE.step(rules, target, outcome.state, later, 120.0).alerts == ()


def test_inventory_false_is_quiet_and_members_diff_one_by_one() -> None:
    assert SOURCE.step([rule(inventory=False)], MINT_A, None, PowersObservation({}), 0).alerts == ()
    old = {"m": {"members": {VOTE: 7, STAKE: 1}, "threshold": 1}}
    new = PowersObservation({"m": {"members": {VOTE: 3, MINT_A: 7}, "threshold": 2}})
    changes = [(c["field"], c.get("member"), c["old"], c["new"]) for c in diff_powers(old, new)]
    assert changes == [
        ("members", MINT_A, None, 7),
        ("members", STAKE, 1, None),
        ("members", VOTE, 7, 3),
        ("threshold", None, 1, 2),
    ]


# -- the observation, through the real client and the simulator ------------------------------


@pytest.fixture
def server() -> Iterator[SimulatorServer]:
    ledger = Ledger(seed=5)
    set_mint(ledger, MINT_A, mint_authority=VOTE)
    set_mint(ledger, MINT_B, token_2022=True, mint_authority=VOTE, permanent_delegate=STAKE)
    with SimulatorServer(ledger) as server:
        yield server


async def test_observe_decodes_each_mint_and_names_a_missing_one(server: SimulatorServer) -> None:
    missing = derived_pubkey("no such mint")
    target = rule(mints=[MINT_A, MINT_B, missing]).targets[0]
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        seen = await SOURCE.observe(client, target, None)
    assert seen.powers[MINT_A] == powers(mint_authority=VOTE, freeze_authority=None)
    assert seen.powers[MINT_B]["permanent_delegate"] == STAKE
    assert seen.unverifiable == {missing: "no such account: not a token mint"}


async def test_more_than_100_mints_take_two_calls_and_a_refusal_names_its_error(
    server: SimulatorServer,
) -> None:
    many = [derived_pubkey(f"mint {n}") for n in range(120)]
    target = rule(mints=many).targets[0]
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        seen = await SOURCE.observe(client, target, None)
        assert len(seen.unverifiable) == 120
        calls = [r for r in server.requests if r.method == "getMultipleAccounts"]
        assert sorted(len(r.params[0]) for r in calls) == [20, 100]
        server.ledger.faults.inject(
            "rpc_error", method="getMultipleAccounts", code=-32600, message="Method not allowed"
        )
        refused = await SOURCE.observe(client, rule().targets[0], None)
    assert refused.unverifiable[MINT_A].startswith("the provider refused getMultipleAccounts")
    assert "Method not allowed" in refused.unverifiable[MINT_A]
