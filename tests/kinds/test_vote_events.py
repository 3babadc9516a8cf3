"""Event kinds riding getVoteAccounts: stake_changed and commission_changed (pure steps)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_vote_kinds import BIG, MINE, MINE_NODE, VOTES, account, cluster, play, reasons, rule

from watcher.checks.templates import sample_alerts, template_problems
from watcher.kinds import digest_words
from watcher.kinds.ruleset import RuleSet

STAKE = rule("stake_changed", name="stake", validators=[MINE], min_change_pct=10)
COMMISSION = rule("commission_changed", name="commission", validators=[MINE_NODE])


def staked(stake: int, commission: int = 5) -> Any:
    mine = account(MINE, 1000, node=MINE_NODE, stake=stake, commission=commission)
    return cluster(account(BIG, 1000), mine)


SOL = 10**9


@pytest.mark.parametrize(
    ("stakes", "events"),
    [
        ([100, 100], [[], []]),  # the first poll is the baseline
        ([100, 109, 91], [[], [], []]),  # under 10% from the baseline either way
        ([100, 110, 120, 121], [[], ["+10.00%"], [], ["+10.00%"]]),  # from the last notified
        ([100, 105, 110], [[], [], ["+10.00%"]]),  # slow creep adds up
        ([100, 50, 100], [[], ["-50.00%"], ["+100.00%"]]),
    ],
)
def test_stake_changed_from_the_amount_last_notified(
    stakes: list[int], events: list[list[str]]
) -> None:
    said = play([STAKE], [(float(n), staked(s * SOL)) for n, s in enumerate(stakes)])
    assert [[a.title.rsplit("(", 1)[1].rstrip(")") for a in step] for step in said] == events
    first = next(alert for step in said for alert in step) if any(said) else None
    if first is not None:
        assert first.reason == "event" and first.subject == MINE
        assert "stake" in first.title and "SOL -> " in first.title


def test_stake_changed_default_and_missing_validator_keeps_its_reference() -> None:
    default = rule("stake_changed", name="stake", validators=[MINE])
    assert default.min_change_pct == 5.0
    gone = cluster(account(BIG, 1000))
    said = play(
        [default],
        [(0.0, staked(100 * SOL)), (1.0, gone), (2.0, staked(104 * SOL)), (3.0, staked(105 * SOL))],
    )
    assert reasons(said) == [[], [], [], ["stake:event"]]


def test_commission_changed_on_any_change_by_identity() -> None:
    said = play(
        [COMMISSION],
        [
            (0.0, staked(SOL, 5)),
            (1.0, staked(SOL, 5)),
            (2.0, staked(SOL, 6)),
            (3.0, staked(SOL, 100)),
        ],
    )
    titles = [[a.title for a in step] for step in said]
    short = f"{MINE_NODE[:4]}…{MINE_NODE[-4:]}"
    head = f"[WARNING] commission: validator {short} commission"
    assert titles == [[], [], [f"{head} 5% -> 6%"], [f"{head} 6% -> 100%"]]


def test_a_rule_added_later_baselines_while_the_other_notifies() -> None:
    other = rule("commission_changed", name="newcomer", validators=[MINE])
    first = VOTES.step([COMMISSION], "cluster", None, staked(SOL, 5), 0.0)
    second = VOTES.step([COMMISSION, other], "cluster", first.state, staked(SOL, 7), 1.0)
    assert [alert.rule for alert in second.alerts] == ["commission"]
    third = VOTES.step([COMMISSION, other], "cluster", second.state, staked(SOL, 9), 2.0)
    assert [alert.rule for alert in third.alerts] == ["commission", "newcomer"]
    keys = {alert.dedup_key for alert in (*second.alerts, *third.alerts)}
    assert len(keys) == 3  # a key per rule, subject and poll


@given(st.lists(st.integers(min_value=0, max_value=100), min_size=1, max_size=12))
def test_one_commission_event_per_change(commissions: list[int]) -> None:
    said = play([COMMISSION], [(float(n), staked(SOL, c)) for n, c in enumerate(commissions)])
    changes = sum(1 for old, new in itertools.pairwise(commissions) if old != new)
    assert sum(len(step) for step in said) == changes


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=12))
def test_every_stake_event_moved_at_least_the_threshold_from_the_last_notified(
    stakes: list[int],
) -> None:
    said = play([STAKE], [(float(n), staked(s * SOL)) for n, s in enumerate(stakes)])
    notified = stakes[0]
    for amount, step in zip(stakes[1:], said[1:], strict=True):
        qualifies = amount > 0 if notified == 0 else abs(amount - notified) * 10 >= notified
        assert len(step) == (1 if qualifies and amount != notified else 0)
        if step:
            assert (step[0].facts["old"], step[0].facts["new"]) == (notified * SOL, amount * SOL)
            notified = amount


def test_digest_words() -> None:
    stake_words, commission_words = (
        digest_words("stake_changed"),
        digest_words("commission_changed"),
    )
    assert stake_words is not None and stake_words.item == ("stake change", "stake changes")
    assert commission_words is not None and commission_words.subject == ("validator", "validators")


def test_event_rules_poll_the_one_cluster_target() -> None:
    assert STAKE.targets == ("cluster",) and STAKE.watched == (MINE,)
    assert COMMISSION.targets == ("cluster",) and COMMISSION.watched == (MINE_NODE,)
    assert RuleSet([STAKE]).targets("votes") == ["cluster"]


# -- watcher check: templates rendered on sample alerts of each kind -------------------------

TEMPLATES = {
    "cluster_stalled": "{{ highest_vote }} {{ highest_root }} {{ last_advance }}",
    "vote_lag": "{{ slots_behind }} > {{ max_slots }} {{ vote_pubkey | short }}",
    "credits_low": "{{ credits }} vs {{ median }} ({{ below_pct }}%) in {{ epoch }}",
    "stake_changed": "{{ old }} -> {{ new }} {{ node_pubkey | named }}",
    "commission_changed": "{{ old }}% -> {{ new }}%",
}


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
def test_check_renders_templates_on_every_transition_of_the_kind(kind: str) -> None:
    watching = {} if kind == "cluster_stalled" else {"validators": [MINE]}
    good = rule(kind, name="r", title=TEMPLATES[kind], **watching)
    broken = rule(kind, name="r", body="{{ old_status.upper() }}", **watching)
    assert template_problems([good]) == []
    [problem] = template_problems([broken])
    assert "rule 'r': body template failed: 'old_status' is undefined" in problem.message
    reasons_seen = {alert.reason for alert in sample_alerts(good)}
    assert reasons_seen == ({"event"} if "changed" in kind else {"firing", "resolved"})
