"""Built-in alerts: rpc_unhealthy and cluster_delinquent_stake.

Pure tables for how failed rounds are counted and for the delinquent share, step sequences for
both episodes, then the real daemon against the simulator: an endpoint that is down, a cluster
with much of its stake delinquent, and labels and explorer links in what a receiver gets.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.alerting.builtin import (
    BuiltinRule,
    Builtins,
    RoundHealth,
    RoundVerdict,
    rpc_condition,
    step_rpc_health,
)
from watcher.config.reading import load_settings
from watcher.config.rule_models import CLUSTER_DELINQUENT_STAKE, RPC_DISAGREEMENT, RPC_UNHEALTHY
from watcher.core.errors import ConfigError, ServerError
from watcher.core.events import AlertMessage, TargetState
from watcher.kinds import RULE_MODELS, SOURCES, word
from watcher.kinds.delinquent_validators import delinquent_stake_pct
from watcher.kinds.rule_files import load_rules
from watcher.ledger.models import VoteAccount, VoteAccounts
from watcher.simulator.keys import derived_pubkey

from support.values import key
from support.world import (
    API_KEY,
    OUR_NODE,
    OUR_VOTE,
    TREASURY,
    all_polled,
    make_world,
    rules,
    small_cluster,
)

ENDPOINT = "https://rpc.example.com/v3/***"
MY_VALIDATOR = RULE_MODELS["delinquent_validators"].model_validate(
    {
        "name": "my-validator",
        "kind": "delinquent_validators",
        "validators": [key("vote-1")],
        "severity": "critical",
    }
)


def roundtrip(state: TargetState) -> TargetState:
    """What the store gives back: the state went through JSON."""
    loaded: TargetState = json.loads(json.dumps(state))
    return loaded


# -- counting failed rounds (watcher.alerting.builtin.RoundHealth)

# One round: (source, outcomes of its calls: True = succeeded).
Round = tuple[str, Sequence[bool]]


def play(rounds: Sequence[Round]) -> list[tuple[bool, int] | None]:
    health = RoundHealth()
    error = ServerError("HTTP 503 from the endpoint", method="getVoteAccounts", status=503)
    verdicts: list[tuple[bool, int] | None] = []
    for now, (source, outcomes) in enumerate(rounds):
        for index, ok in enumerate(outcomes):
            if ok:
                health.succeeded(source)
            else:
                health.failed(source, f"t{index}", error)
        verdict = health.round_done(source, float(now))
        verdicts.append(None if verdict is None else (verdict.answered, verdict.failed_rounds))
    return verdicts


@pytest.mark.parametrize(
    ("rounds", "expected"),
    [
        # One source failing round after round: its streak grows.
        ([("votes", [False])] * 3, [(False, 1), (False, 2), (False, 3)]),
        # Four sources failing in the same bad second: one failed round of each, not four.
        (
            [(s, [False]) for s in ("signatures", "holders", "votes", "nodes")],
            [(False, 1)] * 4,
        ),
        # Any answered round, of any source, resets every streak (the endpoint works).
        (
            [("votes", [False]), ("votes", [False]), ("nodes", [True]), ("votes", [False])],
            [(False, 1), (False, 2), (True, 0), (False, 1)],
        ),
        # One call that succeeded makes the round answered, even among failures.
        ([("signatures", [False, True, False])], [(True, 0)]),
        # A round that made no call says nothing.
        ([("votes", [])], [None]),
    ],
)
def test_failed_rounds_are_counted_cluster_wide(
    rounds: Sequence[Round], expected: list[tuple[bool, int] | None]
) -> None:
    assert play(rounds) == expected


def test_the_streak_remembers_when_the_endpoint_started_failing() -> None:
    health = RoundHealth()
    error = ServerError("HTTP 503", method="getVoteAccounts", status=503)
    for now in (100.0, 130.0):
        health.failed("votes", "cluster", error)
        verdict = health.round_done("votes", now)
    assert verdict is not None and verdict.failing_since == 100.0
    assert verdict.last_error == "ServerError: getVoteAccounts: HTTP 503"


def test_two_jobs_of_one_source_each_count_their_own_rounds() -> None:
    """votes swept every 10 s (failing) and every 60 s (answering), their rounds overlapping:
    each round is judged by its own job's calls, and the 10 s job's streak grows round by round
    until the 60 s job's answered round resets it."""
    health = RoundHealth()
    error = ServerError("HTTP 503", method="getVoteAccounts", status=503)
    verdicts: list[tuple[bool, int] | None] = []

    def done(interval: float, now: float) -> None:
        verdict = health.round_done("votes", now, interval=interval)
        verdicts.append(None if verdict is None else (verdict.answered, verdict.failed_rounds))

    health.succeeded("votes", interval=60.0)  # the 60 s round is still open
    for now in (10.0, 20.0):
        health.failed("votes", "cluster", error, interval=10.0)
        done(10.0, now)
    done(60.0, 25.0)
    health.failed("votes", "cluster", error, interval=10.0)
    done(10.0, 30.0)
    assert verdicts == [(False, 1), (False, 2), (True, 0), (False, 1)]


