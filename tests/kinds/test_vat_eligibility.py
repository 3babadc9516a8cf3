"""Kind ``vat_eligibility``: the ranking against the cut and the boundary arithmetic (tables and
hypothesis properties, the cut held to agave's filter), and the source's pure step."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.core.events import AlertMessage, TargetState
from watcher.kinds import RULE_MODELS, SAMPLERS, SOURCES, word
from watcher.kinds.toolkit.alert_samples import sample_account
from watcher.kinds.toolkit.metric_values import METRICS, Sample
from watcher.kinds.toolkit.vat_ticket import (
    VOTE_RENT_EXEMPT_LAMPORTS,
    Boundary,
    Standing,
    admitted,
    next_boundary,
    standing,
)
from watcher.kinds.vat_eligibility import VOTE_PROGRAM, VatObservation, vat_samples
from watcher.ledger.models import VoteAccount, VoteAccounts
from watcher.ledger.models_accounts import MultipleAccounts
from watcher.simulator import Ledger
from watcher.simulator.methods import RpcMethods

from support.values import key

VAT = SOURCES["vat"]
SOL = 10**9
MINE, MINE_NODE = key("vat mine"), key("vat mine node")


@pytest.mark.parametrize(
    ("stake", "others", "max_rank", "expected"),
    [
        (50, [], 3, Standing(1, None, 0)),  # alone: no cut
        (50, [100, 90], 3, Standing(3, None, 0)),  # fewer others than places
        (50, [100, 90, 80], 3, Standing(4, 80, 31)),  # fourth of four: 31 short of 81
        (81, [100, 90, 80], 3, Standing(3, 80, 0)),  # just above the third
        (80, [100, 90, 80], 3, Standing(4, 80, 1)),  # tied with the one at the cut: out
        (90, [100, 90, 80, 80], 3, Standing(3, 80, 0)),
        (80, [100, 80, 80], 3, Standing(4, 80, 1)),  # three tied at the cut: all out
        (80, [100, 80], 3, Standing(3, None, 0)),  # tied but fewer than the places: in
        (5, [100, 0, 0, 0], 2, Standing(2, None, 0)),  # unstaked accounts are not ranked
        (200, [100, 90, 80], 1, Standing(1, 100, 0)),
    ],
)
def test_standing(stake: int, others: list[int], max_rank: int, expected: Standing) -> None:
    assert standing(stake, others, max_rank) == expected


stakes = st.lists(st.integers(min_value=0, max_value=40), max_size=30)


@given(stake=st.integers(min_value=1, max_value=40), others=stakes, max_rank=st.integers(1, 12))
def test_standing_agrees_with_agaves_cut(stake: int, others: list[int], max_rank: int) -> None:
    """The rank passes exactly when agave's filter (SIMD-0357, ties at the cut out) keeps it."""
    accounts = {f"other {n}": other for n, other in enumerate(others)} | {"mine": stake}
    place = standing(stake, others, max_rank)
    assert place.passes(max_rank) == ("mine" in admitted(accounts, max_rank))
    assert (place.gap == 0) == place.passes(max_rank)


@given(stake=st.integers(min_value=1, max_value=40), others=stakes, max_rank=st.integers(1, 12))
def test_the_gap_is_exactly_what_it_lacks(stake: int, others: list[int], max_rank: int) -> None:
    """With ``gap`` more it passes; with one lamport less than that it does not."""
    gap = standing(stake, others, max_rank).gap
    assert standing(stake + gap, others, max_rank).passes(max_rank)
    if gap:
        assert not standing(stake + gap - 1, others, max_rank).passes(max_rank)


