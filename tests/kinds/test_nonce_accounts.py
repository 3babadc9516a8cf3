"""Kind ``nonce_accounts``: the nonce layout decoded from real account bytes (a table), the diff
and step (inventory, quiet baseline, changes, cannot be verified), and the observation through
the real client against the simulator (moved told from closed, a refused call, a transient
failure)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import base58
import pytest

from watcher.core.errors import TransientRpcError
from watcher.kinds import KINDS, word
from watcher.kinds.nonce_accounts import NonceAccountsRule, NonceObservation, diff_nonces
from watcher.kinds.toolkit.layouts import SYSTEM_PROGRAM, NonceState, NotDecodable, decode_nonce
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey
from watcher.simulator.nonces import close_nonce_account, set_nonce_account

SOURCE = KINDS["nonce_accounts"].source
SIGNER = derived_pubkey("signer")
OTHER_SIGNER = derived_pubkey("other signer")
STRANGER = derived_pubkey("stranger")
ACCOUNT = derived_pubkey("nonce account")
SECOND = derived_pubkey("second nonce account")

# A nonce account as the System program writes it (bincode): u32 Versions tag (1: current),
# u32 State tag (1: initialized), the authority, the durable nonce, lamports per signature
# (5000). The authority and nonce here are two well-known keys: the Vote program and the
# SPL Token program, in their 32 raw bytes.
VOTE_PROGRAM = "Vote111111111111111111111111111111111111111"
TOKEN_PROGRAM = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
VOTE_HEX = "0761481d357474bb7c4d7624ebd3bdb3d8355e73d11043fc0da3538000000000"
TOKEN_HEX = "06ddf6e1d765a193d9cbe146ceeb79ac1cb485ed5f5b37913a8cf5857eff00a9"
CURRENT = bytes.fromhex("01000000" + "01000000" + VOTE_HEX + TOKEN_HEX + "8813000000000000")
LEGACY = bytes.fromhex("00000000" + "01000000" + VOTE_HEX + TOKEN_HEX + "8813000000000000")
UNINITIALIZED = bytes.fromhex("01000000" + "00000000") + bytes(72)


def test_the_test_keys_are_the_programs_keys() -> None:
    assert base58.b58decode(VOTE_PROGRAM).hex() == VOTE_HEX
    assert base58.b58decode(TOKEN_PROGRAM).hex() == TOKEN_HEX


@pytest.mark.parametrize(
    ("owner", "data", "decoded"),
    [
        (SYSTEM_PROGRAM, CURRENT, NonceState("current", VOTE_PROGRAM, TOKEN_PROGRAM, 5000)),
        (SYSTEM_PROGRAM, LEGACY, NonceState("legacy", VOTE_PROGRAM, TOKEN_PROGRAM, 5000)),
        (SYSTEM_PROGRAM, UNINITIALIZED, "an uninitialized nonce account"),
        (SYSTEM_PROGRAM, CURRENT[:79], "79 bytes of data, a nonce account has 80"),
        (SYSTEM_PROGRAM, CURRENT + b"\0", "81 bytes of data, a nonce account has 80"),
        (SYSTEM_PROGRAM, b"\2" + CURRENT[1:], "unknown nonce version tag 2"),
        (SYSTEM_PROGRAM, CURRENT[:4] + b"\7" + CURRENT[5:], "unknown nonce state tag 7"),
        (TOKEN_PROGRAM, CURRENT, f"owned by {TOKEN_PROGRAM}, not the System program"),
    ],
)
def test_decode_nonce(owner: str, data: bytes, decoded: NonceState | str) -> None:
    if isinstance(decoded, str):
        with pytest.raises(NotDecodable, match=decoded):
            decode_nonce(owner, data)
    else:
        assert decode_nonce(owner, data) == decoded


def test_the_simulator_writes_the_layout_the_watcher_reads() -> None:
    ledger = Ledger(seed=3)
    set_nonce_account(ledger, ACCOUNT, authority=SIGNER)
    data = das_of(ledger).programs.data_of(SYSTEM_PROGRAM, ACCOUNT)
    assert data is not None and len(data) == 80
    assert decode_nonce(SYSTEM_PROGRAM, data).authority == SIGNER


# -- the step --------------------------------------------------------------------------------


def rule(name: str = "nonces", **keys: Any) -> NonceAccountsRule:
    return NonceAccountsRule.model_validate({"name": name, "authorities": [SIGNER], **keys})


def nonce(authority: str = SIGNER, value: str = "one") -> NonceState:
    return NonceState("current", authority, derived_pubkey(value), 5000)


TARGET = rule().targets[0]


def test_the_first_poll_is_an_info_inventory_then_changes_are_events() -> None:
    rules = [rule(severity="critical")]
    first = SOURCE.step(rules, TARGET, None, NonceObservation({ACCOUNT: nonce()}), 0.0)
    [inventory] = first.alerts
    worded = word(inventory, rules[0])
    assert inventory.severity == "info"
    assert inventory.is_inventory  # never paged
    assert worded.title == "[INFO] nonces: 1 durable nonce account on 1 watched key (inventory)"
    assert f"- {ACCOUNT}: authority {SIGNER}" in worded.body
    again = SOURCE.step(rules, TARGET, first.state, NonceObservation({ACCOUNT: nonce()}), 60.0)
    assert again.alerts == ()  # nothing changed: nothing said, the inventory not repeated
    observation = NonceObservation(
        {ACCOUNT: nonce(value="two"), SECOND: nonce()}, first_signature={SECOND: "5" * 88}
    )
    later = SOURCE.step(rules, TARGET, again.state, observation, 120.0)
    titles = sorted(word(alert, rules[0]).title for alert in later.alerts)
    short = f"{ACCOUNT[:4]}…{ACCOUNT[-4:]}"
    assert titles == sorted(
        [
            f"[CRITICAL] nonces: durable nonce account {short} advanced (authority "
            f"{SIGNER[:4]}…{SIGNER[-4:]}): a transaction signed against it may have run",
            f"[CRITICAL] nonces: durable nonce account {SECOND[:4]}…{SECOND[-4:]} created "
            f"(authority {SIGNER[:4]}…{SIGNER[-4:]})",
        ]
    )
    created = next(a for a in later.alerts if a.facts["change"] == "created")
    assert "5" * 88 in word(created, rules[0]).body


def test_inventory_false_is_a_quiet_baseline_and_changes_filter() -> None:
    rules = [rule(inventory=False, changes=["closed"])]
    first = SOURCE.step(rules, TARGET, None, NonceObservation({ACCOUNT: nonce()}), 0.0)
    assert first.alerts == ()
    advanced = NonceObservation({ACCOUNT: nonce(value="two")})
    second = SOURCE.step(rules, TARGET, first.state, advanced, 60.0)
    assert second.alerts == ()  # advanced is not among the rule's changes
    closed = SOURCE.step(rules, TARGET, second.state, NonceObservation({}, {ACCOUNT: None}), 90)
    [alert] = closed.alerts
    assert alert.facts["change"] == "closed" and alert.facts["account"] == ACCOUNT
    assert alert.subject == SIGNER  # the watched key it concerns


def test_moved_and_closed_are_told_apart() -> None:
    previous = {
        ACCOUNT: {"authority": SIGNER, "nonce": derived_pubkey("one"), "fee": 5000},
        SECOND: {"authority": SIGNER, "nonce": derived_pubkey("one"), "fee": 5000},
    }
    observation = NonceObservation({}, {ACCOUNT: nonce(STRANGER), SECOND: None})
    changes = diff_nonces(previous, observation)
    assert [(c["account"], c["change"]) for c in changes] == sorted(
        [(ACCOUNT, "authority_changed"), (SECOND, "closed")]
    )
    moved = next(c for c in changes if c["change"] == "authority_changed")
    assert (moved["old_authority"], moved["new_authority"]) == (SIGNER, STRANGER)


def test_an_undecodable_account_fires_once_keeps_its_state_and_resolves() -> None:
    rules = [rule()]
    first = SOURCE.step(rules, TARGET, None, NonceObservation({ACCOUNT: nonce()}), 0.0)
    bad = NonceObservation({}, unverifiable={ACCOUNT: ("79 bytes of data", SIGNER)})
    fired = SOURCE.step(rules, TARGET, first.state, bad, 60.0)
    [alert] = fired.alerts
    worded = word(alert, rules[0])
    assert alert.reason == "firing"
    assert worded.title.endswith(f"nonce account {ACCOUNT[:4]}…{ACCOUNT[-4:]} cannot be verified")
    assert "Why: 79 bytes of data" in worded.body
    assert fired.state["accounts"] == first.state["accounts"]  # kept, not closed
    assert SOURCE.step(rules, TARGET, fired.state, bad, 120.0).alerts == ()
    back = SOURCE.step(rules, TARGET, fired.state, NonceObservation({ACCOUNT: nonce()}), 180.0)
    [resolved] = back.alerts
    assert resolved.reason == "resolved" and resolved.dedup_key != alert.dedup_key
    assert word(resolved, rules[0]).title.startswith("[RESOLVED] nonces: nonce account")


# -- the observation, through the real client and the simulator ------------------------------


@pytest.fixture
def server() -> Iterator[SimulatorServer]:
    ledger = Ledger(seed=9)
    set_nonce_account(ledger, ACCOUNT, authority=SIGNER)
    set_nonce_account(ledger, SECOND, authority=SIGNER)
    set_nonce_account(ledger, derived_pubkey("theirs"), authority=STRANGER)
    with SimulatorServer(ledger) as server:
        yield server


async def test_observe_filters_by_authority_and_reads_the_missing_again(
    server: SimulatorServer,
) -> None:
    target = rule(authorities=[SIGNER, OTHER_SIGNER]).targets[0]
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        first = await SOURCE.observe(client, target, None)
        assert sorted(first.found) == sorted([ACCOUNT, SECOND])
        state = SOURCE.step([rule()], target, None, first, 0.0).state
        set_nonce_account(server.ledger, ACCOUNT, authority=STRANGER)
        close_nonce_account(server.ledger, SECOND)
        new = derived_pubkey("staged")
        set_nonce_account(server.ledger, new, authority=OTHER_SIGNER)
        second = await SOURCE.observe(client, target, state)
    assert second.gone == {ACCOUNT: decode_nonce_of(server, ACCOUNT), SECOND: None}
    assert sorted(second.found) == [new]
    assert second.first_signature[new] is not None  # its creating transaction
    requests = [r for r in server.requests if r.method == "getProgramAccounts"]
    assert {r.params[1]["filters"][1]["memcmp"]["bytes"] for r in requests} == {
        SIGNER,
        OTHER_SIGNER,
    }
    assert all(r.params[1]["filters"][0] == {"dataSize": 80} for r in requests)


def decode_nonce_of(server: SimulatorServer, account: str) -> NonceState:
    data = das_of(server.ledger).programs.data_of(SYSTEM_PROGRAM, account)
    assert data is not None
    return decode_nonce(SYSTEM_PROGRAM, data)


async def test_a_refused_call_cannot_be_verified_and_keeps_what_was_known(
    server: SimulatorServer,
) -> None:
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        first = await SOURCE.observe(client, TARGET, None)
        state = SOURCE.step([rule()], TARGET, None, first, 0.0).state
        close_nonce_account(server.ledger, ACCOUNT)  # unseen: the call is refused
        server.ledger.faults.inject(
            "rpc_error",
            method="getProgramAccounts",
            code=-32010,
            message="11111111111111111111111111111111 excluded from account secondary indexes",
        )
        refused = await SOURCE.observe(client, TARGET, state)
    assert refused.refused == {SIGNER} and refused.gone == {}
    outcome = SOURCE.step([rule()], TARGET, state, refused, 60.0)
    [alert] = outcome.alerts
    worded = word(alert, rule())
    assert worded.title == (
        f"[WARNING] nonces: nonce accounts of {SIGNER[:4]}…{SIGNER[-4:]} cannot be verified"
    )
    assert "excluded from account secondary indexes" in worded.body
    assert outcome.state["accounts"] == state["accounts"]


async def test_a_transient_failure_fails_the_poll(server: SimulatorServer) -> None:
    server.ledger.faults.inject("http_503_html", method="getProgramAccounts")
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        with pytest.raises(TransientRpcError):
            await SOURCE.observe(client, TARGET, None)


def test_watcher_simulate_creates_moves_advances_and_closes_a_nonce_account() -> None:
    from typer.testing import CliRunner

    from watcher.cli import app
    from watcher.ruletest.control import apply_control

    ledger = Ledger(seed=4)
    programs = das_of(ledger).programs
    with SimulatorServer(ledger, control=lambda body: apply_control(ledger, body)) as served:

        def simulate(*args: str) -> tuple[int, str]:
            result = CliRunner().invoke(
                app, ["simulate", "nonce", *args, "--port", str(served.port)]
            )
            return result.exit_code, result.stdout + result.stderr

        code, said = simulate(ACCOUNT)
        assert code == 1 and "name its authority to create it" in said
        assert simulate(ACCOUNT, "--authority", SIGNER)[0] == 0
        first = decode_nonce_of(served, ACCOUNT)
        assert first.authority == SIGNER
        assert simulate(ACCOUNT, "--advance")[0] == 0
        assert decode_nonce_of(served, ACCOUNT).nonce != first.nonce
        assert simulate(ACCOUNT, "--authority", STRANGER)[0] == 0
        assert decode_nonce_of(served, ACCOUNT).authority == STRANGER
        assert simulate(ACCOUNT, "--close")[0] == 0
        assert programs.data_of(SYSTEM_PROGRAM, ACCOUNT) is None


def test_program_account_data_is_base64_as_a_pair_or_a_bare_string() -> None:
    import base64

    from pydantic import TypeAdapter

    from watcher.ledger.models_das import ProgramAccountsData

    encoded = base64.b64encode(CURRENT).decode()
    account = {"executable": False, "lamports": 1447680, "owner": SYSTEM_PROGRAM, "space": 80}
    adapter = TypeAdapter(ProgramAccountsData)
    for data in ([encoded, "base64"], encoded):
        [entry] = adapter.validate_python(
            [{"pubkey": ACCOUNT, "account": {**account, "data": data}}]
        )
        assert decode_nonce(entry.account.owner, entry.account.raw_data).authority == VOTE_PROGRAM
