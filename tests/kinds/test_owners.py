"""holder_changes names the owner of each token account (with its label): owners are read
once with getMultipleAccounts (jsonParsed) against a real simulator and cached in the state;
a failed owner lookup leaves them unknown and never fails the poll."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from watcher.alerting.formatting import Presentation
from watcher.core.events import TargetState
from watcher.kinds import word
from watcher.kinds.holder_changes import SOURCE, HolderChangesRule
from watcher.kinds.toolkit.owners import kept_owners, missing_owners
from watcher.ledger.models_accounts import ParsedTokenAccounts
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey

MINT = derived_pubkey("owners mint")
HOLDERS = [derived_pubkey(f"owners holder {n}") for n in range(3)]
OWNER_0 = derived_pubkey(f"owner of {HOLDERS[0]}")  # the simulator's owner of a token account
RULE = HolderChangesRule.model_validate({"name": "whales", "mints": [MINT]})


@pytest.fixture
def simulator() -> Iterator[SimulatorServer]:
    ledger = Ledger(seed=3)
    ledger.set_holders(MINT, [(h, 1000 * (n + 1)) for n, h in enumerate(HOLDERS)], decimals=0)
    with SimulatorServer(ledger, api_key="k3y-owners") as server:
        yield server


async def poll(rpc: RpcClient, state: TargetState | None) -> tuple[TargetState, list[str]]:
    observation = await SOURCE.observe(rpc, MINT, state)
    outcome = SOURCE.step([RULE], MINT, state, observation, 0.0)
    shown = Presentation(labels={OWNER_0: "Treasury multisig"})
    bodies = [word(alert, RULE, shown).body for alert in outcome.alerts]
    return json.loads(json.dumps(outcome.state)), bodies


async def test_owners_are_named_with_their_label_and_read_once(
    simulator: SimulatorServer,
) -> None:
    async with RpcClient(simulator.url) as rpc:
        state, _ = await poll(rpc, None)
        assert simulator.count("getMultipleAccounts") == 1
        simulator.ledger.set_holder_amount(MINT, HOLDERS[0], 9000)
        _, bodies = await poll(rpc, state)
    assert simulator.count("getMultipleAccounts") == 1  # cached: not asked again
    assert (
        f"{HOLDERS[0]}  1,000 -> 9,000 (+800.00%); owner {OWNER_0} (Treasury multisig)" in bodies[0]
    )
    assert state["owners"][HOLDERS[1]] == derived_pubkey(f"owner of {HOLDERS[1]}")


async def test_a_failed_owner_lookup_leaves_owners_unknown_and_is_retried(
    simulator: SimulatorServer,
) -> None:
    simulator.ledger.faults.inject("rpc_error", method="getMultipleAccounts", count=100)
    async with RpcClient(simulator.url, RpcSettings(max_attempts=1)) as rpc:
        state, _ = await poll(rpc, None)
        assert state["owners"] == {}
        simulator.ledger.faults.clear()
        simulator.ledger.set_holder_amount(MINT, HOLDERS[0], 9000)
        state, bodies = await poll(rpc, state)
    assert "owner" in bodies[0] and len(state["owners"]) == 3


def test_the_cache_asks_only_for_new_accounts_and_keeps_the_top_only() -> None:
    assert missing_owners(["a", "b", "a", "c"], {"b": "x"}) == ["a", "c"]
    assert kept_owners({"a": "x", "gone": "y"}, {"c": "z"}, ["a", "c"]) == {"a": "x", "c": "z"}


def test_a_non_token_account_has_no_owner_and_a_bad_owner_is_refused() -> None:
    context = {"slot": 1}
    plain = {"data": ["", "base64"], "executable": False, "lamports": 1, "owner": MINT}
    token = {
        "data": {
            "parsed": {"info": {"owner": OWNER_0, "mint": MINT}, "type": "account"},
            "program": "spl-token",
        }
    }
    answer = ParsedTokenAccounts.model_validate({"context": context, "value": [plain, None, token]})
    assert [v.owner if v else None for v in answer.value] == [None, None, OWNER_0]
    token["data"]["parsed"]["info"]["owner"] = "nope"  # type: ignore[index]
    with pytest.raises(ValueError):
        ParsedTokenAccounts.model_validate({"context": context, "value": [token]})
