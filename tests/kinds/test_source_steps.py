"""The four sources: observe() against a fake ledger, step() from state + observation to alerts.

What a user sees is asserted: how many notifications, their titles and bodies, dedup keys.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from typing import Any, cast

import pytest
from pydantic import TypeAdapter

from watcher.config.rule_models import EventRule, RuleBase
from watcher.core.errors import BadResponse, RpcTimeout
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import (
    KINDS,
    RULE_MODELS,
    SOURCES,
    AnyRule,
    digest_words,
    source_of,
    sources_of,
    word,
    wording_of,
)
from watcher.kinds.base import Kind, LedgerReader
from watcher.kinds.delinquent_validators import DelinquentValidatorsRule
from watcher.kinds.holder_changes import HoldersObservation
from watcher.kinds.new_transactions import SignaturesObservation
from watcher.kinds.ruleset import RuleSet
from watcher.kinds.sources import accounts, votes
from watcher.kinds.sources.votes import VotesSource
from watcher.kinds.version_drift import ClusterObservation, VersionDriftRule
from watcher.ledger.models import (
    ClusterNode,
    SignatureEntry,
    TokenAmount,
    VoteAccount,
    VoteAccounts,
)

from support.balances import Balances
from support.recorded import BEHIND, FIXTURES, ON_REFERENCE, load_mainnet
from support.values import entry, history, key, signatures_page

ADDRESS = key("treasury")
OTHER_ADDRESS = key("other")
MINT = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"


def rule(kind: str, **fields: Any) -> RuleBase:
    return RULE_MODELS[kind].model_validate({"kind": kind, **fields})


def roundtrip(state: TargetState) -> TargetState:
    """What the store gives back: the state went through JSON."""
    loaded: TargetState = json.loads(json.dumps(state))
    return loaded


class FakeLedger(Balances):
    """Answers getSignaturesForAddress from a history (newest first) the way a node does:
    ``before``/``until`` exclusive, an unknown ``until`` ignored. Can also ignore ``until``
    or ``before`` altogether, or fail on a given call."""

    def __init__(
        self,
        entries: Sequence[SignatureEntry],
        *,
        ignores_until: bool = False,
        ignores_before: bool = False,
        fail_on_call: int | None = None,
    ) -> None:
        super().__init__()
        self.entries = list(entries)
        self.ignores_until = ignores_until
        self.ignores_before = ignores_before
        self.fail_on_call = fail_on_call
        self.calls: list[dict[str, Any]] = []

    async def get_signatures_for_address(
        self,
        address: str,
        *,
        before: str | None = None,
        until: str | None = None,
        limit: int = 1000,
    ) -> list[SignatureEntry]:
        self.calls.append({"address": address, "before": before, "until": until, "limit": limit})
        if len(self.calls) == self.fail_on_call:
            raise RpcTimeout("read timeout", method="getSignaturesForAddress")
        return signatures_page(
            self.entries,
            before=None if self.ignores_before else before,
            until=None if self.ignores_until else until,
            limit=limit,
        )

    async def get_token_largest_accounts(self, mint: str) -> list[TokenAmount]:
        raise AssertionError("not used")

    async def get_vote_accounts(self) -> VoteAccounts:
        return load_mainnet()[1]

    async def get_cluster_nodes(self) -> list[ClusterNode]:
        return load_mainnet()[0]


SIGNATURES = SOURCES["signatures"]
TREASURY = rule("new_transactions", name="treasury", addresses=[ADDRESS], notify=["ops"])


async def poll(
    ledger: FakeLedger, state: TargetState | None, rules: Sequence[RuleBase] = (TREASURY,)
) -> StepOutcome:
    observation = await SIGNATURES.observe(cast(LedgerReader, ledger), ADDRESS, state)
    outcome = SIGNATURES.step(rules, ADDRESS, state, observation, now=1000.0)
    return StepOutcome(outcome.state, worded(outcome, rules))


def worded(outcome: StepOutcome, rules: Sequence[RuleBase]) -> tuple[AlertMessage, ...]:
    """What a step says (facts), worded the one way the daemon words it."""
    by_name = {rule.name: rule for rule in rules}
    return tuple(word(alert, by_name[alert.rule]) for alert in outcome.alerts)


# -- signatures ------------------------------------------------------------------------------


async def test_first_poll_is_a_quiet_baseline_with_one_call_and_the_balance_read() -> None:
    ledger = FakeLedger(history(50))
    outcome = await poll(ledger, None)
    assert ledger.calls == [{"address": ADDRESS, "before": None, "until": None, "limit": 1}]
    assert ledger.balance_calls == [("getMultipleAccounts", [ADDRESS])]  # the baseline's read
    assert outcome.alerts == ()
    assert outcome.state["cursor"]["sig"] == history(50)[0].signature
    # Nothing new since: one call with `until`, still quiet.
    again = await poll(ledger, roundtrip(outcome.state))
    assert again.alerts == ()
    assert ledger.calls[-1]["until"] == history(50)[0].signature
    assert len(ledger.balance_calls) == 1  # nothing new: no balance read


async def test_a_burst_of_1500_is_one_notification_with_the_count_and_10_listed() -> None:
    old = history(20)
    state = (await poll(FakeLedger(old), None)).state
    burst = [entry(f"burst-{n}", 5000 + n // 7) for n in reversed(range(1500))]
    burst[3] = entry("failed-one", burst[3].slot, err={"InstructionError": [0, "Custom"]})
    ledger = FakeLedger(burst + old)
    outcome = await poll(ledger, roundtrip(state))
    assert [(c["before"], c["until"]) for c in ledger.calls] == [
        (None, old[0].signature),
        (burst[999].signature, old[0].signature),
    ]
    assert len(outcome.alerts) == 1
    alert = outcome.alerts[0]
    assert alert.facts["count"] == 1500
    assert (
        alert.title
        == f"[WARNING] treasury: 1500 new transactions on {ADDRESS[:4]}…{ADDRESS[-4:]} (1 failed)"
    )
    listed = [line for line in alert.body.splitlines() if line.startswith("- ")]
    assert [line.split()[1] for line in listed] == [e.signature for e in burst[:10]]
    assert "(failed)" in listed[3] and "(failed)" not in listed[2]
    assert alert.body.splitlines()[-1] == "... and 1490 more"
    assert ADDRESS in alert.body and "treasury" in alert.body and "warning" in alert.body
    assert alert.dedup_key == f"treasury|{ADDRESS}|{burst[0].signature}|event"
    assert (alert.reason, alert.subject, alert.channels) == ("event", ADDRESS, ("ops",))
    assert outcome.state["cursor"]["sig"] == burst[0].signature


async def test_a_node_ignoring_until_does_not_make_old_signatures_new() -> None:
    old = history(3000)
    state = (await poll(FakeLedger(old), None)).state
    new = [entry(f"new-{n}", 9000 + n) for n in reversed(range(5))]
    ledger = FakeLedger(new + old, ignores_until=True)
    outcome = await poll(ledger, roundtrip(state))
    assert len(ledger.calls) == 1  # its first page already reached older slots: stop
    assert [alert.facts["count"] for alert in outcome.alerts] == [5]


async def test_a_failed_page_propagates_and_the_caller_keeps_the_cursor() -> None:
    old = history(10)
    state = roundtrip((await poll(FakeLedger(old), None)).state)
    burst = [entry(f"b-{n}", 7000 + n) for n in reversed(range(1200))]
    ledger = FakeLedger(burst + old, fail_on_call=2)
    with pytest.raises(RpcTimeout):
        await SIGNATURES.observe(cast(LedgerReader, ledger), ADDRESS, state)
    # A retry against a healthy node sees the whole burst: nothing was skipped.
    outcome = await poll(FakeLedger(burst + old), state)
    assert outcome.alerts[0].facts["count"] == 1200


async def test_a_node_ignoring_before_fails_the_round_instead_of_looping() -> None:
    old = history(10)
    state = roundtrip((await poll(FakeLedger(old), None)).state)
    burst = [entry(f"b-{n}", 7000 + n) for n in reversed(range(1200))]
    with pytest.raises(BadResponse):
        ledger = FakeLedger(burst + old, ignores_before=True)
        await SIGNATURES.observe(cast(LedgerReader, ledger), ADDRESS, state)


async def test_an_address_without_history_reports_everything_after_its_baseline() -> None:
    state = roundtrip((await poll(FakeLedger([]), None)).state)
    assert state["cursor"]["sig"] is None
    ledger = FakeLedger(history(3))
    outcome = await poll(ledger, state)
    assert ledger.calls[0]["until"] is None
    assert outcome.alerts[0].facts["count"] == 3
    assert outcome.alerts[0].title.startswith("[WARNING] treasury: 3 new transactions on")


async def test_one_notification_per_rule_watching_the_address() -> None:
    audit = rule(
        "new_transactions", name="audit", addresses=[OTHER_ADDRESS, ADDRESS], severity="info"
    )
    elsewhere = rule("new_transactions", name="elsewhere", addresses=[OTHER_ADDRESS])
    whales = rule("holder_changes", name="whales", mints=[MINT])
    rules = [TREASURY, audit, elsewhere, whales]
    assert sorted(RuleSet(rules).targets("signatures")) == sorted([ADDRESS, OTHER_ADDRESS])
    state = roundtrip((await poll(FakeLedger(history(5)), None, rules)).state)
    outcome = await poll(FakeLedger([entry("x", 99_999), *history(5)]), state, rules)
    assert sorted((a.rule, a.severity, a.title.split(":")[0]) for a in outcome.alerts) == [
        ("audit", "info", "[INFO] audit"),
        ("treasury", "warning", "[WARNING] treasury"),
    ]


def test_a_baseline_step_tolerates_an_empty_observation() -> None:
    outcome = SIGNATURES.step([TREASURY], ADDRESS, None, SignaturesObservation((), True), 0.0)
    assert outcome.alerts == () and outcome.state["cursor"]["sig"] is None


# -- holders ---------------------------------------------------------------------------------

HOLDERS = SOURCES["holders"]
WHALES = rule("holder_changes", name="whales", mints=[MINT], min_change_pct=10)


def holders(amounts: dict[str, int], decimals: int = 6) -> HoldersObservation:
    ordered = sorted(amounts.items(), key=lambda item: -item[1])
    return HoldersObservation(
        tuple(
            TokenAmount.model_validate({"address": a, "amount": str(n), "decimals": decimals})
            for a, n in ordered
        )
    )


def real_top() -> HoldersObservation:
    path = FIXTURES / "mainnet_getTokenLargestAccounts_2025-08-22_sava.json"
    value = json.loads(path.read_text())["result"]["value"]
    return HoldersObservation(tuple(TokenAmount.model_validate(item) for item in value))


def test_first_snapshot_is_a_quiet_baseline() -> None:
    outcome = HOLDERS.step([WHALES], MINT, None, real_top(), 0.0)
    assert outcome.alerts == ()
    assert outcome.state["top"]["BGLx2hbcLHk5ajMeLB2SP2zw5ZHqYTCazNJEB9uGcz3q"] == "854699973338"
    assert outcome.state["decimals"] == 8
    assert outcome.state["refs"]["whales"] == outcome.state["top"]


def test_a_whale_moving_is_one_notification_listing_each_change() -> None:
    a, b, c, d, e = (key(f"holder-{n}") for n in range(5))
    before = {a: 5_000_000_000, b: 3_000_000_000, c: 2_000_000_000, d: 1_000_000}
    state = roundtrip(HOLDERS.step([WHALES], MINT, None, holders(before), 0.0).state)
    # b sends most of its balance to a new account e; d leaves the top; c creeps by 5%.
    after = {a: 5_000_000_000, b: 500_000_000, c: 2_100_000_000, e: 2_500_000_000}
    outcome = HOLDERS.step([WHALES], MINT, state, holders(after), 60.0)
    assert len(outcome.alerts) == 1
    alert = worded(outcome, [WHALES])[0]
    assert alert.title == "[WARNING] whales: 3 top-holder changes on EPjF…Dt1v"
    lines = [line for line in alert.body.splitlines() if line.startswith("- ")]
    assert lines == [
        f"- entered the top 20 at rank 2: {e}  2,500",
        f"- left the top 20 (was rank 4): {d}  was 1",
        f"- rank 4: {b}  3,000 -> 500 (-83.33%)",
    ]
    assert MINT in alert.body and "10%" in alert.body
    assert alert.dedup_key.startswith(f"whales|{MINT}|") and alert.dedup_key.endswith("|event")
    # Re-running the same step (after a crash) gives the same key: the outbox drops the copy.
    assert HOLDERS.step([WHALES], MINT, state, holders(after), 61.0).alerts == outcome.alerts
    # c crept 5% and stays quiet; 5% more (10.25% from its reference) is reported.
    later = {**after, c: 2_205_000_000}
    creep = HOLDERS.step([WHALES], MINT, roundtrip(outcome.state), holders(later), 120.0)
    creep_body = worded(creep, [WHALES])[0].body
    assert [line for line in creep_body.splitlines() if line.startswith("- ")] == [
        f"- rank 3: {c}  2,000 -> 2,205 (+10.25%)"
    ]


def test_a_rule_new_to_a_mint_baselines_silently() -> None:
    a, b = key("h-a"), key("h-b")
    state = roundtrip(HOLDERS.step([WHALES], MINT, None, holders({a: 100, b: 50}), 0.0).state)
    newcomer = rule("holder_changes", name="newcomer", mints=[MINT], severity="critical")
    outcome = HOLDERS.step([WHALES, newcomer], MINT, state, holders({a: 200, b: 50}), 1.0)
    assert [alert.rule for alert in outcome.alerts] == ["whales"]
    assert outcome.state["refs"]["newcomer"] == {a: "200", b: "50"}


def test_an_unchanged_snapshot_is_quiet() -> None:
    state = roundtrip(HOLDERS.step([WHALES], MINT, None, real_top(), 0.0).state)
    assert HOLDERS.step([WHALES], MINT, state, real_top(), 60.0).alerts == ()


# -- votes -----------------------------------------------------------------------------------

VOTES = SOURCES["votes"]
VOTE, NODE = key("vote-1"), key("node-1")
OTHER_VOTE, OTHER_NODE = key("vote-2"), key("node-2")


def vote_accounts(*, delinquent: bool, present: bool = True) -> VoteAccounts:
    mine = VoteAccount.model_validate(
        {
            "votePubkey": VOTE,
            "nodePubkey": NODE,
            "activatedStake": 1_500_000_000_000,
            "lastVote": 1000 if delinquent else 5000,
        }
    )
    other = VoteAccount.model_validate(
        {"votePubkey": OTHER_VOTE, "nodePubkey": OTHER_NODE, "activatedStake": 1, "lastVote": 5001}
    )
    current = [other] if delinquent or not present else [other, mine]
    return VoteAccounts(current=current, delinquent=[mine] if delinquent and present else [])


MY_VALIDATOR = rule(
    "delinquent_validators",
    name="my-validator",
    validators=[VOTE],
    severity="critical",
    notify=["oncall"],
)


def run_votes(
    observations: Sequence[tuple[float, VoteAccounts]], rules: Sequence[RuleBase] = (MY_VALIDATOR,)
) -> list[list[AlertMessage]]:
    state: TargetState | None = None
    said = []
    for now, observation in observations:
        outcome = VOTES.step(rules, "cluster", state, observation, now)
        state = roundtrip(outcome.state)
        said.append(list(worded(outcome, rules)))
    return said


def test_delinquency_fires_once_and_resolves_once() -> None:
    said = run_votes(
        [
            (0, vote_accounts(delinquent=False)),
            (30, vote_accounts(delinquent=True)),
            (60, vote_accounts(delinquent=True)),
            (330, vote_accounts(delinquent=False)),
            (360, vote_accounts(delinquent=False)),
        ]
    )
    assert [[a.reason for a in step] for step in said] == [[], ["firing"], [], ["resolved"], []]
    firing, resolved = said[1][0], said[3][0]
    assert firing.title == f"[CRITICAL] my-validator: validator {VOTE[:4]}…{VOTE[-4:]} delinquent"
    assert f"Vote account: {VOTE}" in firing.body and f"Identity: {NODE}" in firing.body
    assert "Activated stake: 1,500 SOL" in firing.body
    assert "4001 slots behind" in firing.body
    assert firing.dedup_key == f"my-validator|{VOTE}|1|firing"
    assert firing.channels == ("oncall",)
    assert resolved.dedup_key == f"my-validator|{VOTE}|1|resolved"
    assert (
        resolved.title
        == f"[RESOLVED] my-validator: validator {VOTE[:4]}…{VOTE[-4:]} is voting again (current)"
    )
    assert "after 5m delinquent" in resolved.body


def test_already_delinquent_at_start_up_fires_and_missing_fires_too() -> None:
    by_identity = rule("delinquent_validators", name="ids", validators=[NODE, key("never-seen")])
    said = run_votes([(0, vote_accounts(delinquent=True))], [by_identity])
    assert sorted(a.title for a in said[0]) == sorted(
        [
            f"[WARNING] ids: validator {NODE[:4]}…{NODE[-4:]} delinquent",
            f"[WARNING] ids: validator {key('never-seen')[:4]}…{key('never-seen')[-4:]} missing",
        ]
    )
    missing = next(a for a in said[0] if a.subject == key("never-seen"))
    assert "neither the current nor the delinquent" in missing.body


def test_repeat_and_keep_firing_for_on_votes() -> None:
    patient = rule(
        "delinquent_validators",
        name="patient",
        validators=[VOTE],
        repeat="1h",
        keep_firing_for="2m",
        **{"for": "1m"},
    )
    said = run_votes(
        [
            (0, vote_accounts(delinquent=True)),
            (30, vote_accounts(delinquent=True)),
            (60, vote_accounts(delinquent=True)),  # held for 1m: fires
            (90, vote_accounts(delinquent=False)),  # flap inside keep_firing_for
            (120, vote_accounts(delinquent=True)),
            (3660, vote_accounts(delinquent=True)),  # an hour after firing: reminder
            (3690, vote_accounts(delinquent=False)),
            (3810, vote_accounts(delinquent=False)),  # 2m after it stopped: resolved
        ],
        [patient],
    )
    assert [[a.reason for a in step] for step in said] == [
        [],
        [],
        ["firing"],
        [],
        [],
        ["repeat"],
        [],
        ["resolved"],
    ]
    # Durations count from the onset (first seen at 0, pending for 1m), not from firing (60).
    reminder = said[5][0]
    assert reminder.title.endswith("still delinquent (1h 1m)")
    assert (
        "Still delinquent: for 1h 1m, since 1970-01-01T00:00:00Z "
        "(firing since 1970-01-01T00:01:00Z)."
    ) in reminder.body
    assert reminder.dedup_key == f"patient|{VOTE}|1|repeat-1"
    assert "after 1h 3m 30s delinquent" in said[7][0].body


def test_a_restart_does_not_announce_a_firing_episode_again() -> None:
    state = VOTES.step([MY_VALIDATOR], "cluster", None, vote_accounts(delinquent=True), 0).state
    restarted = roundtrip(state)
    assert (
        VOTES.step([MY_VALIDATOR], "cluster", restarted, vote_accounts(delinquent=True), 600).alerts
        == ()
    )


# -- nodes -----------------------------------------------------------------------------------

NODES = SOURCES["nodes"]
DRIFT = rule("version_drift", name="drift", validators=[BEHIND[1], ON_REFERENCE[0]], notify=["ops"])


def cluster_with(version_of: dict[str, str | None]) -> ClusterObservation:
    nodes, vote_accounts = load_mainnet()
    changed = [
        replace_version(node, version_of[node.pubkey]) if node.pubkey in version_of else node
        for node in nodes
    ]
    return ClusterObservation(tuple(changed), vote_accounts)


def replace_version(node: ClusterNode, version: str | None) -> ClusterNode:
    return node.model_copy(update={"version": version})


async def test_nodes_observe_reads_gossip_and_vote_accounts() -> None:
    observation = await NODES.observe(cast(LedgerReader, FakeLedger([])), "cluster", None)
    assert len(observation.nodes) == 6455 and len(observation.vote_accounts.current) == 1040
    assert RuleSet([DRIFT]).targets("nodes") == ["cluster"]
    assert RuleSet([TREASURY]).targets("nodes") == []


def test_version_drift_fires_names_both_versions_and_resolves_on_catching_up() -> None:
    state: TargetState | None = None
    said = []
    for now, observation in [
        (0, cluster_with({})),
        (300, cluster_with({BEHIND[0]: None})),  # version unknown: no evidence either way
        (600, cluster_with({BEHIND[0]: "2.3.6"})),
    ]:
        outcome = NODES.step([DRIFT], "cluster", state, observation, now)
        state = roundtrip(outcome.state)
        said.append(list(worded(outcome, [DRIFT])))
    assert [[a.reason for a in step] for step in said] == [["firing"], [], ["resolved"]]
    firing = said[0][0]
    short = f"{BEHIND[1][:4]}…{BEHIND[1][-4:]}"
    assert firing.title == f"[WARNING] drift: node {short} behind: agave 2.3.5 < 2.3.6"
    assert f"Node: {BEHIND[0]}" in firing.body and f"Vote account: {BEHIND[1]}" in firing.body
    assert "2.3.5" in firing.body and "2.3.6" in firing.body
    resolved = said[2][0]
    assert resolved.title == f"[RESOLVED] drift: node {short} back in line (agave 2.3.6)"
    assert "Resolved after 10m" in resolved.body and "2.3.5" in resolved.body
    assert resolved.dedup_key == f"drift|{BEHIND[1]}|1|resolved"


def test_a_watched_node_missing_from_gossip_fires() -> None:
    caught_up = cluster_with({BEHIND[0]: "2.3.6"})
    state = roundtrip(NODES.step([DRIFT], "cluster", None, caught_up, 0).state)
    gone = tuple(node for node in caught_up.nodes if node.pubkey != ON_REFERENCE[0])
    outcome = NODES.step(
        [DRIFT], "cluster", state, ClusterObservation(gone, caught_up.vote_accounts), 300
    )
    short = f"{ON_REFERENCE[0][:4]}…{ON_REFERENCE[0][-4:]}"
    alerts = worded(outcome, [DRIFT])
    assert [a.title for a in alerts] == [f"[WARNING] drift: node {short} missing from gossip"]
    assert "Missing from gossip (getClusterNodes)." in alerts[0].body


def test_registry() -> None:
    assert set(SOURCES) == {
        "signatures",
        "holders",
        "votes",
        "nodes",
        "accounts",
        "supply",
        "token_accounts",
        "assets",
        "programs",
        "asset",
        "fees",
        "editions",
        "vat",
        "nonces",
        "mint_powers",
        "program_powers",
        "multisig_powers",
    }
    for name, source in SOURCES.items():
        assert source.name == name
    assert source_of("version_drift") is NODES
    assert RuleSet([MY_VALIDATOR]).targets("votes") == ["cluster"]
    assert RuleSet([WHALES, TREASURY]).targets("holders") == [MINT]


WATCHES = {"new_transactions": "addresses", "holder_changes": "mints"}
WATCHES |= {"delinquent_validators": "validators", "version_drift": "validators"}
WATCHED = {"new_transactions": ADDRESS, "holder_changes": MINT}
WATCHED |= {"delinquent_validators": VOTE, "version_drift": NODE}
WATCHES |= {"vote_lag": "validators"}
WATCHED |= {"vote_lag": VOTE}
WATCHES |= {"balance_below": "accounts", "supply_changed": "mints"}
WATCHED |= {"balance_below": ADDRESS, "supply_changed": MINT}
REQUIRED: dict[str, dict[str, Any]] = {"balance_below": {"min_sol": 1}}
REQUIRED |= {"token_accounts": {"owners": [ADDRESS]}, "new_assets": {"collection": MINT}}
REQUIRED |= {"program_accounts": {"program": ADDRESS}, "asset_changed": {"assets": [MINT]}}
WATCHES |= {kind: "validators" for kind in ("vote_lag", "credits_low", "stake_changed")}
WATCHES |= {"commission_changed": "validators"}
WATCHED |= {kind: VOTE for kind in ("vote_lag", "credits_low", "stake_changed")}
WATCHED |= {"commission_changed": VOTE}
REQUIRED |= {"fee_above": {"message": "AQAA", "max_lamports": 1}}
WATCHES |= {"account_changed": "accounts"}
WATCHED |= {"account_changed": ADDRESS}
REQUIRED |= {"new_editions": {"mints": [MINT]}}
WATCHES |= {"vat_eligibility": "validators"}
WATCHED |= {"vat_eligibility": VOTE}
WATCHES |= {"nonce_accounts": "authorities", "token_authorities": "mints"}
WATCHES |= {"upgrade_authority": "programs", "multisig_changed": "multisigs"}
WATCHED |= dict.fromkeys(("nonce_accounts", "upgrade_authority", "multisig_changed"), ADDRESS)
WATCHED |= {"token_authorities": MINT}


def test_each_kind_is_one_registry_line_holding_all_of_it() -> None:
    for name, kind in KINDS.items():  # one module per kind, named after it
        assert importlib.import_module(f"watcher.kinds.{name}").KIND is kind
    union: TypeAdapter[RuleBase] = TypeAdapter(AnyRule)
    for name, kind in KINDS.items():
        assert RULE_MODELS[name] is kind.model and kind.model.kind_name() == name
        assert source_of(name) is SOURCES[kind.source.name]
        assert name in source_of(name).rule_kinds
        # A shared source is composed when the registry is built; one of its own is kept.
        assert (source_of(name) is kind.source) == (kind.part is None)
        assert wording_of(name) is kind.wording and digest_words(name) is kind.digest
        fields: dict[str, Any] = {"name": "r", "kind": name}
        fields |= {WATCHES[name]: [WATCHED[name]]} if name in WATCHES else {}  # not cluster-wide
        fields |= REQUIRED.get(name, {})
        assert type(union.validate_python(fields)) is kind.model
    # Event kinds count their digests in their own words; state kinds are never digested.
    assert [name for name, kind in KINDS.items() if kind.digest] == [
        name for name, kind in KINDS.items() if issubclass(kind.model, EventRule)
    ]


def test_two_kinds_riding_one_source_poll_it_once() -> None:
    riding = Kind(model=DelinquentValidatorsRule, source=NODES, wording=lambda f, s: ("t", "b"))
    kinds = [KINDS["version_drift"], riding, KINDS["delinquent_validators"]]
    sources = sources_of(kinds)
    assert list(sources) == ["nodes", "votes"] and sources["nodes"] is NODES
    assert sources["votes"].rule_kinds == ("delinquent_validators",)  # composed of its part
    impostor = Kind(model=VersionDriftRule, source=VotesSource(), wording=riding.wording)
    with pytest.raises(ValueError, match="two sources are named 'votes'"):
        sources_of([KINDS["delinquent_validators"], impostor])


def test_shared_sources_are_composed_from_the_registry_not_by_imports() -> None:
    """Importing a kind's module serves nothing: the source a kind names holds no part, and
    the registry composes the one polled from the parts of the kinds riding it, in order."""
    assert votes.SOURCE.rule_kinds == () and accounts.SOURCE.rule_kinds == ()
    riders = [name for name, kind in KINDS.items() if kind.source is votes.SOURCE]
    assert SOURCES["votes"].rule_kinds == tuple(riders)
    assert "stake_changed" in riders and SOURCES["accounts"].rule_kinds == (
        "balance_below",
        "account_changed",
    )
    lone = Kind(
        model=VersionDriftRule,
        source=NODES,
        wording=lambda f, s: ("t", "b"),
        part=lambda rules, target, state, observation, now: StepOutcome({}),
    )
    with pytest.raises(ValueError, match="a source that takes none"):
        sources_of([lone])


def test_state_layouts_are_versioned() -> None:
    states = [
        VOTES.step([MY_VALIDATOR], "cluster", None, vote_accounts(delinquent=False), 0).state,
        NODES.step([DRIFT], "cluster", None, cluster_with({}), 0).state,
        HOLDERS.step([WHALES], MINT, None, real_top(), 0).state,
        SIGNATURES.step([TREASURY], ADDRESS, None, SignaturesObservation(((),), True), 0).state,
    ]
    assert [state["v"] for state in states] == [1, 1, 1, 1]
