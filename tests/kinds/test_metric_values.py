"""What each source's accepted answer shows on /metrics (``watcher.kinds.toolkit.metric_values``):
tables of answers in, samples out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watcher.kinds import RULE_MODELS, SAMPLERS
from watcher.kinds.fee_above import FeeObservation, fee_samples
from watcher.kinds.holder_changes import HoldersObservation, holder_samples
from watcher.kinds.sources.accounts import AccountObservation, account_samples
from watcher.kinds.sources.votes import vote_samples
from watcher.kinds.supply_changed import SupplyObservation, supply_samples
from watcher.kinds.toolkit.alert_samples import sample_account
from watcher.kinds.toolkit.cluster import account_finder, find_account
from watcher.kinds.toolkit.metric_values import METRICS, Sample
from watcher.kinds.version_drift import ClusterObservation, node_samples
from watcher.ledger.models import (
    ClusterNode,
    LargestAccount,
    TokenAmount,
    VoteAccount,
    VoteAccounts,
)

from support.values import key

MINE, MINE_NODE = key("mine"), key("mine node")
BIG, BIG_NODE = key("big"), key("big node")
GONE = key("gone")
SOL = 10**9


def rule(kind: str, **fields: Any) -> Any:
    return RULE_MODELS[kind].model_validate({"kind": kind, "notify": ["ops"], **fields})


def account(vote: str, node: str, last_vote: int, **extra: Any) -> VoteAccount:
    return VoteAccount.model_validate(
        {
            "votePubkey": vote,
            "nodePubkey": node,
            "activatedStake": extra.pop("stake", 5 * SOL),
            "lastVote": last_vote,
            **extra,
        }
    )


def by_name(samples: Sequence[Sample]) -> dict[tuple[str, tuple[str, ...]], float]:
    return {(sample.name, sample.labels): sample.value for sample in samples}


BIG_ACCOUNT = account(
    BIG, BIG_NODE, 1000, stake=100 * SOL, rootSlot=968, commission=5, epochCredits=[[7, 900, 0]]
)


@pytest.mark.parametrize(
    ("watched", "mine", "expected"),
    [
        # Current: 0, with its stake in SOL, slots, commission, this epoch's credits, its lag.
        (
            MINE,
            account(
                MINE,
                MINE_NODE,
                990,
                rootSlot=950,
                commission=10,
                epochCredits=[[6, 500, 100], [7, 780, 500]],
            ),
            {
                "solana_validator_delinquent": 0,
                "solana_validator_active_stake": 5.0,
                "solana_validator_last_vote": 990,
                "solana_validator_root_slot": 950,
                "solana_validator_commission": 10,
                "solana_validator_epoch_credits": 280,
                "solana_validator_vote_lag_slots": 10,
            },
        ),
        # Watched by its identity: the same series.
        (
            MINE_NODE,
            account(MINE, MINE_NODE, 1000),
            {
                "solana_validator_delinquent": 0,
                "solana_validator_active_stake": 5.0,
                "solana_validator_last_vote": 1000,
                "solana_validator_epoch_credits": 0,
                "solana_validator_vote_lag_slots": 0,
            },
        ),
    ],
)
def test_a_current_validator(watched: str, mine: VoteAccount, expected: dict[str, float]) -> None:
    rules = [rule("delinquent_validators", name="v", validators=[watched])]
    samples = vote_samples(
        rules, "cluster", VoteAccounts(current=[BIG_ACCOUNT, mine], delinquent=[])
    )
    mine_only = {
        name: value
        for (name, labels), value in by_name(samples).items()
        if labels == (MINE, MINE_NODE)
    }
    assert mine_only == expected
    assert {sample.subject for sample in samples if sample.labels == (MINE, MINE_NODE)} == {watched}


def test_a_delinquent_validator_reads_1_and_one_in_neither_list_too() -> None:
    rules = [
        rule("delinquent_validators", name="v", validators=[MINE]),
        rule("vote_lag", name="lag", validators=[GONE, MINE]),  # MINE twice: one series each
    ]
    answer = VoteAccounts(current=[BIG_ACCOUNT], delinquent=[account(MINE, MINE_NODE, 400)])
    values = by_name(vote_samples(rules, "cluster", answer))
    assert values[("solana_validator_delinquent", (MINE, MINE_NODE))] == 1
    assert values[("solana_validator_vote_lag_slots", (MINE, MINE_NODE))] == 600
    assert values[("solana_validator_delinquent", (GONE, ""))] == 1
    assert [name for name, labels in values if labels == (GONE, "")] == [
        "solana_validator_delinquent"
    ]
    assert values[("solana_cluster_validator_count", ("current",))] == 1
    assert values[("solana_cluster_validator_count", ("delinquent",))] == 1


def test_the_cluster_as_a_whole() -> None:
    answer = VoteAccounts(
        current=[BIG_ACCOUNT, account(MINE, MINE_NODE, 990, rootSlot=970)],
        delinquent=[account(GONE, key("gone node"), 10, stake=3 * SOL)],
    )
    values = by_name(vote_samples([rule("cluster_stalled", name="c")], "cluster", answer))
    assert values == {
        ("solana_cluster_active_stake", ()): 108.0,
        ("solana_cluster_validator_count", ("current",)): 2,
        ("solana_cluster_validator_count", ("delinquent",)): 1,
        ("solana_cluster_last_vote", ()): 1000,
        ("solana_cluster_root_slot", ()): 970,
    }


def test_an_empty_cluster_shows_counts_and_stake_only() -> None:
    values = by_name(vote_samples([], "cluster", VoteAccounts(current=[], delinquent=[])))
    assert set(values) == {
        ("solana_cluster_active_stake", ()),
        ("solana_cluster_validator_count", ("current",)),
        ("solana_cluster_validator_count", ("delinquent",)),
    }


def node(pubkey: str, version: str | None) -> ClusterNode:
    return ClusterNode.model_construct(pubkey=pubkey, version=version, feature_set=7)


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        (
            [node(BIG_NODE, "2.3.6"), node(MINE_NODE, "2.3.6")],
            {
                ("solana_node_version_info", (MINE_NODE, "2.3.6")): 1,
                ("solana_node_version_behind", (MINE_NODE,)): 0,
            },
        ),
        (
            [node(BIG_NODE, "2.3.6"), node(MINE_NODE, "2.2.0")],
            {
                ("solana_node_version_info", (MINE_NODE, "2.2.0")): 1,
                ("solana_node_version_behind", (MINE_NODE,)): 1,
            },
        ),
        # Missing from gossip: behind, no version.
        ([node(BIG_NODE, "2.3.6")], {("solana_node_version_behind", (MINE_NODE,)): 1}),
        # An unreadable version: no evidence of being behind.
        (
            [node(BIG_NODE, "2.3.6"), node(MINE_NODE, "garbage")],
            {("solana_node_version_info", (MINE_NODE, "garbage")): 1},
        ),
    ],
)
def test_watched_nodes_versions(
    nodes: list[ClusterNode], expected: dict[tuple[str, tuple[str, ...]], float]
) -> None:
    votes = VoteAccounts(current=[BIG_ACCOUNT, account(MINE, MINE_NODE, 990)], delinquent=[])
    # Watched by its vote account: the series name the identity.
    rules = [rule("version_drift", name="d", validators=[MINE])]
    samples = node_samples(rules, "cluster", ClusterObservation(tuple(nodes), votes))
    assert by_name(samples) == expected
    assert {sample.subject for sample in samples} == {MINE}


@pytest.mark.parametrize(
    ("observation", "expected"),
    [
        (AccountObservation(MINE, 5, account=sample_account(2_500_000_000)), 2.5),
        (AccountObservation(MINE, 5), 0.0),  # no such account: holds nothing
    ],
)
def test_account_balance_in_sol(observation: AccountObservation, expected: float) -> None:
    assert account_samples([], MINE, observation) == (
        Sample("solana_account_balance", (MINE,), expected),
    )


def test_a_token_accounts_balance_is_not_sol() -> None:
    token = TokenAmount(amount=5, decimals=2)
    assert account_samples([], "token:" + MINE, AccountObservation(MINE, 5, token=token)) == ()


@pytest.mark.parametrize(
    ("amount", "decimals", "expected"), [(123_456, 3, 123.456), (7, 0, 7.0), (0, 9, 0.0)]
)
def test_token_supply_in_ui_units(amount: int, decimals: int, expected: float) -> None:
    samples = supply_samples([], MINE, SupplyObservation(amount, decimals, 5))
    assert samples == (Sample("solana_token_supply", (MINE,), expected),)


def test_largest_accounts_in_ui_units() -> None:
    top = (
        LargestAccount(address=BIG, amount=5_000_000, decimals=6),
        LargestAccount(address=GONE, amount=1_500, decimals=6),
    )
    assert holder_samples([], MINE, HoldersObservation(top, 5)) == (
        Sample("solana_token_largest_account_balance", (MINE, BIG), 5.0),
        Sample("solana_token_largest_account_balance", (MINE, GONE), 0.0015),
    )


MESSAGE = "AQABAg=="


@pytest.mark.parametrize(
    ("fee", "expected"),
    [
        (5000, (Sample("solana_fee_lamports", ("fees",), 5000, "fees"),)),
        (None, ()),  # an expired blockhash: no evidence (doubted, never stepped anyway)
    ],
)
def test_the_fee_by_rule(fee: int | None, expected: tuple[Sample, ...]) -> None:
    rules = [rule("fee_above", name="fees", message=MESSAGE, max_lamports=10_000)]
    assert fee_samples(rules, MESSAGE, FeeObservation(fee, 5)) == expected


def test_every_sample_names_a_known_metric_with_its_labels() -> None:
    votes = VoteAccounts(current=[BIG_ACCOUNT], delinquent=[])
    rules = [rule("delinquent_validators", name="v", validators=[BIG, GONE])]
    samples = [*vote_samples(rules, "cluster", votes)]
    samples += node_samples(
        [rule("version_drift", name="d", validators=[BIG])],
        "cluster",
        ClusterObservation((node(BIG_NODE, "2.3.6"),), votes),
    )
    for sample in samples:
        assert len(sample.labels) == len(METRICS[sample.name].labels), sample
    assert set(SAMPLERS) == {"votes", "nodes", "accounts", "supply", "holders", "fees", "vat"}


KEYS = [key(f"finder {i}") for i in range(5)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(KEYS), st.sampled_from(KEYS), st.integers(0, 3), st.booleans()),
        max_size=5,
        unique_by=lambda made: made[0],  # a vote account is listed once
    )
)
def test_the_account_finder_finds_what_find_account_finds(
    made: list[tuple[str, str, int, bool]],
) -> None:
    """Indexed once for many pubkeys (vote_samples, credits_low, the vote changes), the same
    answer as a scan for each: current before delinquent, the most staked, the first of equals."""
    current = [account(v, n, i, stake=s) for i, (v, n, s, late) in enumerate(made) if not late]
    late = [account(v, n, i, stake=s) for i, (v, n, s, late) in enumerate(made) if late]
    answer = VoteAccounts(current=current, delinquent=late)
    find = account_finder(answer)
    for pubkey in KEYS:
        assert find(pubkey) is find_account(pubkey, answer)