@pytest.mark.parametrize(
    ("slot", "slots_per_epoch", "first_normal_slot", "expected"),
    [
        (0, 432_000, 0, Boundary(0, 432_000, 432_000)),
        (431_999, 432_000, 0, Boundary(0, 432_000, 1)),
        (432_000, 432_000, 0, Boundary(1, 864_000, 432_000)),
        (350_000_000, 432_000, 0, Boundary(810, 350_352_000, 352_000)),
        (100, 432_000, 524_256, None),  # inside the warm-up
        (524_256, 432_000, 524_256, Boundary(14, 956_256, 432_000)),  # devnet's, testnet's
        (1_000_000, 432_000, 524_256, Boundary(15, 1_388_256, 388_256)),
        (10, 8, 0, Boundary(1, 16, 6)),
    ],
)
def test_next_boundary(
    slot: int, slots_per_epoch: int, first_normal_slot: int, expected: Boundary | None
) -> None:
    assert next_boundary(slot, slots_per_epoch, first_normal_slot) == expected


@given(
    slot=st.integers(min_value=0, max_value=10**12),
    slots_per_epoch=st.integers(min_value=1, max_value=10**6),
)
def test_the_boundary_is_the_next_epoch_start(slot: int, slots_per_epoch: int) -> None:
    boundary = next_boundary(slot, slots_per_epoch)
    assert boundary is not None
    assert 1 <= boundary.slots_left <= slots_per_epoch
    assert boundary.next_slot == slot + boundary.slots_left
    assert boundary.next_slot % slots_per_epoch == 0
    assert boundary.epoch == slot // slots_per_epoch


# -- the step ---------------------------------------------------------------------------------


def rule(**fields: Any) -> Any:
    model = RULE_MODELS["vat_eligibility"]
    return model.model_validate(
        {"name": "vat", "kind": "vat_eligibility", "validators": [MINE], **fields}
    )


def votes(mine: int, *others: int, delinquent: bool = False) -> VoteAccounts:
    accounts = [
        VoteAccount(
            vote_pubkey=key(f"vat other {n}"),
            node_pubkey=key(f"vat other node {n}"),
            activated_stake=stake,
            last_vote=1000,
        )
        for n, stake in enumerate(others)
    ]
    me = VoteAccount(vote_pubkey=MINE, node_pubkey=MINE_NODE, activated_stake=mine, last_vote=1000)
    if delinquent:
        return VoteAccounts(current=accounts, delinquent=[me])
    return VoteAccounts(current=[*accounts, me], delinquent=[])


def observed(answer: VoteAccounts, balance: int | None, slot: int = 432_000 * 800) -> Any:
    account = None if balance is None else sample_account(balance, owner=VOTE_PROGRAM)
    return VatObservation(answer, MINE, account, slot)


ENOUGH = VOTE_RENT_EXEMPT_LAMPORTS + 5 * SOL


def play(the_rule: Any, answers: Sequence[VatObservation]) -> list[list[AlertMessage]]:
    state: TargetState | None = None
    said = []
    for n, answer in enumerate(answers):
        outcome = VAT.step([the_rule], MINE, state, answer, 1000.0 + 60 * n)
        state = json.loads(json.dumps(outcome.state))
        said.append([word(alert, the_rule) for alert in outcome.alerts])
    return said


def test_a_drained_vote_account_fires_with_the_sol_short_and_resolves_when_topped_up() -> None:
    drained = VOTE_RENT_EXEMPT_LAMPORTS + SOL  # 0.6 SOL short
    said = play(rule(), [observed(votes(100 * SOL), drained), observed(votes(100 * SOL), ENOUGH)])
    (fired,), (resolved,) = said
    assert fired.reason == "firing"
    assert "would miss the VAT: vote account 0.6 SOL short" in fired.title
    assert "0.6 SOL short of 1.6270744 SOL" in fired.body
    assert "epoch 801 starts at slot 346,032,000, 432,000 slots away (about 2d" in fired.body
    assert resolved.reason == "resolved" and "passes the VAT again" in resolved.title


def test_a_validator_past_the_cut_fires_with_its_rank_and_the_stake_it_lacks() -> None:
    (fired,), (nothing) = play(
        rule(max_rank=2),
        [
            observed(votes(10 * SOL, 50 * SOL, 30 * SOL, 20 * SOL), ENOUGH),
            observed(votes(10 * SOL, 50 * SOL, 30 * SOL, 20 * SOL), ENOUGH),
        ],
    )
    assert "rank 4 past 2" in fired.title
    assert "Rank by activated stake: 4 among 4 staked vote accounts, cut at 2" in fired.body
    assert "it needs 20.000000001 SOL more to pass the 30 SOL at place 2" in fired.body
    assert nothing == []


