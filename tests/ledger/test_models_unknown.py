"""One field of one entry out of its range never makes a whole answer unreadable.

A field that only informs (a blockTime, a memo, a commission, a version...) is then unknown
(None, as if the node had sent null) and logged once with the address asked about; a signature
entry whose own identity (signature, slot) is unreadable is left out of its page, which still
counts it. Read as the daemon reads the wire (``watcher.ledger.wire.validate``).
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from watcher.core.errors import BadResponse
from watcher.ledger.models import (
    UNKNOWN_FIELDS_LOG,
    ClusterNodes,
    SignaturePage,
    SignaturePageAnswer,
    TokenLargestAccounts,
    VoteAccounts,
)
from watcher.ledger.models_accounts import MultipleAccounts
from watcher.ledger.models_das import AssetPage, EditionList, ProgramAccounts, TokenAccountPage
from watcher.ledger.wire import validate

ADDRESS = "9aB71bqATWmsKrhhTJUM8UHQWyTL8y61nVfZbXLkoGmY"
OTHER = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T"
SYSTEM = "11111111111111111111111111111111"
SIGNATURES = ["5" * 87, "4" * 87, "3" * 87]
PAGE = TypeAdapter(SignaturePageAnswer)

# Anything a node could send in a field's place.
garbage = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**64, 2**64 - 1, 2**40 + 1, 2**33 + 1, 1_790_000_000_000, -1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["0OIl" * 22, "1" * 88, "finalized", "rooted", ""]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@pytest.fixture(autouse=True)
def fresh_log() -> Iterator[None]:
    UNKNOWN_FIELDS_LOG.clear()
    yield
    UNKNOWN_FIELDS_LOG.clear()


def entry(n: int) -> dict[str, Any]:
    return {
        "signature": SIGNATURES[n],
        "slot": 300 - n,
        "err": None,
        "memo": None,
        "blockTime": 1_790_000_000 - n,
        "confirmationStatus": "finalized",
        "transactionIndex": n,
    }


def read_page(result: Any) -> SignaturePage:
    page = validate("getSignaturesForAddress", PAGE, result, [ADDRESS])
    assert isinstance(page, SignaturePage)
    return page


INFORMS = ["blockTime", "memo", "confirmationStatus", "transactionIndex", "err"]
IDENTITY = ["signature", "slot"]


@settings(max_examples=300, deadline=None)
@given(
    which=st.integers(0, 2),
    field=st.sampled_from([*INFORMS, *IDENTITY]),
    value=garbage,
    dropped=st.booleans(),
)
def test_any_single_field_of_a_single_signature_entry_never_makes_the_page_unreadable(
    which: int, field: str, value: Any, dropped: bool
) -> None:
    result = [entry(n) for n in range(3)]
    if dropped:
        del result[which][field]
    else:
        result[which][field] = value
    page = read_page(result)  # never raises

    assert page.listed == 3
    others = [e.signature for e in page if e.signature != SIGNATURES[which]]
    assert others == [s for n, s in enumerate(SIGNATURES) if n != which]
    if field in INFORMS:
        [odd] = [e for e in page if e.signature == SIGNATURES[which]]
        shown = {
            "blockTime": odd.block_time,
            "memo": odd.memo,
            "err": odd.err,
            "confirmationStatus": odd.confirmation_status,
            "transactionIndex": odd.transaction_index,
        }
        assert shown[field] in (None, value)  # unknown, or the value when it was in range
    elif len(page) == 2:
        assert page.left_out == (result[which],)


def test_a_block_time_in_milliseconds_is_unknown_and_said_once_with_the_address() -> None:
    result = [entry(0), {**entry(1), "blockTime": 1_790_000_000_000}]
    with structlog.testing.capture_logs() as logs:
        first, again = read_page(result), read_page(copy.deepcopy(result))
    assert [e.block_time for e in first] == [1_790_000_000, None] == [e.block_time for e in again]
    assert [(e["event"], e["target"], e["entry"], e["field"], e["value"]) for e in logs] == [
        (
            "field out of its range taken as unknown",
            ADDRESS,
            SIGNATURES[1],
            "blockTime",
            "1790000000000",
        ),
    ]


def test_an_entry_with_an_unreadable_slot_is_left_out_and_counted() -> None:
    result = [entry(0), {**entry(1), "slot": 2**64}, entry(2)]
    with structlog.testing.capture_logs() as logs:
        page = read_page(result)
    assert [e.signature for e in page] == [SIGNATURES[0], SIGNATURES[2]]
    assert page.listed == 3 and page.left_out == (result[1],)
    assert [(e["event"], e["entry"], e["field"]) for e in logs] == [
        ("entry left out: its identity is unreadable", SIGNATURES[1], "slot")
    ]


def test_a_page_that_is_not_a_list_is_still_a_bad_answer() -> None:
    with pytest.raises(BadResponse, match="a list of signature entries"):
        read_page({"signature": SIGNATURES[0]})


# -- the fields that only inform, in every other answer ------------------------------------------


def vote(n: int) -> dict[str, Any]:
    return {
        "votePubkey": [ADDRESS, OTHER][n],
        "nodePubkey": SYSTEM,
        "activatedStake": 5,
        "commission": 7,
        "lastVote": 100,
        "rootSlot": 90,
        "epochVoteAccount": True,
        "epochCredits": [[1, 10, 5]],
    }


ACCOUNT_DATA = [base64.b64encode(b"abc").decode(), "base64"]
TOKEN_ACCOUNT = {
    "address": ADDRESS,
    "mint": OTHER,
    "owner": SYSTEM,
    "frozen": False,
    "amount": 5,
    "delegate": None,
    "delegated_amount": 0,
    "close_authority": None,
}
ASSET = {
    "id": ADDRESS,
    "interface": "V1_NFT",
    "burnt": False,
    "content": {"json_uri": "u", "metadata": {"name": "Lad", "symbol": "L"}},
    "ownership": {"owner": OTHER, "frozen": False, "delegate": None},
}

# (method, model, a good answer, the path to one field that only informs, what it reads as
# when unknown, how to read it back).
CASES: list[tuple[str, Any, Any, tuple[Any, ...], Any]] = [
    (
        "getVoteAccounts",
        VoteAccounts,
        {"current": [vote(0)], "delinquent": [vote(1)]},
        ("current", 0, "commission"),
        lambda a: a.current[0].commission,
    ),
    (
        "getVoteAccounts",
        VoteAccounts,
        {"current": [vote(0)], "delinquent": [vote(1)]},
        ("delinquent", 0, "rootSlot"),
        lambda a: a.delinquent[0].root_slot,
    ),
    (
        "getVoteAccounts",
        VoteAccounts,
        {"current": [vote(0)], "delinquent": []},
        ("current", 0, "epochVoteAccount"),
        lambda a: a.current[0].epoch_vote_account,
    ),
    (
        "getClusterNodes",
        ClusterNodes,
        [{"pubkey": ADDRESS, "version": "2.3.6", "featureSet": 1}],
        (0, "version"),
        lambda a: a[0].version,
    ),
    (
        "getClusterNodes",
        ClusterNodes,
        [{"pubkey": ADDRESS, "version": "2.3.6", "featureSet": 1}],
        (0, "featureSet"),
        lambda a: a[0].feature_set,
    ),
    (
        "getTokenLargestAccounts",
        TokenLargestAccounts,
        {
            "context": {"slot": 5, "apiVersion": "2.3.6"},
            "value": [{"address": ADDRESS, "amount": "5", "decimals": 0, "uiAmountString": "5"}],
        },
        ("value", 0, "uiAmountString"),
        lambda a: a.value[0].ui_amount_string,
    ),
    (
        "getTokenLargestAccounts",
        TokenLargestAccounts,
        {"context": {"slot": 5, "apiVersion": "2.3.6"}, "value": []},
        ("context", "apiVersion"),
        lambda a: a.context.api_version,
    ),
    (
        "getMultipleAccounts",
        MultipleAccounts,
        {
            "context": {"slot": 5},
            "value": [
                {
                    "data": ACCOUNT_DATA,
                    "executable": False,
                    "lamports": 7,
                    "owner": SYSTEM,
                    "rentEpoch": 3,
                    "space": 3,
                }
            ],
        },
        ("value", 0, "rentEpoch"),
        lambda a: a.value[0].rent_epoch,
    ),
    (
        "getMultipleAccounts",
        MultipleAccounts,
        {
            "context": {"slot": 5},
            "value": [
                {
                    "data": ACCOUNT_DATA,
                    "executable": False,
                    "lamports": 7,
                    "owner": SYSTEM,
                    "space": 3,
                }
            ],
        },
        ("value", 0, "space"),
        lambda a: a.value[0].space,
    ),
    (
        "getProgramAccounts",
        ProgramAccounts,
        [
            {
                "pubkey": ADDRESS,
                "account": {"lamports": 1, "owner": SYSTEM, "executable": False, "space": 0},
            }
        ],
        (0, "account", "space"),
        lambda a: a[0].account.space,
    ),
    (
        "getTokenAccounts",
        TokenAccountPage,
        {"total": 1, "limit": 10, "page": 1, "token_accounts": [TOKEN_ACCOUNT]},
        ("token_accounts", 0, "close_authority"),
        lambda a: a.token_accounts[0].close_authority,
    ),
    (
        "getTokenAccounts",
        TokenAccountPage,
        {"total": 1, "limit": 10, "page": 1, "token_accounts": [TOKEN_ACCOUNT]},
        ("token_accounts", 0, "delegated_amount"),
        lambda a: a.token_accounts[0].delegated_amount,
    ),
    (
        "getAssetsByGroup",
        AssetPage,
        {"total": 1, "limit": 10, "page": 1, "items": [ASSET]},
        ("items", 0, "content", "metadata", "name"),
        lambda a: a.items[0].content.metadata.name,
    ),
    (
        "getAssetsByGroup",
        AssetPage,
        {"total": 1, "limit": 10, "page": 1, "items": [ASSET]},
        ("page",),
        lambda a: a.page,
    ),
    (
        "getNftEditions",
        EditionList,
        {
            "total": 1,
            "limit": 10,
            "page": 1,
            "master_edition_address": ADDRESS,
            "supply": 1,
            "max_supply": 5,
            "editions": [{"mint": OTHER, "edition_address": ADDRESS, "edition": 1}],
        },
        ("editions", 0, "edition_address"),
        lambda a: a.editions[0].edition_address,
    ),
]


@pytest.mark.parametrize(
    ("method", "model", "good", "path", "read"), CASES, ids=[f"{c[0]}:{c[3][-1]}" for c in CASES]
)
@settings(max_examples=40, deadline=None)
@given(value=garbage)
def test_a_field_that_only_informs_is_unknown_when_out_of_range(
    method: str, model: Any, good: Any, path: tuple[Any, ...], read: Any, value: Any
) -> None:
    result = copy.deepcopy(good)
    holder = result
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = value
    answer = validate(method, TypeAdapter(model), result, [ADDRESS])  # never raises
    assert read(answer) in (None, "", value)  # unknown, or the value when it was in range
