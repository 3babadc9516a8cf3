"""Kind ``version_drift``: version drift of watched nodes (source ``nodes``).

One target, ``"cluster"``: one getClusterNodes + getVoteAccounts pair serves every rule.
State: ``{"v": 1, "episodes": {rule: {subject: Episode}}}`` (``watcher.alerting.lifecycle``), with
the counts of the last accepted answers (``"nodes"``, ``"accounts"``, ``"current"``).

Doubts (``watcher.ledger.plausibility``): no node in gossip, no vote account, or none current, where
the last accepted answers had some, is taken once seen three polls in a row.

Versions and feature sets of gossip nodes are weighed by stake in ``watcher.kinds.toolkit.versions``
(pure: versions, client families, the stake's references, where a node stands).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from watcher.alerting import formatting, messages
from watcher.alerting.lifecycle import Assessment, step_episodes
from watcher.config import rule_models
from watcher.config.rule_models import PositiveDuration, Pubkeys
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.sources import vote_accounts
from watcher.kinds.toolkit.alert_samples import episode_samples, sample_key
from watcher.kinds.toolkit.cluster import (
    CLUSTER,
    newest_vote,
    vote_account_counts,
    vote_accounts_doubt,
)
from watcher.kinds.toolkit.metric_values import Sample, unique, validators_watched
from watcher.kinds.toolkit.versions import NodeAssessment, assess_node, index_cluster
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


def node_samples(
    rules: Sequence[Any], target: str, observation: ClusterObservation
) -> tuple[Sample, ...]:
    """Source ``nodes``: each watched node's version, and whether it is behind (or missing).
    A version that cannot be read is no evidence either way: no ``behind`` sample."""
    watched = validators_watched(rules)
    if not watched:
        return ()
    cluster = index_cluster(observation.nodes, observation.vote_accounts)
    samples: list[Sample] = []
    for pubkey in watched:
        node = assess_node(pubkey, cluster)
        if node.version is not None:
            info = (node.node_pubkey, node.version)
            samples.append(Sample("solana_node_version_info", info, 1, pubkey))
        if node.status != "unknown":
            behind = 1 if node.status in ("behind", "missing") else 0
            samples.append(
                Sample("solana_node_version_behind", (node.node_pubkey,), behind, pubkey)
            )
    return unique(samples)


class NodesSource:
    metric_values = staticmethod(node_samples)  # what /metrics shows of an answer
    name = "nodes"
    facts = base.SourceFacts(("getClusterNodes", "getVoteAccounts"), per_tick=("getVoteAccounts",))
    rule_kinds: tuple[str, ...] = ("version_drift",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> ClusterObservation:
        nodes, votes = await asyncio.gather(ledger.get_cluster_nodes(), vote_accounts.read(ledger))
        return ClusterObservation(tuple(nodes), votes)

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

        def assess(rule: VersionDriftRule) -> Mapping[str, Assessment]:
            watched = rule.validators
            return {pubkey: _assessment(assess_node(pubkey, cluster)) for pubkey in watched}

        outcome = step_episodes(base.rules_of(rules, VersionDriftRule), state, now, assess)
        counts = {"nodes": len(observation.nodes), **vote_account_counts(observation.vote_accounts)}
        return StepOutcome({**outcome.state, **counts}, outcome.alerts)


def _assessment(node: NodeAssessment) -> Assessment:
    facts = asdict(node)
    facts["vote_pubkeys"] = list(node.vote_pubkeys)
    return node.drifting, facts


SOURCE = NodesSource()


# -- wording ---------------------------------------------------------------------------------


def drift_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    reason = facts["reason"]
    node: str = facts.get("node_pubkey") or facts["subject"]
    vote_pubkeys: Sequence[str] = facts.get("vote_pubkeys") or ()
    who = shown.short(facts["subject"], node, *vote_pubkeys)
    head = messages.rule_head(facts)
    short, problem = _drift_words(facts)
    if reason == "resolved":
        title = f"{head} node {who} back in line ({_version_of(facts)})"
        _, was = _drift_words(facts.get("was", {}))
        summary = f"Resolved after {facts['duration']}. Was: {was} Now: {_version_of(facts)}."
    elif reason == "repeat":
        title = f"{head} node {who} still {short} ({facts['duration']})"
        summary = f"Still drifting, for {facts['duration']}. {problem}"
    else:
        title = f"{head} node {who} {short}"
        summary = problem
    votes_named = ", ".join(shown.name(vote) for vote in vote_pubkeys)
    body = formatting.lines(
        messages.rule_line(facts),
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
        f"Activated stake: {formatting.sol(facts.get('stake'))}",
    )
    return title, body


def _version_of(facts: messages.Facts) -> str:
    return f"{facts.get('client') or 'unknown client'} {facts.get('version') or 'unknown'}"


def _drift_words(facts: messages.Facts) -> tuple[str, str]:
    """The drift in a title's few words, and in the summary's sentence."""
    status, client, version = facts.get("status"), facts.get("client"), facts.get("version")
    if status == "missing":
        return "missing from gossip", "Missing from gossip (getClusterNodes)."
    if status == "feature_set":
        ours, majority = facts.get("feature_set"), facts.get("reference_feature_set")
        return (
            f"on feature set {ours}, majority on {majority}",
            f"Feature set {ours} differs from {majority}, the one holding the most stake.",
        )
    reference = facts.get("reference_version")
    short = f"behind: {client} {version} < {reference}"
    if status != "behind":
        return short, "Drifting."
    return short, (
        f"Runs {client} {version}, behind {reference}, the {client} version holding the most stake."
    )


def _reference_line(facts: messages.Facts) -> str | None:
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


KIND = base.Kind(model=VersionDriftRule, source=SOURCE, wording=drift_text, samples=samples)