def test_no_stake_fires_naming_it() -> None:
    (fired,) = play(rule(), [observed(votes(0, 50 * SOL, delinquent=True), ENOUGH)])[0]
    assert "no activated stake" in fired.title
    assert "No activated stake" in fired.body


def test_missing_from_get_vote_accounts_is_no_stake() -> None:
    answer = VoteAccounts(current=[], delinquent=[])
    obs = VatObservation(answer, MINE, sample_account(ENOUGH, owner=VOTE_PROGRAM), 5)
    (fired,) = play(rule(), [obs])[0]
    assert fired.facts["failing"] == ["no_stake"]


def test_every_failing_condition_is_named() -> None:
    (fired,) = play(rule(max_rank=1), [observed(votes(SOL, 50 * SOL), 0)])[0]
    assert fired.facts["failing"] == ["balance", "rank"]


def test_near_the_cut_warns_and_falls_quiet_away_from_it() -> None:
    near = votes(40 * SOL, 50 * SOL, 30 * SOL, 20 * SOL)  # rank 2 of a cut at 3
    far = votes(60 * SOL, 50 * SOL, 30 * SOL, 20 * SOL)  # rank 1
    said = play(
        rule(max_rank=3, warn_rank_margin=2), [observed(far, ENOUGH), observed(near, ENOUGH)]
    )
    assert said[0] == []
    (warned,) = said[1]
    assert "near the VAT cut: rank 2 of 3" in warned.title
    assert play(rule(max_rank=3), [observed(near, ENOUGH)]) == [[]]


def test_falling_past_the_cut_after_the_warning_is_said_once() -> None:
    near = votes(40 * SOL, 50 * SOL, 30 * SOL, 20 * SOL)  # rank 2 of a cut at 3
    past = votes(10 * SOL, 50 * SOL, 30 * SOL, 20 * SOL)  # rank 4
    said = play(
        rule(max_rank=3, warn_rank_margin=2),
        [observed(near, ENOUGH), observed(past, ENOUGH), observed(past, ENOUGH)],
    )
    (warned,), (escalated,), quiet = said
    assert warned.reason == "firing" and "near the VAT cut" in warned.title
    assert escalated.reason == "repeat"
    assert "now would miss the VAT: rank 4 past 3" in escalated.title
    assert "It was near the cut when this alert fired" in escalated.body
    assert quiet == []


def test_an_identity_key_is_ranked_by_its_vote_account() -> None:
    the_rule = rule(validators=[MINE_NODE], max_rank=1)
    obs = observed(votes(SOL, 50 * SOL), ENOUGH)
    outcome = VAT.step([the_rule], MINE_NODE, None, obs, 1.0)
    (fired,) = outcome.alerts
    assert fired.facts["vote_pubkey"] == MINE and fired.facts["rank"] == 2


def test_the_state_keeps_what_the_doubt_compares() -> None:
    outcome = VAT.step([rule()], MINE, None, observed(votes(SOL, SOL), ENOUGH, slot=77), 1.0)
    assert outcome.state["slot"] == 77 and outcome.state["accounts"] == 2
    stale = observed(votes(SOL, SOL), ENOUGH, slot=70)
    assert VAT.doubt(outcome.state, stale, 2.0) is not None


def test_the_simulator_shows_vote_accounts_and_drains_them() -> None:
    ledger = Ledger(seed=1)
    ledger.set_validator(MINE, MINE_NODE, stake=SOL)
    methods = RpcMethods(ledger)

    def read() -> Any:
        params = [[MINE, MINE_NODE], {"encoding": "base64"}]
        return MultipleAccounts.model_validate(
            json.loads(methods.answer("getMultipleAccounts", params))
        )

    mine, identity = read().value
    assert identity is None
    assert mine is not None and mine.owner == VOTE_PROGRAM and mine.space == 3762
    assert mine.lamports == VOTE_RENT_EXEMPT_LAMPORTS + 5 * SOL
    ledger.update_validator(MINE_NODE, balance=SOL)
    assert read().value[0].lamports == SOL
    with pytest.raises(ValueError, match="balance must not be negative"):
        ledger.update_validator(MINE, balance=-1)


