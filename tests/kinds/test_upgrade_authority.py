"""Kind ``upgrade_authority``: the upgradeable loader's program and program data accounts
decoded from real account bytes (a table), its wording, and the two reads through the real
client against the simulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from watcher.kinds import KINDS, word
from watcher.kinds.sources.powers import PowersObservation
from watcher.kinds.toolkit.layouts import (
    UPGRADEABLE_LOADER,
    NotDecodable,
    decode_program,
    decode_program_data,
)
from watcher.kinds.upgrade_authority import UpgradeAuthorityRule
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.authorities import (
    ProgramPowers,
    program_data_address,
    program_data_bytes,
    set_upgradeable_program,
)
from watcher.simulator.keys import derived_pubkey

SOURCE = KINDS["upgrade_authority"].source
VOTE = "Vote111111111111111111111111111111111111111"
VOTE_HEX = "0761481d357474bb7c4d7624ebd3bdb3d8355e73d11043fc0da3538000000000"
STAKE = "Stake11111111111111111111111111111111111111"
STAKE_HEX = "06a1d8179137542a983437bdfe2a7ab2557f535c8a78722b68a49dc000000000"
# UpgradeableLoaderState::Program { programdata_address: STAKE } (bincode: u32 tag 2).
PROGRAM = bytes.fromhex("02000000" + STAKE_HEX)
# UpgradeableLoaderState::ProgramData { slot: 300,000,000, upgrade_authority_address:
# Some(VOTE) }, then the ELF.
SLOT_HEX = "00a3e11100000000"
PROGRAM_DATA = bytes.fromhex("03000000" + SLOT_HEX + "01" + VOTE_HEX) + b"\x7fELF"
IMMUTABLE = bytes.fromhex("03000000" + SLOT_HEX + "00") + bytes(32) + b"\x7fELF"


@pytest.mark.parametrize(
    ("data", "decoded"),
    [
        (PROGRAM_DATA, {"upgrade_authority": VOTE, "deploy_slot": 300_000_000}),
        (IMMUTABLE, {"upgrade_authority": None, "deploy_slot": 300_000_000}),
        (PROGRAM + bytes(9), "loader state tag 2, program data.s is 3"),
        (PROGRAM_DATA[:44], "44 bytes of data"),
        (PROGRAM_DATA[:12] + b"\x05" + PROGRAM_DATA[13:], "unknown upgrade authority option"),
    ],
)
def test_decode_program_data(data: bytes, decoded: dict[str, Any] | str) -> None:
    if isinstance(decoded, str):
        with pytest.raises(NotDecodable, match=decoded):
            decode_program_data(UPGRADEABLE_LOADER, data)
    else:
        assert decode_program_data(UPGRADEABLE_LOADER, data) == decoded


def test_decode_program() -> None:
    assert decode_program(UPGRADEABLE_LOADER, PROGRAM) == STAKE
    with pytest.raises(NotDecodable, match="loader state tag 3, a program's is 2"):
        decode_program(UPGRADEABLE_LOADER, PROGRAM_DATA)
    with pytest.raises(NotDecodable, match="not the upgradeable loader"):
        decode_program(VOTE, PROGRAM)


def test_the_simulator_writes_the_layout_the_watcher_reads() -> None:
    assert program_data_bytes(ProgramPowers(VOTE, 300_000_000)).startswith(PROGRAM_DATA)
    assert program_data_bytes(ProgramPowers(None, 300_000_000)).startswith(IMMUTABLE)


def rule(**keys: Any) -> UpgradeAuthorityRule:
    return UpgradeAuthorityRule.model_validate({"name": "upgrades", "programs": [VOTE], **keys})


def test_redeployed_and_made_immutable_are_said_so() -> None:
    rules = [rule(inventory=False)]
    target = rules[0].targets[0]
    first = PowersObservation({VOTE: {"upgrade_authority": STAKE, "deploy_slot": 10}})
    start = SOURCE.step(rules, target, None, first, 0.0)
    assert start.alerts == ()
    later = PowersObservation({VOTE: {"upgrade_authority": None, "deploy_slot": 12}})
    titles = [
        word(alert, rules[0]).title
        for alert in SOURCE.step(rules, target, start.state, later, 60.0).alerts
    ]
    assert titles == [
        "[WARNING] upgrades: program Vote…1111: redeployed (deploy slot 10 -> 12)",
        "[WARNING] upgrades: program Vote…1111: made immutable: upgrade authority removed "
        "(was Stak…1111)",
    ]


@pytest.fixture
def server() -> Iterator[SimulatorServer]:
    ledger = Ledger(seed=6)
    set_upgradeable_program(ledger, VOTE, upgrade_authority=STAKE)
    with SimulatorServer(ledger) as server:
        yield server


async def test_observe_reads_the_program_then_its_program_data(server: SimulatorServer) -> None:
    missing = derived_pubkey("no such program")
    target = rule(programs=[VOTE, missing]).targets[0]
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        seen = await SOURCE.observe(client, target, None)
    assert seen.powers[VOTE]["upgrade_authority"] == STAKE
    assert seen.unverifiable == {missing: "no such account: not an upgradeable program"}
    calls = [r.params[0] for r in server.requests if r.method == "getMultipleAccounts"]
    assert calls == [sorted([VOTE, missing]), [program_data_address(VOTE)]]