@pytest.mark.parametrize(
    ("answered", "failed_rounds", "unhealthy_after", "unhealthy"),
    [
        (True, 0, 3, False),  # answered: healthy, which resolves an open episode
        (False, 1, 3, None),  # a short streak is no evidence either way
        (False, 2, 3, None),
        (False, 3, 3, True),
        (False, 7, 3, True),
        (False, 1, 1, True),
    ],
)
def test_unhealthy_threshold(
    answered: bool, failed_rounds: int, unhealthy_after: int, unhealthy: bool | None
) -> None:
    verdict = RoundVerdict(answered, failed_rounds, None if answered else 0.0, None)
    assert rpc_condition(verdict, unhealthy_after) is unhealthy


# -- the rpc_unhealthy episode -----------------------------------------------------------------

RPC_RULE = BuiltinRule(RPC_UNHEALTHY, "critical", ("oncall",), threshold=3)
ERROR = "ServerError: HTTP 503 Service Unavailable (HTML body) from https://rpc.example.com/v3/***"


def failed(rounds: int, since: float) -> RoundVerdict:
    return RoundVerdict(False, rounds, since, ERROR)


ANSWERED = RoundVerdict(True, 0, None, ERROR)


def run_rpc(
    verdicts: Sequence[tuple[float, RoundVerdict]], state: TargetState | None = None
) -> tuple[list[list[AlertMessage]], TargetState | None]:
    said = []
    for now, verdict in verdicts:
        outcome = step_rpc_health(RPC_RULE, state, verdict, ENDPOINT, now)
        said.append([] if outcome is None else [word(a, RPC_RULE) for a in outcome.alerts])
        if outcome is not None:
            state = roundtrip(outcome.state)
    return said, state


def test_rpc_unhealthy_fires_once_at_the_threshold_and_resolves_once() -> None:
    said, _ = run_rpc(
        [
            (0, ANSWERED),
            (30, failed(1, 30)),
            (60, failed(2, 30)),
            (90, failed(3, 30)),
            (120, failed(4, 30)),
            (150, ANSWERED),
            (180, ANSWERED),
        ]
    )
    assert [[a.reason for a in alerts] for alerts in said] == [
        [],
        [],
        [],
        ["firing"],
        [],
        ["resolved"],
        [],
    ]
    firing, resolved = said[3][0], said[5][0]
    assert firing.title == "[CRITICAL] rpc_unhealthy: the RPC endpoint is failing"
    assert f"Endpoint: {ENDPOINT}" in firing.body
    assert f"Last error: {ERROR}" in firing.body
    assert "Every call failed for 3 rounds in a row, since 1970-01-01T00:00:30Z" in firing.body
    assert firing.channels == ("oncall",) and firing.dedup_key == "rpc_unhealthy|rpc|1|firing"
    # How long it lasted: from the first failed round, not from when it fired.
    assert resolved.title == "[RESOLVED] rpc_unhealthy: the RPC endpoint answers again after 2m"
    assert "after failing for 2m (since 1970-01-01T00:00:30Z)" in resolved.body
    assert resolved.dedup_key == "rpc_unhealthy|rpc|1|resolved"


