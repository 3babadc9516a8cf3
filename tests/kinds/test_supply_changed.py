"""Kind supply_changed: the pure step (baseline, thresholds from the amount last notified,
mint or burn wording), the rule keys, and observe against a real simulator."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from watcher.core.errors import RpcError
from watcher.core.events import TargetState
from watcher.kinds import word
from watcher.kinds.supply_changed import SOURCE, SupplyChangedRule, SupplyObservation, qualifies
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer

MINT = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
HOLDER = "BGLx2hbcLHk5ajMeLB2SP2zw5ZHqYTCazNJEB9uGcz3q"


def rule(**fields: Any) -> SupplyChangedRule:
    return SupplyChangedRule.model_validate({"name": "supply", "mints": [MINT], **fields})


@pytest.mark.parametrize(
    ("fields", "ref", "new", "counts"),
    [
        ({}, 100, 100, False),
        ({}, 100, 101, True),  # default: any change
        ({}, 100, 99, True),
        ({"min_change": 1}, 1_000_000, 1_999_999, False),  # 6 decimals: 1 token is 10^6
        ({"min_change": 1}, 1_000_000, 2_000_000, True),
        ({"min_change": 1}, 2_000_000, 1_000_000, True),
        ({"min_change_pct": 10}, 1000, 1099, False),
        ({"min_change_pct": 10}, 1000, 900, True),
        ({"min_change_pct": 10}, 0, 1, True),
    ],
)
def test_qualifies(fields: dict[str, Any], ref: int, new: int, counts: bool) -> None:
    assert qualifies(rule(**fields), ref, new, 6) is counts


def steps(r: SupplyChangedRule, amounts: list[int]) -> list[list[str]]:
    """The titles of each poll's alerts, supplies in order (slot = poll number)."""
    state: TargetState | None = None
    out = []
    for slot, amount in enumerate(amounts):
        outcome = SOURCE.step([r], MINT, state, SupplyObservation(amount, 6, slot), float(slot))
        state = outcome.state
        out.append([word(alert, r).title for alert in outcome.alerts])
    return out


def test_first_answer_is_the_baseline_and_small_moves_add_up() -> None:
    r = rule(min_change=1)
    got = steps(r, [10_000_000, 10_600_000, 11_100_000, 11_100_000, 9_000_000])
    short = f"{MINT[:4]}…{MINT[-4:]}"
    assert got == [
        [],
        [],
        [f"[WARNING] supply: 1.1 tokens minted on {short}"],
        [],
        [f"[WARNING] supply: 2.1 tokens burnt on {short}"],
    ]


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=12))
def test_default_rule_reports_each_change_once(amounts: list[int]) -> None:
    got = steps(rule(), amounts)
    changes = sum(1 for old, new in itertools.pairwise(amounts) if old != new)
    assert [len(titles) for titles in got[1:]] == [
        int(old != new) for old, new in itertools.pairwise(amounts)
    ]
    assert sum(map(len, got)) == changes


def test_a_stale_answer_is_doubted() -> None:
    state = SOURCE.step([rule()], MINT, None, SupplyObservation(5, 6, 100), 0.0).state
    assert SOURCE.doubt(state, SupplyObservation(6, 6, 99), 1.0) is not None
    assert SOURCE.doubt(state, SupplyObservation(6, 6, 100), 1.0) is None


def test_both_thresholds_are_refused() -> None:
    with pytest.raises(ValidationError, match="not both"):
        rule(min_change=1, min_change_pct=5)
    with pytest.raises(ValidationError):
        rule(min_change=0)


async def test_observe_reads_the_supply_and_an_unknown_mint_fails() -> None:
    ledger = Ledger(seed=1)
    ledger.set_holders(MINT, [(HOLDER, 1234)], decimals=2)
    with SimulatorServer(ledger, api_key="k3y-supply") as server:
        async with RpcClient(server.url, RpcSettings(max_attempts=1)) as rpc:
            seen = await SOURCE.observe(rpc, MINT, None)
            with pytest.raises(RpcError):
                await SOURCE.observe(rpc, HOLDER, None)
    assert (seen.amount, seen.decimals) == (1234, 2)
