"""The kinds riding getVoteAccounts (source ``votes``): cluster_stalled and vote_lag, their
pure steps (tables), the simulator's vote controls and the answer model's epochCredits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import RULE_MODELS, SOURCES, word
from watcher.ledger.models import VoteAccount, VoteAccounts
from watcher.simulator import Ledger

from support.recorded import result_of
from support.values import key

VOTES = SOURCES["votes"]
MINE, MINE_NODE, BIG, OTHER = key("mine"), key("mine node"), key("big"), key("other")


def rule(kind: str, **fields: Any) -> Any:
    return RULE_MODELS[kind].model_validate({"kind": kind, "notify": ["ops"], **fields})


def account(vote: str, last_vote: int, *, node: str | None = None, **extra: Any) -> VoteAccount:
    return VoteAccount.model_validate(
        {
            "votePubkey": vote,
            "nodePubkey": node or key(f"node {vote}"),
            "activatedStake": extra.pop("stake", 10**15),
            "lastVote": last_vote,
            **extra,
        }
    )


def cluster(*current: VoteAccount, delinquent: Sequence[VoteAccount] = ()) -> VoteAccounts:
    return VoteAccounts(current=list(current), delinquent=list(delinquent))


def play(
    rules: Sequence[Any], answers: Sequence[tuple[float, VoteAccounts]]
) -> list[list[AlertMessage]]:
    """Each answer stepped in turn (the state through JSON, as the store keeps it): the
    worded alerts of each step."""
    state: TargetState | None = None
    said = []
    by_name = {r.name: r for r in rules}
    for now, answer in answers:
        outcome: StepOutcome = VOTES.step(rules, "cluster", state, answer, now)
        state = json.loads(json.dumps(outcome.state))
        said.append([word(alert, by_name[alert.rule]) for alert in outcome.alerts])
    return said


def reasons(said: list[list[AlertMessage]]) -> list[list[str]]:
    return [[f"{a.rule}:{a.reason}" for a in step] for step in said]


# -- vote_lag --------------------------------------------------------------------------------

LAG = rule("vote_lag", name="lag", validators=[MINE], max_slots=50)


@pytest.mark.parametrize(
    ("behind", "firing"),
    [(0, False), (50, False), (51, True), (127, True)],
)
def test_vote_lag_fires_only_beyond_max_slots(behind: int, firing: bool) -> None:
    answer = cluster(account(BIG, 1000), account(MINE, 1000 - behind))
    said = play([LAG], [(0.0, answer)])
    assert reasons(said) == [["lag:firing"] if firing else []]
    if firing:
        assert (
            said[0][0].title == f"[WARNING] lag: validator {MINE[:4]}…{MINE[-4:]} votes "
            f"{behind} slots behind"
        )


def test_vote_lag_by_identity_fires_once_and_resolves_once() -> None:
    by_identity = rule("vote_lag", name="lag", validators=[MINE_NODE])
    lagging = cluster(account(BIG, 1000), account(MINE, 900, node=MINE_NODE))
    back = cluster(account(BIG, 1100), account(MINE, 1090, node=MINE_NODE))
    said = play([by_identity], [(0.0, lagging), (10.0, lagging), (20.0, back), (30.0, back)])
    assert reasons(said) == [["lag:firing"], [], ["lag:resolved"], []]
    assert "caught up (10 slots behind)" in said[2][0].title


def test_vote_lag_of_a_validator_in_neither_list_is_unknown() -> None:
    lagging = cluster(account(BIG, 1000), account(MINE, 900))
    gone = cluster(account(BIG, 1100))
    # Firing, then gone from the answer: no resolution (not evidence), no new firing.
    assert reasons(play([LAG], [(0.0, lagging), (10.0, gone), (20.0, gone)])) == [
        ["lag:firing"],
        [],
        [],
    ]
    assert reasons(play([LAG], [(0.0, gone)])) == [[]]


# -- cluster_stalled -------------------------------------------------------------------------

STALL = rule("cluster_stalled", name="halt", stalled_for="1m")


def at(vote: int, root: int) -> VoteAccounts:
    return cluster(account(BIG, vote, rootSlot=root), account(OTHER, vote - 5, rootSlot=root - 5))


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        # baseline, then 59 s without progress: quiet; at 60 s: fires.
        ([(0, at(100, 60)), (59, at(100, 60)), (60, at(100, 60))], [[], [], ["halt:firing"]]),
        # only the root advancing is progress too.
        ([(0, at(100, 60)), (40, at(100, 61)), (80, at(100, 61))], [[], [], []]),
        # a lower answer (a node behind) is no progress: the clock keeps running.
        ([(0, at(100, 60)), (30, at(90, 50)), (60, at(100, 60))], [[], [], ["halt:firing"]]),
        # stalled, then votes advance: resolved once.
        (
            [(0, at(100, 60)), (60, at(100, 60)), (70, at(101, 60)), (80, at(102, 61))],
            [[], ["halt:firing"], ["halt:resolved"], []],
        ),
    ],
)
def test_cluster_stalled_on_the_steps_clock(
    answers: list[tuple[float, VoteAccounts]], expected: list[list[str]]
) -> None:
    assert reasons(play([STALL], answers)) == expected


def test_cluster_stalled_message_and_defaults() -> None:
    default = rule("cluster_stalled", name="halt")
    assert default.stalled_for == 60.0
    said = play([default], [(0.0, at(100, 60)), (90.0, at(100, 60))])
    alert = said[1][0]
    assert alert.subject == "cluster"
    assert alert.title == "[WARNING] halt: the cluster is stalled: no new vote or root for 1m 30s"
    assert "Highest vote: slot 100; highest root: slot 60" in alert.body


def test_kinds_share_one_state_and_delinquency_keeps_its_own() -> None:
    mine = rule("delinquent_validators", name="mine", validators=[MINE])
    rules = [mine, LAG, STALL]
    answer = cluster(account(BIG, 1000, rootSlot=900), delinquent=[account(MINE, 800)])
    said = play(rules, [(0.0, answer), (60.0, answer)])
    assert reasons(said) == [["mine:firing", "lag:firing"], ["halt:firing"]]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"kind": "vote_lag", "validators": [MINE], "max_slots": 0}, "greater than or equal"),
        ({"kind": "vote_lag", "validators": []}, "at least 1"),
        ({"kind": "cluster_stalled", "stalled_for": "0s"}, "more than 0"),
        ({"kind": "cluster_stalled", "validators": [MINE]}, "Extra inputs"),
    ],
)
def test_rule_keys_are_checked(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        RULE_MODELS[fields["kind"]].model_validate({"name": "r", **fields})


# -- the answer model ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "credits",
    [
        [[837, 10, 20]],  # credits below the previous credits
        [[837, 20, 10], [836, 30, 20]],  # epochs not rising
        [[837, 20, 10], [837, 30, 20]],
        [[837, -1, 0]],
        [[837, 1.5, 0]],
        [[837, 20]],
    ],
)
def test_vote_account_refuses_malformed_epoch_credits(credits: Any) -> None:
    with pytest.raises(ValidationError):
        account(MINE, 100, epochCredits=credits)


# -- the simulator's controls ----------------------------------------------------------------


def test_simulator_scripts_lag_credits_commission_stake_and_a_halt() -> None:
    ledger = Ledger(slot=10_000, epoch=800)
    ledger.set_validator(MINE, MINE_NODE, stake=5)
    ledger.update_validator(MINE_NODE, behind=60, credits=1234, commission=7, stake=9)
    (found,) = ledger.vote_accounts()["current"]
    assert (found["lastVote"], found["commission"], found["activatedStake"]) == (9940, 7, 9)
    assert found["epochCredits"][-1] == [
        800,
        found["epochCredits"][-2][1] + 1234,
        found["epochCredits"][-2][1],
    ]
    VoteAccount.model_validate(found)
    ledger.halt()
    ledger.tick(100)
    assert ledger.slot == 10_000
    ledger.halt(False)
    ledger.tick(100)
    assert ledger.slot == 10_100
    with pytest.raises(ValueError, match="commission"):
        ledger.update_validator(MINE, commission=101)
    with pytest.raises(KeyError):
        ledger.update_validator(OTHER, behind=1)


# -- credits_low -----------------------------------------------------------------------------

CREDITS = rule("credits_low", name="credits", validators=[MINE])


def earning(vote: str, credits: int, *, epoch: int = 837, **extra: Any) -> VoteAccount:
    entries = [[epoch - 1, 1000, 0], [epoch, 1000 + credits, 1000]]
    return account(vote, 1000, epochCredits=entries, **extra)


def peers(*credits: int) -> list[VoteAccount]:
    return [earning(key(f"peer {n}"), amount) for n, amount in enumerate(credits)]


@pytest.mark.parametrize(
    ("mine", "firing"),
    # median of the peers and mine (100, 100, 100, mine): 100; 10 % under it is 90.
    [(100, False), (90, False), (89, True), (0, True), (200, False)],
)
def test_credits_low_fires_more_than_the_pct_under_the_median(mine: int, firing: bool) -> None:
    answer = cluster(*peers(100, 100, 100), earning(MINE, mine))
    said = play([CREDITS], [(0.0, answer)])
    assert reasons(said) == [["credits:firing"] if firing else []]


def test_credits_median_leaves_out_delinquent_and_unstaked_accounts() -> None:
    # The current staked peers earned 100; a delinquent and an unstaked one earned nothing:
    # counted, they would pull the median down to where 80 is not low.
    answer = cluster(
        *peers(100, 100, 100),
        earning(key("unstaked"), 0, stake=0),
        earning(MINE, 80),
        delinquent=[earning(key("late 1"), 0), earning(key("late 2"), 0)],
    )
    said = play([CREDITS], [(0.0, answer)])
    assert reasons(said) == [["credits:firing"]]
    assert said[0][0].title.endswith("credits 20% under the median")
    assert "Epoch 837: 80 credits; median of the current staked validators 100" in said[0][0].body


def test_credits_unknown_without_median_or_account_then_resolves_once() -> None:
    start_of_epoch = cluster(*peers(0, 0, 0), earning(MINE, 0))
    low = cluster(*peers(100, 100, 100), earning(MINE, 10))
    gone = cluster(*peers(100, 100, 100))
    caught_up = cluster(*peers(200, 200, 200), earning(MINE, 195))
    answers = [(0.0, start_of_epoch), (10.0, low), (20.0, gone), (30.0, caught_up)]
    assert reasons(play([CREDITS], answers)) == [[], ["credits:firing"], [], ["credits:resolved"]]


def test_credits_low_on_the_recorded_mainnet_cluster() -> None:
    """Epoch 837 (2025-08-21): the median of the 1036 current staked accounts is 920,250
    credits; three of them earned more than 10% less."""
    answer = VoteAccounts.model_validate(result_of("mainnet_getVoteAccounts_2025-08-21_sava.json"))
    low = [
        "Bjq4FbzK9aA9bQ7nYd5eGjTtiMyB8yFLVomgr8Wow4hK",
        "AUTnPgB8m6qsctP9RRAcmnVrLSpZbBYB8nQAzYUN5j8q",
        "RAREcr3SmDePhWD4Je1qEh1UMCQD5MFaDHF7UTzezQh",
    ]
    fine = "Va1idkzkB6LEmVFmxWbWU8Ao9qehC62Tjmf68L3uYKj"  # 920,240: just under the median
    everyone = [acc.vote_pubkey for acc in answer.current if acc.activated_stake > 0]
    watching = rule("credits_low", name="credits", validators=everyone)
    said = play([watching], [(0.0, answer)])
    assert sorted(alert.subject for alert in said[0]) == sorted(low)
    assert fine in everyone
    by_subject = {alert.subject: alert for alert in said[0]}
    assert "credits; median of the current staked validators 920,250" in by_subject[low[0]].body
    assert "352,339 credits" in by_subject[low[0]].body


def test_a_vote_lag_reminder_counts_from_when_the_lag_began_not_from_when_it_fired() -> None:
    from watcher.core.clock import iso
    from watcher.kinds import KINDS
    from watcher.kinds.toolkit.alert_samples import SAMPLE_TIME

    lag = rule(
        "vote_lag", name="lag", validators=[MINE], max_slots=100, **{"for": "5m"}, repeat="1h"
    )
    samples = KINDS["vote_lag"].samples
    assert samples is not None
    alerts = [word(alert, lag) for alert in samples(lag)]
    [firing] = [a for a in alerts if a.reason == "firing"]
    [reminder] = [a for a in alerts if a.reason == "repeat"]
    onset = iso(SAMPLE_TIME + 1.0)  # the sample's first lagging answer
    assert onset in reminder.body and "(firing since " in reminder.body
    assert f"since {onset}" in reminder.body
    assert firing.facts["since"] == onset != firing.facts["firing_since"]