def test_a_healthy_endpoint_records_nothing() -> None:
    assert step_rpc_health(RPC_RULE, None, ANSWERED, ENDPOINT, 0) is None
    assert step_rpc_health(RPC_RULE, None, failed(2, 0), ENDPOINT, 0) is None


def test_an_outage_across_a_restart_is_neither_announced_again_nor_resolved_early() -> None:
    _, state = run_rpc([(30, failed(3, 0))])
    # After a restart the count starts again from zero: a short streak changes nothing...
    said, state = run_rpc([(100, failed(1, 100)), (200, failed(3, 100))], state)
    assert said == [[], []]
    # ...and the outage is measured from its very first failed round.
    said, _ = run_rpc([(300, ANSWERED)], state)
    assert [a.reason for a in said[0]] == ["resolved"]
    assert "after failing for 5m" in said[0][0].body


# -- the delinquent share and cluster_delinquent_stake ---------------------------------------


def accounts(current: Sequence[int], delinquent: Sequence[int]) -> VoteAccounts:
    def account(label: str, stake: int) -> VoteAccount:
        return VoteAccount.model_validate(
            {
                "votePubkey": key(f"vote-{label}"),
                "nodePubkey": key(f"node-{label}"),
                "activatedStake": stake,
                "lastVote": 5000 if label.startswith("c") else 1000,
            }
        )

    return VoteAccounts(
        current=[account(f"c{i}", stake) for i, stake in enumerate(current)],
        delinquent=[account(f"d{i}", stake) for i, stake in enumerate(delinquent)],
    )


@pytest.mark.parametrize(
    ("current", "delinquent", "pct"),
    [
        ([100], [], 0.0),
        ([90], [10], 10.0),
        ([50, 25], [25], 25.0),
        ([], [7], 100.0),
        ([0], [0], None),  # no stake at all: no share to speak of
        ([], [], None),
        ([2 * 10**17, 2 * 10**17], [2 * 10**17], 100 / 3),  # mainnet-sized lamports: exact enough
    ],
)
def test_delinquent_stake_share(
    current: Sequence[int], delinquent: Sequence[int], pct: float | None
) -> None:
    assert delinquent_stake_pct(accounts(current, delinquent)) == pct


STAKE_RULE = BuiltinRule(CLUSTER_DELINQUENT_STAKE, "critical", ("oncall",), threshold=10)
VOTES = SOURCES["votes"]
MINE = {"votePubkey": key("vote-1"), "nodePubkey": key("node-1"), "activatedStake": 5}


def cluster(*, mine_delinquent: bool, others_delinquent: int) -> VoteAccounts:
    """100 stake in ten accounts of 10 (``others_delinquent`` of them delinquent) + mine."""
    base = accounts([10] * (10 - others_delinquent), [10] * others_delinquent)
    mine = VoteAccount.model_validate({**MINE, "lastVote": 1000 if mine_delinquent else 5000})
    if mine_delinquent:
        return VoteAccounts(current=base.current, delinquent=[*base.delinquent, mine])
    return VoteAccounts(current=[*base.current, mine], delinquent=base.delinquent)


def run_cluster(observations: Sequence[tuple[float, VoteAccounts]]) -> list[list[str]]:
    state: TargetState | None = None
    said = []
    for now, observation in observations:
        outcome = VOTES.step([MY_VALIDATOR, STAKE_RULE], "cluster", state, observation, now)
        state = roundtrip(outcome.state)
        said.append([f"{a.rule} {a.reason}" for a in outcome.alerts])
    return said


