"""Kind ``version_drift``: version drift of watched nodes (source ``nodes``).

One target, ``"cluster"``: one getClusterNodes + getVoteAccounts pair serves every rule.
State: ``{"v": 1, "episodes": {rule: {subject: Episode}}}`` (``watcher.alerting.lifecycle``), with
the
counts of the last accepted answers (``"nodes"``, ``"accounts"``, ``"current"``).

Doubts (``watcher.ledger.plausibility``): no node in gossip, no vote account, or none current, where
the last accepted answers had some, is taken once seen three polls in a row.

Versions and feature sets of gossip nodes are weighed by stake (pure).

Frankendancer reports ``0.703.20300`` while running the Agave 2.3 feature set: versions of
different clients never compare; feature sets compare across all clients.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, cast

from watcher.alerting.lifecycle import Assessment, StateRuleView, step_episodes
from watcher.alerting.messages import PLAIN, Facts, Presentation, lines, rule_head, rule_line, sol
from watcher.config import rule_models
from watcher.config.rule_models import PositiveDuration, Pubkeys
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds.base import Kind, LedgerReader
from watcher.kinds.cluster import CLUSTER, newest_vote, vote_account_counts, vote_accounts_doubt
from watcher.kinds.samples import episode_samples, sample_key
from watcher.ledger.models import ClusterNode, VoteAccount, VoteAccounts
from watcher.ledger.plausibility import Doubt, SlotTip, picture_of


class VersionDriftRule(rule_models.StateRule):
    kind: Literal["version_drift"] = "version_drift"
    validators: Pubkeys  # identity or vote account pubkeys
    every: PositiveDuration = 300.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.validators


@dataclass(frozen=True)
class ClusterObservation:
    nodes: tuple[ClusterNode, ...]
    vote_accounts: VoteAccounts


class NodesSource:
    name = "nodes"
    rule_kinds: tuple[str, ...] = ("version_drift",)

    async def observe(
        self, ledger: LedgerReader, target: str, state: TargetState | None
    ) -> ClusterObservation:
        nodes, vote_accounts = await asyncio.gather(
            ledger.get_cluster_nodes(), ledger.get_vote_accounts()
        )
        return ClusterObservation(tuple(nodes), vote_accounts)

    def tip(self, observation: ClusterObservation) -> int | None:
        return newest_vote(observation.vote_accounts)

    def doubt(
        self,
        state: TargetState | None,
        observation: ClusterObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        before = (state or {}).get("nodes") or 0
        if before and not observation.nodes:
            picture = picture_of("no nodes", vote_account_counts(observation.vote_accounts))
            return Doubt(f"no node in gossip, where the last answer had {before}", picture)
        return vote_accounts_doubt(state, observation.vote_accounts)

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: ClusterObservation,
        now: float,
    ) -> StepOutcome:
        cluster = index_cluster(observation.nodes, observation.vote_accounts)

        def assess(rule: StateRuleView) -> Mapping[str, Assessment]:
            watched = cast(VersionDriftRule, rule).validators
            return {pubkey: _assessment(assess_node(pubkey, cluster)) for pubkey in watched}

        outcome = step_episodes(self._rules(rules), state, now, assess)
        counts = {"nodes": len(observation.nodes), **vote_account_counts(observation.vote_accounts)}
        return StepOutcome({**outcome.state, **counts}, outcome.alerts)

    def _rules(self, rules: Sequence[Any]) -> list[VersionDriftRule]:
        return [cast(VersionDriftRule, rule) for rule in rules if rule.kind in self.rule_kinds]


def _assessment(node: NodeAssessment) -> Assessment:
    facts = asdict(node)
    facts["vote_pubkeys"] = list(node.vote_pubkeys)
    return node.drifting, facts


SOURCE = NodesSource()


# -- versions (pure) -------------------------------------------------------------------------

Version = tuple[int, ...]
Drift = Literal["ok", "behind", "feature_set", "missing", "unknown"]

AGAVE = "agave"
FRANKENDANCER = "frankendancer"

_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)")
# Real versions are short (``0.703.20300``, ``3.0.0-rc.1``): a longer string is unreadable.
MAX_VERSION_LENGTH = 64


@functools.lru_cache(maxsize=4096)
def parse_version(text: str | None) -> Version | None:
    """``"2.3.6"`` -> ``(2, 3, 6)``; a suffix (``-rc.1``) is ignored; None when unreadable.
    Cached: 6,455 nodes a poll share a few dozen version strings."""
    if not text or len(text) > MAX_VERSION_LENGTH:
        return None
    match = _VERSION.match(text.strip())
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def client_of(version: Version) -> str:
    """The client family whose versions compare with each other. The one place that knows how
    to tell them apart: Frankendancer numbers its releases 0.x, Agave (and its forks, such as
    Jito, which share its numbering) 1.x and up. (``clientId`` from gossip is not used: the
    numbering of its values is not part of the service's documented interface.)"""
    return FRANKENDANCER if version[0] == 0 else AGAVE


def node_stakes(vote_accounts: VoteAccounts) -> dict[str, int]:
    """Identity pubkey -> activated stake of its vote accounts, current and delinquent."""
    stakes: dict[str, int] = defaultdict(int)
    for account in (*vote_accounts.current, *vote_accounts.delinquent):
        stakes[account.node_pubkey] += account.activated_stake
    return dict(stakes)


def _pct(part: int, whole: int) -> float | None:
    return round(part * 100 / whole, 1) if whole else None


@dataclass(frozen=True)
class Reference:
    """The version of one client holding the most stake among that client's nodes."""

    version: str
    parsed: Version
    stake_pct: float | None  # share of that client's stake


@dataclass(frozen=True)
class ClusterIndex:
    """One observation of the cluster, indexed once and shared by every rule."""

    nodes: Mapping[str, ClusterNode]  # identity pubkey -> gossip entry
    vote_to_node: Mapping[str, str]
    votes_of_node: Mapping[str, tuple[str, ...]]
    stakes: Mapping[str, int]  # identity pubkey -> activated stake
    references: Mapping[str, Reference]  # client -> reference version
    reference_feature_set: int | None
    reference_feature_set_stake_pct: float | None  # share of all stake in gossip


def index_cluster(nodes: Iterable[ClusterNode], vote_accounts: VoteAccounts) -> ClusterIndex:
    by_pubkey = {node.pubkey: node for node in nodes}
    stakes = node_stakes(vote_accounts)
    vote_to_node: dict[str, str] = {}
    votes_of_node: dict[str, list[str]] = defaultdict(list)
    for account in (*vote_accounts.current, *vote_accounts.delinquent):
        vote_to_node[account.vote_pubkey] = account.node_pubkey
        votes_of_node[account.node_pubkey].append(account.vote_pubkey)

    # client -> version -> [stake, node count, first spelling seen]
    by_version: dict[str, dict[Version, list[int]]] = defaultdict(dict)
    spelling: dict[Version, str] = {}
    by_feature_set: dict[int, int] = defaultdict(int)
    for node in by_pubkey.values():
        stake = stakes.get(node.pubkey, 0)
        if node.feature_set is not None:
            by_feature_set[node.feature_set] += stake
        parsed = parse_version(node.version)
        if parsed is None or node.version is None:
            continue
        tally = by_version[client_of(parsed)].setdefault(parsed, [0, 0])
        tally[0] += stake
        tally[1] += 1
        spelling.setdefault(parsed, node.version)

    references: dict[str, Reference] = {}
    for client, tallies in by_version.items():
        # Most stake; with no stake at all (a test cluster), most nodes; then the newest.
        best = max(tallies, key=lambda version: (*tallies[version], version))
        client_stake = sum(stake for stake, _ in tallies.values())
        pct = _pct(tallies[best][0], client_stake)
        references[client] = Reference(spelling[best], best, pct)

    feature_set = max(by_feature_set, key=lambda fs: (by_feature_set[fs], fs), default=None)
    all_stake = sum(by_feature_set.values())
    return ClusterIndex(
        nodes=by_pubkey,
        vote_to_node=vote_to_node,
        votes_of_node={node: tuple(votes) for node, votes in votes_of_node.items()},
        stakes=stakes,
        references=references,
        reference_feature_set=feature_set,
        reference_feature_set_stake_pct=(
            None if feature_set is None else _pct(by_feature_set[feature_set], all_stake)
        ),
    )


@dataclass(frozen=True)
class NodeAssessment:
    watched: str  # as the rule names it: identity or vote pubkey
    status: Drift
    node_pubkey: str
    vote_pubkeys: tuple[str, ...] = ()
    version: str | None = None
    client: str | None = None
    reference_version: str | None = None
    reference_stake_pct: float | None = None
    feature_set: int | None = None
    reference_feature_set: int | None = None
    reference_feature_set_stake_pct: float | None = None
    stake: int = 0

    @property
    def drifting(self) -> bool | None:
        """The condition of a version_drift episode; None (unknown) is no evidence either way."""
        return None if self.status == "unknown" else self.status != "ok"


def assess_node(watched: str, cluster: ClusterIndex) -> NodeAssessment:
    # A vote pubkey maps to its identity; an unknown pubkey is taken as an identity.
    node_pubkey = cluster.vote_to_node.get(watched, watched)
    if watched in cluster.nodes:
        node_pubkey = watched
    missing = NodeAssessment(
        watched=watched,
        status="missing",
        node_pubkey=node_pubkey,
        vote_pubkeys=cluster.votes_of_node.get(node_pubkey, ()),
        stake=cluster.stakes.get(node_pubkey, 0),
        reference_feature_set=cluster.reference_feature_set,
        reference_feature_set_stake_pct=cluster.reference_feature_set_stake_pct,
    )
    node = cluster.nodes.get(node_pubkey)
    if node is None:
        return missing
    seen = replace(missing, version=node.version, feature_set=node.feature_set)
    parsed = parse_version(node.version)
    if parsed is None:
        return replace(seen, status="unknown")
    client = client_of(parsed)
    reference = cluster.references[client]  # the node itself counts: its client has one
    status: Drift = "ok"
    if parsed < reference.parsed:
        status = "behind"
    elif (
        node.feature_set is not None
        and cluster.reference_feature_set is not None
        and node.feature_set != cluster.reference_feature_set
        and parsed <= reference.parsed
    ):
        # On its client's reference version (or, for another client, on a release built for
        # another feature set) yet apart from the stake majority: drift. A node *ahead* of its
        # client's reference is upgrading early and the cluster will follow it: not drift.
        status = "feature_set"
    return replace(
        seen,
        status=status,
        client=client,
        reference_version=reference.version,
        reference_stake_pct=reference.stake_pct,
    )


# -- wording ---------------------------------------------------------------------------------


def drift_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    reason = facts["reason"]
    node: str = facts.get("node_pubkey") or facts["subject"]
    vote_pubkeys: Sequence[str] = facts.get("vote_pubkeys") or ()
    who = shown.short(facts["subject"], node, *vote_pubkeys)
    if reason == "resolved":
        title = f"{rule_head(facts)} node {who} back in line ({_version_of(facts)})"
        was = _drift_problem(facts.get("was", {}))
        summary = f"Resolved after {facts['duration']}. Was: {was} Now: {_version_of(facts)}."
    elif reason == "repeat":
        title = f"{rule_head(facts)} node {who} still {_drift_short(facts)} ({facts['duration']})"
        summary = f"Still drifting, for {facts['duration']}. {_drift_problem(facts)}"
    else:
        title = f"{rule_head(facts)} node {who} {_drift_short(facts)}"
        summary = _drift_problem(facts)
    votes_named = ", ".join(shown.name(vote) for vote in vote_pubkeys)
    body = lines(
        rule_line(facts),
        f"Node: {shown.name(node)}",
        shown.link("address", node),
        summary,
        f"Vote account: {votes_named or 'unknown'}",
        *(shown.link("address", vote) for vote in vote_pubkeys),
        f"Version: {facts.get('version') or 'unknown'} (client {facts.get('client') or 'unknown'})",
        _reference_line(facts),
        f"Feature set: {facts.get('feature_set') or 'unknown'}; stake majority: "
        f"{facts.get('reference_feature_set') or 'unknown'}"
        f" ({facts.get('reference_feature_set_stake_pct', '?')}% of stake)",
        f"Activated stake: {sol(facts.get('stake'))}",
    )
    return title, body


def _version_of(facts: Facts) -> str:
    return f"{facts.get('client') or 'unknown client'} {facts.get('version') or 'unknown'}"


def _drift_short(facts: Facts) -> str:
    status = facts.get("status")
    if status == "missing":
        return "missing from gossip"
    if status == "feature_set":
        return (
            f"on feature set {facts.get('feature_set')}, "
            f"majority on {facts.get('reference_feature_set')}"
        )
    return (
        f"behind: {facts.get('client')} {facts.get('version')} < {facts.get('reference_version')}"
    )


def _drift_problem(facts: Facts) -> str:
    status = facts.get("status")
    if status == "missing":
        return "Missing from gossip (getClusterNodes)."
    if status == "feature_set":
        return (
            f"Feature set {facts.get('feature_set')} differs from "
            f"{facts.get('reference_feature_set')}, the one holding the most stake."
        )
    if status == "behind":
        return (
            f"Runs {facts.get('client')} {facts.get('version')}, behind "
            f"{facts.get('reference_version')}, the {facts.get('client')} version holding the "
            f"most stake."
        )
    return "Drifting."


def _reference_line(facts: Facts) -> str | None:
    if not facts.get("reference_version"):
        return None
    return (
        f"Reference {facts.get('client')} version: {facts['reference_version']} "
        f"({facts.get('reference_stake_pct', '?')}% of that client's stake)"
    )


def samples(rule: VersionDriftRule) -> list[AlertMessage]:
    """The node of the rule's first validator falls a version behind, then upgrades."""
    vote = rule.validators[0]
    node, big, feature_set = sample_key("node of " + vote), sample_key("big"), 3640012085
    accounts = VoteAccounts(
        current=[
            VoteAccount(
                vote_pubkey=sample_key("big vote"),
                node_pubkey=big,
                activated_stake=10**16,
                last_vote=5001,
            ),
            VoteAccount(vote_pubkey=vote, node_pubkey=node, activated_stake=10**15, last_vote=5000),
        ],
        delinquent=[],
    )

    def answer(bad: bool) -> ClusterObservation:
        nodes = (
            ClusterNode(pubkey=big, version="2.3.6", feature_set=feature_set),
            ClusterNode(pubkey=node, version="2.3.5" if bad else "2.3.6", feature_set=feature_set),
        )
        return ClusterObservation(nodes, accounts)

    return episode_samples(
        rule, lambda state, bad, now: SOURCE.step([rule], CLUSTER, state, answer(bad), now)
    )


KIND = Kind(model=VersionDriftRule, source=SOURCE, wording=drift_text, samples=samples)
