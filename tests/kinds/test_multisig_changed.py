"""Kind ``multisig_changed``: Squads v4 ``Multisig`` accounts decoded from real account bytes (a
table: Anchor's discriminator, then Borsh), the wording of each change, and the read through the
real client against the simulator."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from watcher.kinds import KINDS, word
from watcher.kinds.multisig_changed import MultisigChangedRule
from watcher.kinds.sources.powers import PowersObservation
from watcher.kinds.toolkit.layouts import SQUADS_V4_PROGRAM, NotDecodable, decode_multisig
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.authorities import set_multisig
from watcher.simulator.keys import derived_pubkey

SOURCE = KINDS["multisig_changed"].source
VOTE = "Vote111111111111111111111111111111111111111"
VOTE_HEX = "0761481d357474bb7c4d7624ebd3bdb3d8355e73d11043fc0da3538000000000"
STAKE = "Stake11111111111111111111111111111111111111"
STAKE_HEX = "06a1d8179137542a983437bdfe2a7ab2557f535c8a78722b68a49dc000000000"
DISCRIMINATOR = "e07479ba44a14fec"  # sha256("account:Multisig")[:8]
CREATE_KEY = "11" * 32
# create_key, config_authority (default: none), threshold 2 (u16), time_lock 3600 (u32),
# transaction_index 41, stale_transaction_index 40 (u64), rent_collector Some(STAKE), bump 255,
# members: 2 (u32), VOTE with 7 (initiate, vote, execute), STAKE with 2 (vote); then a hook
# None and room for more members.
HEAD = DISCRIMINATOR + CREATE_KEY + "00" * 32 + "0200" + "100e0000"
COUNTERS = "2900000000000000" + "2800000000000000"
MEMBERS = "02000000" + VOTE_HEX + "07" + STAKE_HEX + "02"
MULTISIG = bytes.fromhex(HEAD + COUNTERS + "01" + STAKE_HEX + "ff" + MEMBERS + "00") + bytes(66)
NO_RENT_COLLECTOR = bytes.fromhex(HEAD + COUNTERS + "00" + "ff" + MEMBERS)
CONTROLLED = bytes.fromhex(
    DISCRIMINATOR + CREATE_KEY + VOTE_HEX + "0100" + "00000000" + COUNTERS + "00ff" + MEMBERS
)


def test_the_discriminator_is_anchors() -> None:
    assert hashlib.sha256(b"account:Multisig").digest()[:8].hex() == DISCRIMINATOR


MEMBERS_DECODED = {VOTE: 7, STAKE: 2}


@pytest.mark.parametrize(
    ("owner", "data", "decoded"),
    [
        (
            SQUADS_V4_PROGRAM,
            MULTISIG,
            {
                "threshold": 2,
                "time_lock": 3600,
                "config_authority": None,
                "members": MEMBERS_DECODED,
            },
        ),
        (
            SQUADS_V4_PROGRAM,
            NO_RENT_COLLECTOR,
            {
                "threshold": 2,
                "time_lock": 3600,
                "config_authority": None,
                "members": MEMBERS_DECODED,
            },
        ),
        (
            SQUADS_V4_PROGRAM,
            CONTROLLED,
            {"threshold": 1, "time_lock": 0, "config_authority": VOTE, "members": MEMBERS_DECODED},
        ),
        (SQUADS_V4_PROGRAM, b"\0" * 8 + MULTISIG[8:], "its discriminator differs"),
        (SQUADS_V4_PROGRAM, MULTISIG[:90], "too short for a multisig"),
        (SQUADS_V4_PROGRAM, MULTISIG[:100], "the data ends before the members"),
        (SQUADS_V4_PROGRAM, NO_RENT_COLLECTOR[:-1], "2 members do not fit the data"),
        (VOTE, MULTISIG, "not the Squads v4 program"),
    ],
)
def test_decode_multisig(owner: str, data: bytes, decoded: dict[str, Any] | str) -> None:
    if isinstance(decoded, str):
        with pytest.raises(NotDecodable, match=decoded):
            decode_multisig(owner, data)
    else:
        assert decode_multisig(owner, data) == decoded


def rule(**keys: Any) -> MultisigChangedRule:
    return MultisigChangedRule.model_validate({"name": "ms", "multisigs": [VOTE], **keys})


def test_each_change_of_its_powers_is_one_event_and_counters_are_none() -> None:
    rules = [rule(inventory=False)]
    target = rules[0].targets[0]
    first = {"threshold": 2, "time_lock": 0, "config_authority": None, "members": {VOTE: 7}}
    start = SOURCE.step(rules, target, None, PowersObservation({VOTE: first}), 0.0)
    later = {**first, "threshold": 1, "members": {VOTE: 3, STAKE: 7}}
    outcome = SOURCE.step(rules, target, start.state, PowersObservation({VOTE: later}), 60.0)
    titles = [word(alert, rules[0]).title for alert in outcome.alerts]
    assert titles == [
        "[WARNING] ms: multisig Vote…1111: member added: Stak…1111 (initiate, vote, execute)",
        "[WARNING] ms: multisig Vote…1111: member Vote…1111 changed: initiate, vote, execute -> "
        "initiate, vote",
        "[WARNING] ms: multisig Vote…1111: threshold changed: 2 -> 1",
    ]


@pytest.fixture
def server() -> Iterator[SimulatorServer]:
    ledger = Ledger(seed=8)
    set_multisig(ledger, VOTE, members={VOTE: 7, STAKE: 2}, threshold=2, time_lock=3600)
    with SimulatorServer(ledger) as server:
        yield server


async def test_observe_decodes_the_simulators_multisig(server: SimulatorServer) -> None:
    plain = derived_pubkey("a plain account")
    server.ledger.accounts.set_account(plain, lamports=1)
    target = rule(multisigs=[VOTE, plain]).targets[0]
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        seen = await SOURCE.observe(client, target, None)
    assert seen.powers == {
        VOTE: {
            "threshold": 2,
            "time_lock": 3600,
            "config_authority": None,
            "members": MEMBERS_DECODED,
        }
    }
    assert seen.unverifiable[plain].startswith("not a Squads v4 multisig: owned by 1111")