def test_a_cluster_wide_delinquency_is_one_alert_and_validators_are_held() -> None:
    said = run_cluster(
        [
            (0, cluster(mine_delinquent=False, others_delinquent=0)),
            (30, cluster(mine_delinquent=True, others_delinquent=3)),  # ~31%: folded
            (60, cluster(mine_delinquent=True, others_delinquent=4)),
            (90, cluster(mine_delinquent=False, others_delinquent=4)),  # mine back: held
            (120, cluster(mine_delinquent=True, others_delinquent=4)),
            (150, cluster(mine_delinquent=True, others_delinquent=0)),  # cluster recovers
            (180, cluster(mine_delinquent=True, others_delinquent=0)),
            (210, cluster(mine_delinquent=False, others_delinquent=0)),
        ]
    )
    assert said == [
        [],
        ["cluster_delinquent_stake firing"],
        [],
        [],
        [],
        # Back under the threshold: resolved, and mine is judged on its own again.
        ["cluster_delinquent_stake resolved", "my-validator firing"],
        [],
        ["my-validator resolved"],
    ]


def test_the_threshold_is_a_strict_more_than() -> None:
    exactly = accounts([90], [10])
    above = accounts([89], [11])
    state: TargetState | None = None
    outcome = VOTES.step([MY_VALIDATOR, STAKE_RULE], "cluster", state, exactly, 0)
    assert [a.rule for a in outcome.alerts] == ["my-validator"]  # mine is missing here
    outcome = VOTES.step([MY_VALIDATOR, STAKE_RULE], "cluster", outcome.state, above, 30)
    [alert] = [word(a, STAKE_RULE) for a in outcome.alerts]
    assert (
        alert.title
        == "[CRITICAL] cluster_delinquent_stake: 11.0% of the activated stake is delinquent"
    )
    assert "above the 10% threshold" in alert.body
    assert "1 of 2 vote accounts" in alert.body
    assert f"- {key('vote-d0')}  0.000000011 SOL, identity {key('node-d0')}" in alert.body


def test_a_validator_firing_before_the_cluster_episode_is_held_not_resolved() -> None:
    said = run_cluster(
        [
            (0, cluster(mine_delinquent=True, others_delinquent=0)),
            (30, cluster(mine_delinquent=False, others_delinquent=5)),
            (60, cluster(mine_delinquent=False, others_delinquent=0)),
        ]
    )
    assert said == [
        ["my-validator firing"],
        ["cluster_delinquent_stake firing"],
        ["cluster_delinquent_stake resolved", "my-validator resolved"],
    ]


# -- channels of the built-in alerts -------------------------------------------------------------


def builtins_for(tmp_path: Path, rule_list: list[dict[str, Any]], **settings: Any) -> Builtins:
    (tmp_path / "rules").mkdir(exist_ok=True)
    (tmp_path / "rules" / "r.yaml").write_text(yaml.safe_dump({"rules": rule_list}))
    document = {
        "rpc_url": "https://rpc.example.com/v3/key",
        "rules": ["rules/"],
        "channels": {name: ["json://127.0.0.1/"] for name in ("ops", "oncall", "mail", "all")},
        **settings,
    }
    (tmp_path / "watcher.yaml").write_text(yaml.safe_dump(document))
    loaded = load_settings(tmp_path / "watcher.yaml", env={})
    return Builtins.from_settings(loaded, load_rules(loaded.rules, None), ENDPOINT)


RULES = [
    {"name": "tx", "kind": "new_transactions", "addresses": [TREASURY], "notify": ["ops"]},
    {
        "name": "val",
        "kind": "delinquent_validators",
        "validators": [OUR_VOTE],
        "notify": ["oncall"],
    },
    {
        "name": "routed",
        "kind": "delinquent_validators",
        "validators": [OUR_NODE],
        "severity": "info",
    },
]


