"""Kind ``token_accounts``: the pure diff and step, the answer models, the simulator's
getTokenAccounts over real HTTP, and paging through it with the real RPC client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from watcher.kinds import KINDS, word
from watcher.kinds.rule_files import read_rules
from watcher.kinds.token_accounts import (
    CHANGES,
    MAX_PAGES,
    AccountChange,
    Flags,
    TokenAccountsObservation,
    TokenAccountsRule,
    diff_accounts,
)
from watcher.ledger.models_das import TokenAccount, TokenAccountPage
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey

MINT = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
OWNER = derived_pubkey("owner")
DELEGATE = derived_pubkey("delegate")
A, B, C = (derived_pubkey(f"account-{n}") for n in "abc")
SOURCE = KINDS["token_accounts"].source


def account(address: str, *, frozen: bool = False, delegate: str | None = None) -> TokenAccount:
    return TokenAccount(
        address=address, mint=MINT, owner=OWNER, frozen=frozen, amount=1, delegate=delegate
    )


def rule(name: str = "deposits", **keys: Any) -> TokenAccountsRule:
    return TokenAccountsRule(name=name, owners=(OWNER,), **keys)


# -- the diff --------------------------------------------------------------------------------

DIFFS = [
    ({}, {A: Flags()}, [AccountChange(A, "created")]),
    ({A: Flags()}, {}, [AccountChange(A, "closed")]),
    ({A: Flags()}, {A: Flags(frozen=True)}, [AccountChange(A, "frozen")]),
    ({A: Flags(frozen=True)}, {A: Flags()}, [AccountChange(A, "thawed")]),
    ({A: Flags()}, {A: Flags(delegate=DELEGATE)}, [AccountChange(A, "delegated", DELEGATE)]),
    ({A: Flags(delegate=DELEGATE)}, {A: Flags()}, [AccountChange(A, "undelegated", DELEGATE)]),
    ({A: Flags(delegate=DELEGATE)}, {A: Flags(delegate=B)}, [AccountChange(A, "delegated", B)]),
    (
        {},
        {A: Flags(frozen=True)},
        [AccountChange(A, "created"), AccountChange(A, "frozen")],
    ),
    ({A: Flags(frozen=True, delegate=B)}, {A: Flags(frozen=True, delegate=B)}, []),
]


@pytest.mark.parametrize(("old", "new", "expected"), DIFFS)
def test_diff_names_each_change(
    old: dict[str, Flags], new: dict[str, Flags], expected: list[AccountChange]
) -> None:
    assert diff_accounts(old, new) == expected


flags = st.builds(Flags, st.booleans(), st.sampled_from([None, DELEGATE, B]))
snapshots = st.dictionaries(st.sampled_from([A, B, C]), flags)


@given(snapshots, snapshots)
def test_diff_reports_one_event_per_changed_fact(
    old: dict[str, Flags], new: dict[str, Flags]
) -> None:
    changes = diff_accounts(old, new)
    expected = 0
    for address in old.keys() | new.keys():
        before, after = old.get(address), new.get(address)
        if before is None or after is None:
            expected += 1
            before = before or Flags()
            if after is None:
                continue
        expected += (before.frozen != after.frozen) + (before.delegate != after.delegate)
    assert len(changes) == expected
    assert diff_accounts(new, new) == []


def test_flags_round_trip_through_their_state_code() -> None:
    for value in (Flags(), Flags(frozen=True), Flags(delegate=DELEGATE), Flags(True, DELEGATE)):
        assert Flags.of_code(value.code()) == value


# -- the step --------------------------------------------------------------------------------


def observed(*accounts: TokenAccount) -> TokenAccountsObservation:
    return TokenAccountsObservation(tuple(accounts))


def test_first_poll_is_the_baseline_then_each_change_is_one_digest_line() -> None:
    rules = [rule()]
    target = f"owner={OWNER}"
    first = SOURCE.step(rules, target, None, observed(account(A), account(B)), 0.0)
    assert first.alerts == ()
    second = SOURCE.step(
        rules, target, first.state, observed(account(A, frozen=True), account(C)), 30.0
    )
    [alert] = second.alerts
    assert alert.subject == OWNER
    assert alert.reason == "event"
    worded = word(alert, rules[0])
    short = f"{OWNER[:4]}…{OWNER[-4:]}"
    assert worded.title == f"[WARNING] deposits: 3 token account changes of {short}"
    assert f"- frozen: {A}, mint EPjF…Dt1v" in worded.body
    assert f"- closed: {B}" in worded.body
    assert f"- created: {C}, mint EPjF…Dt1v" in worded.body
    # The same answer again: nothing more.
    again = observed(account(A, frozen=True), account(C))
    assert SOURCE.step(rules, target, second.state, again, 60.0).alerts == ()


def test_a_rule_reports_only_its_changes_and_a_new_rule_baselines() -> None:
    target = f"owner={OWNER}"
    base = SOURCE.step([rule()], target, None, observed(account(A)), 0.0)
    rules = [rule(changes=("delegated",)), rule("later")]
    outcome = SOURCE.step(
        rules, target, base.state, observed(account(A, frozen=True, delegate=DELEGATE)), 30.0
    )
    [alert] = outcome.alerts
    assert alert.rule == "deposits"
    assert [change["change"] for change in alert.facts["changes"]] == ["delegated"]
    closed = SOURCE.step(rules, target, outcome.state, observed(), 60.0)
    assert sorted(alert.rule for alert in closed.alerts) == ["later"]


def test_partial_answers_and_a_vanished_snapshot_are_doubted() -> None:
    target = f"owner={OWNER}"
    state = SOURCE.step([rule()], target, None, observed(account(A), account(B)), 0.0).state
    partial = TokenAccountsObservation((account(A),), "the service reported 1 error")
    doubt = SOURCE.doubt(state, partial, 1.0)
    assert doubt is not None and not doubt.confirmable
    gone = SOURCE.doubt(state, observed(account(C)), 1.0)
    assert gone is not None and gone.confirmable
    assert SOURCE.doubt(state, observed(account(A)), 1.0) is None


def test_targets_are_the_queries() -> None:
    assert rule().targets == (f"owner={OWNER}",)
    both = TokenAccountsRule(name="x", owners=(OWNER,), mints=(MINT,))
    assert both.targets == (f"owner={OWNER},mint={MINT}",)
    assert TokenAccountsRule(name="x", mints=(MINT,)).targets == (f"mint={MINT}",)
    assert both.changes == CHANGES


def test_rule_keys_are_checked_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(
        "rules:\n"
        "  - name: a\n    kind: token_accounts\n"
        "  - name: b\n    kind: token_accounts\n"
        f"    owners: [{OWNER}]\n    changes: [created, burnt]\n"
    )
    _, problems = read_rules([path], None)
    text = [str(problem) for problem in problems]
    assert any(line.startswith(f"{path}:2:") and "owners, mints or both" in line for line in text)
    assert any(line.startswith(f"{path}:7:") and "burnt" in line for line in text)


# -- the answer model ------------------------------------------------------------------------

GOOD_ACCOUNT = {
    "address": A,
    "mint": MINT,
    "owner": OWNER,
    "frozen": False,
    "amount": 5,
    "delegate": None,
    "delegated_amount": 0,
    "close_authority": None,
    "extensions": None,
}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"frozen": "no"}, "a frozen flag that is not a boolean"),
        ({"amount": -1}, "a negative amount"),
        ({"amount": 2**64}, "an amount beyond u64"),
        ({"amount": 1.5}, "a fractional amount"),
        ({"address": "not-a-key"}, "an address that is not a pubkey"),
        ({"delegate": "0OIl"}, "a delegate that is not base58"),
    ],
)
def test_a_malformed_token_account_is_refused(change: dict[str, Any], why: str) -> None:
    page = {"total": 1, "limit": 10, "token_accounts": [{**GOOD_ACCOUNT, **change}], "errors": []}
    with pytest.raises(ValidationError):
        TokenAccountPage.model_validate(page)


def test_a_page_is_refused_when_it_repeats_an_account_or_overflows_its_limit() -> None:
    TokenAccountPage.model_validate({"total": 1, "limit": 1, "token_accounts": [GOOD_ACCOUNT]})
    for page in (
        {"total": 2, "limit": 5, "token_accounts": [GOOD_ACCOUNT, GOOD_ACCOUNT]},
        {"total": 2, "limit": 1, "token_accounts": [GOOD_ACCOUNT, {**GOOD_ACCOUNT, "address": B}]},
        {"total": -1, "limit": 1, "token_accounts": []},
    ):
        with pytest.raises(ValidationError):
            TokenAccountPage.model_validate(page)


# -- the simulator and the client, over real HTTP --------------------------------------------


@pytest.fixture
def ledger() -> Ledger:
    ledger = Ledger(seed=3)
    das = das_of(ledger)
    for n in range(25):
        das.set_token_account(derived_pubkey(f"acct-{n}"), mint=MINT, owner=OWNER, amount=n)
    das.set_token_account(derived_pubkey("other"), mint=MINT, owner=DELEGATE)
    return ledger


@pytest.fixture
def server(ledger: Ledger) -> Iterator[SimulatorServer]:
    with SimulatorServer(ledger) as server:
        yield server


def call(server: SimulatorServer, params: list[Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "getTokenAccounts", "params": params}
    answer: dict[str, Any] = httpx.post(server.url, json=body, timeout=5).json()
    return answer


def test_simulator_pages_by_number_and_by_cursor(server: SimulatorServer) -> None:
    first = call(server, [None, OWNER, 1, 10])["result"]
    assert (first["total"], first["limit"], first["page"], first["errors"]) == (25, 10, 1, [])
    assert len(first["token_accounts"]) == 10
    third = call(server, [None, OWNER, 3, 10])["result"]
    assert len(third["token_accounts"]) == 5 and third["cursor"] is None
    second = call(server, [None, OWNER, None, 10, first["cursor"]])["result"]
    addresses = [entry["address"] for entry in second["token_accounts"]]
    assert addresses == sorted(addresses) and addresses[0] > first["cursor"]
    assert call(server, [MINT])["result"]["total"] == 26
    assert set(first["token_accounts"][0]) == set(GOOD_ACCOUNT)


@pytest.mark.parametrize(
    "params",
    [
        [],
        [None, None],
        [None, OWNER, 0],
        [None, OWNER, 1, 1001],
        ["nope"],
        [None, OWNER, 1, 10, "x"],
    ],
)
def test_simulator_refuses_bad_params(server: SimulatorServer, params: list[Any]) -> None:
    assert call(server, params)["error"]["code"] == -32602


async def test_observe_reads_every_page(
    server: SimulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("watcher.kinds.token_accounts.PAGE_LIMIT", 7)
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        seen = await SOURCE.observe(client, f"owner={OWNER}", None)
        assert seen.problem is None and len(seen.accounts) == 25
        monkeypatch.setattr("watcher.kinds.token_accounts.MAX_PAGES", 2)
        capped = await SOURCE.observe(client, f"owner={OWNER}", None)
    assert capped.problem == f"more than {2 * 7} token accounts"
    assert MAX_PAGES > 2
