"""Kind balance_below: the pure assessment, the rule keys, and the accounts source reading
every watched account with getMultipleAccounts, at most 100 keys per call, from a real
simulator."""

from __future__ import annotations

import asyncio
import hashlib
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import base58
import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.core.errors import RpcError
from watcher.kinds import KINDS, word
from watcher.kinds.balance_below import BalanceBelowRule, balance_assessment, step_balances
from watcher.kinds.rule_files import read_rules
from watcher.kinds.sources.accounts import SOURCE, AccountObservation
from watcher.ledger.batching import chunks
from watcher.ledger.models import TokenAmount
from watcher.ledger.models_accounts import Account
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer


def key(name: str) -> str:
    return base58.b58encode(hashlib.sha256(name.encode()).digest()).decode()


IDENTITY = key("identity")
TOKEN_ACCOUNT = key("float")
MINT = key("mint")


def account(lamports: int) -> Account:
    return Account.model_validate(
        {
            "data": ["", "base64"],
            "executable": False,
            "lamports": lamports,
            "owner": "11111111111111111111111111111111",
            "space": 0,
        }
    )


def sol_rule(**fields: Any) -> BalanceBelowRule:
    base = {"name": "low", "accounts": [IDENTITY], "min_sol": 10}
    return BalanceBelowRule.model_validate({**base, **fields})


def token_rule(**fields: Any) -> BalanceBelowRule:
    base = {"name": "float", "token_accounts": [TOKEN_ACCOUNT], "min_amount": 25000}
    return BalanceBelowRule.model_validate({**base, **fields})


# -- the assessment (pure) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lamports", "min_sol", "active", "shown"),
    [
        (9_999_999_999, 10, True, "9.999999999"),
        (10_000_000_000, 10, False, "10"),
        (None, 10, True, "0"),  # a missing account counts as 0
        (None, 0, False, "0"),
        (1_500_000_000, 1.5, False, "1.5"),
        (1_499_999_999, 1.5, True, "1.499999999"),
    ],
)
def test_lamports_under_min_sol_are_active(
    lamports: int | None, min_sol: float, active: bool, shown: str
) -> None:
    observed = AccountObservation(
        IDENTITY, 7, account=None if lamports is None else account(lamports)
    )
    got, facts = balance_assessment(sol_rule(min_sol=min_sol), observed)
    assert (got, facts["amount_ui"], facts["exists"]) == (active, shown, lamports is not None)


@pytest.mark.parametrize(
    ("raw", "decimals", "active"),
    [(24_999_999_999, 6, True), (25_000_000_000, 6, False), (2_500_000, 2, False), (0, 0, True)],
)
def test_token_amount_under_min_amount_in_token_units(
    raw: int, decimals: int, active: bool
) -> None:
    token = TokenAmount(amount=raw, decimals=decimals)
    got, _ = balance_assessment(token_rule(), AccountObservation(TOKEN_ACCOUNT, 7, token=token))
    assert got is active


@given(lamports=st.integers(0, 10**18), tenths=st.integers(0, 10**6))
def test_active_exactly_when_lamports_are_under_the_minimum(lamports: int, tenths: int) -> None:
    rule = sol_rule(min_sol=tenths / 10)
    got, _ = balance_assessment(rule, AccountObservation(IDENTITY, 1, account=account(lamports)))
    assert got is (lamports * 10 < tenths * 10**9)


def test_one_episode_fires_once_and_resolves_once_with_readable_messages() -> None:
    rule = sol_rule()
    low = AccountObservation(IDENTITY, 1, account=account(2_500_000_000))
    fired = step_balances([rule], IDENTITY, None, low, 0.0)
    again = step_balances([rule], IDENTITY, fired.state, low, 60.0)
    back = AccountObservation(IDENTITY, 2, account=account(12 * 10**9))
    resolved = step_balances([rule], IDENTITY, again.state, back, 120.0)
    assert [a.reason for a in (*fired.alerts, *again.alerts, *resolved.alerts)] == [
        "firing",
        "resolved",
    ]
    title, body = word(fired.alerts[0], rule).title, word(fired.alerts[0], rule).body
    assert (
        title == f"[WARNING] low: balance of {IDENTITY[:4]}…{IDENTITY[-4:]} below 10 SOL: 2.5 SOL"
    )
    assert "Balance: 2.5 SOL (2500000000 lamports) at slot 1" in body
    assert word(resolved.alerts[0], rule).title.endswith("back to 12 SOL")