@pytest.mark.parametrize(
    ("settings", "rpc_channels", "stake_channels"),
    [
        ({"health": {"channels": ["mail"]}}, ("mail",), ("mail",)),
        (
            {"fallback_channels": ["mail"], "default_channels": ["all"]},
            ("mail",),
            ("oncall", "all"),
        ),
        ({"default_channels": ["all"]}, ("all",), ("oncall", "all")),
        # Nothing set for it: every channel a rule delivers to (here via routes).
        ({"routes": {"info": ["mail"]}}, ("ops", "oncall", "mail"), ("oncall", "mail")),
    ],
)
def test_channels_of_the_built_in_alerts(
    tmp_path: Path,
    settings: dict[str, Any],
    rpc_channels: tuple[str, ...],
    stake_channels: tuple[str, ...],
) -> None:
    builtins = builtins_for(tmp_path, RULES, **settings)
    assert builtins.rpc_unhealthy.notify == rpc_channels
    assert builtins.rpc_disagreement.notify == rpc_channels  # the endpoints concern every rule
    assert builtins.cluster_delinquent_stake is not None
    assert builtins.cluster_delinquent_stake.notify == stake_channels
    assert builtins.rules_for("votes") == [builtins.cluster_delinquent_stake]
    assert builtins.rules_for("signatures") == []


def test_health_settings_tune_and_turn_off(tmp_path: Path) -> None:
    builtins = builtins_for(
        tmp_path,
        RULES,
        health={
            "unhealthy_after": 5,
            "cluster_delinquent_stake_pct": None,
            "severity": "warning",
            "disagreement_for": "90s",
        },
    )
    assert builtins.rpc_unhealthy.threshold == 5
    assert builtins.rpc_unhealthy.severity == "warning"
    assert builtins.rpc_disagreement.for_ == 90 and builtins.rpc_disagreement.severity == "warning"
    assert builtins_for(tmp_path, RULES).rpc_disagreement.for_ == 300  # by default
    assert builtins.cluster_delinquent_stake is None and builtins.rules_for("votes") == []


@pytest.mark.parametrize("name", [RPC_UNHEALTHY, RPC_DISAGREEMENT, CLUSTER_DELINQUENT_STAKE])
def test_no_rule_may_take_a_built_in_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match=rf"r.yaml:\d+: name: '{name}' is the name of a built-in"):
        builtins_for(tmp_path, [{**RULES[1], "name": name}])


# -- the real daemon -----------------------------------------------------------------------------

FAST_FAILURES = {"rpc": {"timeout": "2s", "max_attempts": 1}, "health": {"unhealthy_after": 2}}


def builtin_world(tmp_path: Path, **config: Any) -> Any:
    return make_world(tmp_path, small_cluster(), **{**FAST_FAILURES, **config})


@pytest.mark.e2e  # starts `watcher run`
def test_endpoint_down_is_one_rpc_unhealthy_no_validator_alert_then_one_resolved(
    tmp_path: Path,
) -> None:
    for world in builtin_world(tmp_path):
        world.daemon.start()
        all_polled(world)
        world.ledger.faults.inject("http_503_html", count=100_000)
        [note] = world.wait_notes(1)
        assert note["title"] == "[CRITICAL] rpc_unhealthy: the RPC endpoint is failing"
        assert f"Endpoint: {world.server.url.replace(API_KEY, '***')}" in note["message"]
        assert "Last error: ServerError" in note["message"]

        # Still down across a restart: not announced again, not resolved.
        assert world.daemon.stop() == 0
        world.daemon.start()
        world.wait_polls("getVoteAccounts", 4)
        assert len(world.notes()) == 1, world.titles()

        world.ledger.faults.clear()
        resolved = world.wait_notes(2)[-1]
        assert resolved["title"].startswith(
            "[RESOLVED] rpc_unhealthy: the RPC endpoint answers again after "
        )
        # Apprise's notify types: red for the outage, green for its end.
        assert [n["type"] for n in world.notes()] == ["failure", "success"]
        all_polled(world)
        assert world.daemon.stop() == 0
        # Neither "missing" validators nor drift: a failed call is never evidence.
        assert [n["title"].split(":")[0] for n in world.notes()] == [
            "[CRITICAL] rpc_unhealthy",
            "[RESOLVED] rpc_unhealthy",
        ]
        assert API_KEY not in json.dumps(world.notes())