# -- /metrics ---------------------------------------------------------------------------------

KEYS = (MINE, MINE_NODE)
# The balance the ticket needs (its rent-exempt minimum and 1.6 SOL), and the time to the next
# boundary from the first slot of epoch 800: a whole epoch of 432,000 slots at 0.4 s.
LINE = ("vat_min_vote_balance", (VOTE_RENT_EXEMPT_LAMPORTS + 16 * SOL // 10) / SOL)
BOUNDARY = ("vat_boundary_seconds", 432_000 * 0.4)


@pytest.mark.parametrize(
    ("answer", "balance", "max_ranks", "expected"),
    [
        (  # third of three with a cut at two: 20 SOL and a lamport short
            votes(10 * SOL, 50 * SOL, 30 * SOL),
            2 * SOL,
            [2],
            [
                ("vat_rank", 3),
                ("vat_stake_gap", 20.000000001),
                ("vote_account_balance", 2.0),
                LINE,
                BOUNDARY,
            ],
        ),
        (  # the strictest rule's cut counts
            votes(10 * SOL, 50 * SOL, 30 * SOL),
            2 * SOL,
            [3, 2],
            [
                ("vat_rank", 3),
                ("vat_stake_gap", 20.000000001),
                ("vote_account_balance", 2.0),
                LINE,
                BOUNDARY,
            ],
        ),
        (  # passing: a gap of 0
            votes(40 * SOL, 50 * SOL, 30 * SOL),
            2 * SOL,
            [2],
            [
                ("vat_rank", 2),
                ("vat_stake_gap", 0.0),
                ("vote_account_balance", 2.0),
                LINE,
                BOUNDARY,
            ],
        ),
        (  # fewer staked than places: no cut, no gap
            votes(10 * SOL, 50 * SOL),
            2 * SOL,
            [2000],
            [("vat_rank", 2), ("vote_account_balance", 2.0), LINE, BOUNDARY],
        ),
        (  # no stake: no rank; a vote account that does not exist holds 0
            votes(0, 50 * SOL, delinquent=True),
            None,
            [2000],
            [("vote_account_balance", 0.0), LINE, BOUNDARY],
        ),
    ],
)
def test_vat_samples(
    answer: VoteAccounts,
    balance: int | None,
    max_ranks: list[int],
    expected: list[tuple[str, float]],
) -> None:
    rules = [rule(name=f"r{n}", max_rank=max_rank) for n, max_rank in enumerate(max_ranks)]
    samples = vat_samples(rules, MINE, observed(answer, balance))
    assert samples == tuple(
        Sample(f"solana_validator_{name}", KEYS, value, MINE) for name, value in expected
    )
    for sample in samples:
        assert len(sample.labels) == len(METRICS[sample.name].labels)
    assert SAMPLERS["vat"] is vat_samples


def test_vat_samples_the_strictest_balance_line_and_no_boundary_without_a_slot() -> None:
    rules = [rule(name="a", min_vote_balance_sol=1.6), rule(name="b", min_vote_balance_sol=3)]
    observation = observed(votes(10 * SOL, 50 * SOL), 2 * SOL)
    found = {s.name: s.value for s in vat_samples(rules, MINE, observation)}
    line = (VOTE_RENT_EXEMPT_LAMPORTS + 3 * SOL) / SOL
    assert found["solana_validator_vat_min_vote_balance"] == line
    # Half an epoch on: half an epoch left.
    later = observed(votes(10 * SOL, 50 * SOL), 2 * SOL, slot=432_000 * 800 + 216_000)
    found = {s.name: s.value for s in vat_samples(rules, MINE, later)}
    assert found["solana_validator_vat_boundary_seconds"] == pytest.approx(216_000 * 0.4)
    unread = replace(observation, slot=None)
    names = {s.name for s in vat_samples(rules, MINE, unread)}
    assert "solana_validator_vat_boundary_seconds" not in names
