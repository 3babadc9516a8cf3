"""Kind fee_above: the assessment, a null fee refused as evidence (the message needs a fresh
blockhash), the rule keys, and observe against a real simulator."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from watcher.kinds import word
from watcher.kinds.fee_above import SOURCE, FeeAboveRule, FeeObservation, fee_assessment
from watcher.ledger.rpc import RpcClient
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.accounts import sample_message

MESSAGE = sample_message(signers=2)


def rule(**fields: Any) -> FeeAboveRule:
    return FeeAboveRule.model_validate(
        {"name": "fees", "message": MESSAGE, "max_lamports": 10000, **fields}
    )


@pytest.mark.parametrize(
    ("fee", "active"), [(10001, True), (10000, False), (0, False), (None, None)]
)
def test_fee_above_max_lamports_is_active_and_null_is_unknown(
    fee: int | None, active: bool | None
) -> None:
    assert fee_assessment(rule(), FeeObservation(fee, 5))[0] is active


def test_a_null_fee_is_doubted_and_says_the_message_needs_a_fresh_blockhash() -> None:
    doubt = SOURCE.doubt(None, FeeObservation(None, None), 0.0)
    assert doubt is not None and not doubt.confirmable
    assert "needs a fresh blockhash" in doubt.reason
    assert SOURCE.doubt(None, FeeObservation(5000, 3), 0.0) is None
    state = SOURCE.step([rule()], MESSAGE, None, FeeObservation(5000, 30), 0.0).state
    assert SOURCE.doubt(state, FeeObservation(5000, 29), 1.0) is not None  # stale


def test_fires_once_and_resolves_once() -> None:
    r = rule()
    state = None
    reasons, titles = [], []
    for now, fee in enumerate([20000, 20000, 5000, 5000]):
        outcome = SOURCE.step([r], MESSAGE, state, FeeObservation(fee, now), float(now))
        state = outcome.state
        reasons += [alert.reason for alert in outcome.alerts]
        titles += [word(alert, r).title for alert in outcome.alerts]
    assert reasons == ["firing", "resolved"]
    assert titles == [
        "[WARNING] fees: fee 20000 lamports, above 10000 lamports",
        "[RESOLVED] fees: fee back to 5000 lamports",
    ]


@pytest.mark.parametrize(
    "fields",
    [{"message": "not base64!"}, {"message": ""}, {"max_lamports": -1}, {"max_lamports": None}],
)
def test_wrong_keys_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        rule(**fields)


async def test_observe_reads_the_fee_and_a_null_one() -> None:
    ledger = Ledger(seed=1)
    with SimulatorServer(ledger, api_key="k3y-fee") as server:
        async with RpcClient(server.url) as rpc:
            fresh = await SOURCE.observe(rpc, MESSAGE, None)
            ledger.accounts.set_fee(5000, expired=True)
            expired = await SOURCE.observe(rpc, MESSAGE, None)
    assert (fresh.fee, expired.fee) == (10000, None)
    assert expired.slot is not None