BIG_DELINQUENTS = [
    (derived_pubkey(f"dq vote {i}"), derived_pubkey(f"dq node {i}")) for i in range(3)
]


@pytest.mark.e2e  # starts `watcher run`
def test_a_cluster_wide_delinquency_is_one_alert_not_one_per_validator(tmp_path: Path) -> None:
    ledger = small_cluster()
    for vote, node in BIG_DELINQUENTS:  # 3 x 1e15 against the rest's ~1e16: ~23%
        ledger.set_validator(vote, node, stake=1_000_000_000_000_000)
        ledger.set_node(node, version="2.3.6")
    for world in make_world(tmp_path, ledger):
        world.daemon.start()
        all_polled(world)
        for vote, _ in BIG_DELINQUENTS:
            world.ledger.mark_delinquent(vote)
        world.ledger.mark_delinquent(OUR_VOTE)
        [note] = world.wait_notes(1)
        assert note["title"].startswith("[CRITICAL] cluster_delinquent_stake: 2")
        assert "of the activated stake is delinquent" in note["title"]
        assert BIG_DELINQUENTS[0][0] in note["message"] and OUR_VOTE in note["message"]
        world.wait_polls("getVoteAccounts", 4)
        assert len(world.notes()) == 1, world.titles()

        # The cluster recovers, ours does not: the fold ends and ours fires on its own.
        for vote, _ in BIG_DELINQUENTS:
            world.ledger.mark_current(vote)
        notes = world.wait_notes(3)
        assert sorted(n["title"].split(":")[0] for n in notes[1:]) == [
            "[CRITICAL] my-validator",
            "[RESOLVED] cluster_delinquent_stake",
        ]
        world.wait_polls("getVoteAccounts", 3)
        assert len(world.notes()) == 3, world.titles()
        assert world.daemon.stop() == 0


@pytest.mark.e2e  # starts `watcher run`
def test_labels_and_explorer_links_reach_the_receiver(tmp_path: Path) -> None:
    config = {
        "labels": {OUR_VOTE: "my validator", TREASURY: "treasury wallet"},
        "explorer_url": "https://explorer.example/{kind}/{id}?cluster=devnet",
    }
    for world in make_world(tmp_path, small_cluster(), rules=rules()[:3], **config):
        world.daemon.start()
        world.wait_polls("getVoteAccounts", 2)
        world.wait_polls("getSignaturesForAddress", 2)
        world.ledger.mark_delinquent(OUR_VOTE)
        [note] = world.wait_notes(1)
        assert f"{OUR_VOTE[:4]}…{OUR_VOTE[-4:]} (my validator)" in note["title"]
        assert f"Vote account: {OUR_VOTE} (my validator)\n" in note["message"]
        assert f"  https://explorer.example/address/{OUR_NODE}?cluster=devnet" in note["message"]

        [sig] = world.ledger.add_transactions(TREASURY, 1)
        note = world.wait_notes(2)[-1]
        assert "(treasury wallet)" in note["title"]
        assert f"Address: {TREASURY} (treasury wallet)" in note["message"]
        lines = note["message"].splitlines()
        # The signature listed shortened, its link under it carrying it in full.
        at = next(i for i, line in enumerate(lines) if line.startswith(f"- {sig[:8]}…{sig[-8:]} "))
        assert lines[at + 1] == f"  https://explorer.example/tx/{sig}?cluster=devnet"
        assert world.daemon.stop() == 0