# -- rule keys ---------------------------------------------------------------------------------

MISTAKES = [
    ("accounts: [A]\n    min_amount: 5", "accounts take min_sol"),
    ("token_accounts: [A]\n    min_sol: 5", "token_accounts take min_amount"),
    ("accounts: [A]\n    token_accounts: [A]\n    min_sol: 5", "exactly one of accounts"),
    ("min_sol: 5", "exactly one of accounts"),
    ("accounts: [A]\n    min_sol: -1", "greater than or equal to 0"),
]


@pytest.mark.parametrize(("keys", "message"), MISTAKES)
def test_wrong_keys_are_refused_at_the_rule_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keys: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    text = "rules:\n  - name: low\n    kind: balance_below\n    " + keys.replace("A", IDENTITY)
    Path("a.yaml").write_text(textwrap.dedent(text) + "\n")
    _, problems = read_rules([Path("a.yaml")], None)
    assert len(problems) == 1
    assert str(problems[0]).startswith("a.yaml:")
    assert message in str(problems[0])


def test_defaults() -> None:
    rule = sol_rule()
    assert (rule.every, rule.for_, rule.keep_firing_for, rule.repeat) == (60.0, 0.0, 0.0, None)
    assert rule.targets == (IDENTITY,)
    assert token_rule().targets == (f"token:{TOKEN_ACCOUNT}",)
    assert KINDS["balance_below"].source is SOURCE and KINDS["balance_below"].part is not None


# -- the source against a real simulator ----------------------------------------------------------


def test_chunks_hold_at_most_100_distinct_keys() -> None:
    keys = [key(str(n)) for n in range(250)]
    assert [len(chunk) for chunk in chunks(keys + keys[:5])] == [100, 100, 50]


@pytest.fixture
def simulator() -> Iterator[SimulatorServer]:
    ledger = Ledger(seed=1)
    ledger.set_holders(MINT, [(TOKEN_ACCOUNT, 30_000_000_000)], decimals=6)
    with SimulatorServer(ledger, api_key="k3y-balance") as server:
        yield server


async def test_a_round_of_150_accounts_is_two_calls_and_a_missing_one_is_none(
    simulator: SimulatorServer,
) -> None:
    keys = [key(f"acct{n}") for n in range(150)]
    for n, address in enumerate(keys[:149]):
        simulator.ledger.accounts.set_account(address, lamports=n)
    async with RpcClient(simulator.url) as rpc:
        observed = await asyncio.gather(*(SOURCE.observe(rpc, k, None) for k in keys))
        token = await SOURCE.observe(rpc, f"token:{TOKEN_ACCOUNT}", None)
    assert simulator.count("getMultipleAccounts") == 2
    sizes = sorted(
        len(r.params[0]) for r in simulator.requests if r.method == "getMultipleAccounts"
    )
    assert sizes == [50, 100]
    assert [o.account.lamports if o.account else None for o in observed] == [*range(149), None]
    assert token.token is not None and token.token.amount == 30_000_000_000


async def test_a_failed_call_fails_every_account_of_its_chunk(simulator: SimulatorServer) -> None:
    simulator.ledger.faults.inject("rpc_error", method="getMultipleAccounts", count=10)
    keys = [key(f"acct{n}") for n in range(3)]
    async with RpcClient(simulator.url, RpcSettings(max_attempts=1)) as rpc:
        results = await asyncio.gather(
            *(SOURCE.observe(rpc, k, None) for k in keys), return_exceptions=True
        )
    assert all(isinstance(result, RpcError) for result in results)
    assert simulator.count("getMultipleAccounts") == 1
