"""Answers of getMultipleAccounts, getTokenAccountBalance/getTokenSupply and getFeeForMessage:
malformed ones are refused (never evidence); and the simulator's two new methods answer and
refuse bad params like a node."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from watcher.ledger.models import FROM_WIRE
from watcher.ledger.models_accounts import FeeForMessage, MultipleAccounts, TokenAmountAnswer
from watcher.simulator import Ledger
from watcher.simulator.accounts import required_signatures, sample_message
from watcher.simulator.methods import RpcMethods
from watcher.simulator.params import RpcError

SYSTEM = "11111111111111111111111111111111"
KEY = "9aB71bqATWmsKrhhTJUM8UHQWyTL8y61nVfZbXLkoGmY"
CONTEXT = {"slot": 5, "apiVersion": "2.3.6"}


def good_account(**changes: Any) -> dict[str, Any]:
    data = base64.b64encode(b"abc").decode()
    fields = {
        "data": [data, "base64"],
        "executable": False,
        "lamports": 7,
        "owner": SYSTEM,
        "rentEpoch": 2**64 - 1,
        "space": 3,
    }
    return {**fields, **changes}


def test_a_good_answer_reads_with_nulls_for_missing_accounts() -> None:
    answer = MultipleAccounts.model_validate({"context": CONTEXT, "value": [good_account(), None]})
    first = answer.value[0]
    assert first is not None and first.raw_data == b"abc" and answer.value[1] is None
    assert first.data_hash == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.mark.parametrize(
    "account",
    [
        good_account(lamports=-1),
        good_account(lamports=1.5),
        good_account(lamports="7"),
        good_account(lamports=10**19),
        good_account(owner="not-a-key"),
        good_account(executable="false"),
        good_account(data=["abc", "base58"]),  # not what was asked for
        good_account(data=["%%%", "base64"]),
        good_account(data="YWJj"),
        {k: v for k, v in good_account().items() if k != "lamports"},
    ],
)
def test_malformed_accounts_are_refused(account: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        MultipleAccounts.model_validate({"context": CONTEXT, "value": [account]})


def test_more_than_100_accounts_are_refused() -> None:
    with pytest.raises(ValidationError):
        MultipleAccounts.model_validate({"context": CONTEXT, "value": [None] * 101})


@pytest.mark.parametrize(
    "value",
    [
        {"amount": 5, "decimals": 6},  # a bare number on the wire
        {"amount": "-5", "decimals": 6},
        {"amount": "5", "decimals": 256},
        {"amount": str(2**64), "decimals": 6},
        {"amount": "5", "decimals": 6, "address": KEY},
    ],
)
def test_malformed_token_amounts_are_refused(value: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TokenAmountAnswer.model_validate(
            {"context": CONTEXT, "value": value}, context={FROM_WIRE: True}
        )


FEE = TypeAdapter(FeeForMessage | None)


@pytest.mark.parametrize(
    ("answer", "fee"),
    [
        (None, None),
        ({"context": CONTEXT, "value": None}, None),
        ({"context": CONTEXT, "value": 5000}, 5000),
    ],
)
def test_fee_answers(answer: Any, fee: int | None) -> None:
    read = FEE.validate_python(answer)
    assert (read.value if read is not None else None) == fee


@pytest.mark.parametrize("value", [-1, 1.5, "5000", True, 10**19])
def test_malformed_fees_are_refused(value: Any) -> None:
    with pytest.raises(ValidationError):
        FEE.validate_python({"context": CONTEXT, "value": value})


# -- the simulator ------------------------------------------------------------------------------


def call(methods: RpcMethods, method: str, params: Any) -> Any:
    return json.loads(methods.answer(method, params))


def test_simulator_get_multiple_accounts() -> None:
    ledger = Ledger(seed=1)
    ledger.accounts.set_account(KEY, lamports=42, data=b"v1")
    got = call(RpcMethods(ledger), "getMultipleAccounts", [[KEY, SYSTEM], {"encoding": "base64"}])
    assert got["value"][1] is None
    assert got["value"][0]["lamports"] == 42
    assert got["value"][0]["data"] == [base64.b64encode(b"v1").decode(), "base64"]
    assert MultipleAccounts.model_validate(got).value[0] is not None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ([], "expected a sequence"),
        (["abc"], "expected a sequence"),
        ([["abc"]], "Invalid param"),
        ([[KEY] * 101], "Too many inputs"),
        ([[KEY], {"encoding": "yaml"}], "unknown variant"),
    ],
)
def test_simulator_get_multiple_accounts_refuses(params: Any, message: str) -> None:
    with pytest.raises(RpcError) as raised:
        call(RpcMethods(Ledger(seed=1)), "getMultipleAccounts", params)
    assert raised.value.code == -32602 and message in raised.value.message


def test_simulator_fee_for_message() -> None:
    ledger = Ledger(seed=1)
    methods = RpcMethods(ledger)
    assert call(methods, "getFeeForMessage", [sample_message(signers=2, keys=3)])["value"] == 10000
    ledger.accounts.set_fee(7000)
    assert call(methods, "getFeeForMessage", [sample_message()])["value"] == 7000
    ledger.accounts.set_fee(7000, expired=True)
    assert call(methods, "getFeeForMessage", [sample_message()])["value"] is None


@pytest.mark.parametrize("message", ["%%%", base64.b64encode(b"\x01\x00").decode(), 5])
def test_simulator_fee_for_message_refuses(message: Any) -> None:
    with pytest.raises(RpcError) as raised:
        call(RpcMethods(Ledger(seed=1)), "getFeeForMessage", [message])
    assert raised.value.code == -32602


def test_required_signatures_reads_legacy_and_versioned_messages() -> None:
    legacy = base64.b64decode(sample_message(signers=3, keys=4))
    assert required_signatures(legacy) == 3
    assert required_signatures(b"\x80" + legacy) == 3
    assert required_signatures(legacy[:-40]) is None
