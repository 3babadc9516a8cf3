"""Source ``nodes``: version drift of watched nodes (rule kind ``version_drift``).

One target, ``"cluster"``: one getClusterNodes + getVoteAccounts pair serves every rule.
State: ``{"v": 1, "episodes": {rule: {subject: Episode}}}`` (``watcher.alerting.lifecycle``), with
the
counts of the last accepted answers (``"nodes"``, ``"accounts"``, ``"current"``).

Doubts (``watcher.ledger.plausibility``): no node in gossip, no vote account, or none current, where
the last accepted answers had some, is taken once seen three polls in a row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, cast

from watcher.alerting.events import StepOutcome, TargetState
from watcher.alerting.lifecycle import Assessment, StateRule, step_episodes
from watcher.alerting.messages import drift_text
from watcher.kinds.base import LedgerReader
from watcher.kinds.versions import NodeAssessment, assess_node, index_cluster
from watcher.kinds.votes import newest_vote, vote_account_counts, vote_accounts_doubt
from watcher.ledger.models import ClusterNode, VoteAccounts
from watcher.ledger.plausibility import Doubt, SlotTip, picture_of

CLUSTER = "cluster"


class DriftRule(StateRule, Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def validators(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class ClusterObservation:
    nodes: tuple[ClusterNode, ...]
    vote_accounts: VoteAccounts


class NodesSource:
    name = "nodes"
    rule_kinds: tuple[str, ...] = ("version_drift",)

    def targets(self, rules: Sequence[Any]) -> list[str]:
        # No rule of this kind: nothing to poll (getClusterNodes weighs megabytes).
        return [CLUSTER] if self._rules(rules) else []

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

        def assess(rule: StateRule) -> Mapping[str, Assessment]:
            watched = cast(DriftRule, rule).validators
            return {pubkey: _assessment(assess_node(pubkey, cluster)) for pubkey in watched}

        outcome = step_episodes(self._rules(rules), state, now, assess, drift_text)
        counts = {"nodes": len(observation.nodes), **vote_account_counts(observation.vote_accounts)}
        return StepOutcome({**outcome.state, **counts}, outcome.alerts)

    def _rules(self, rules: Sequence[Any]) -> list[DriftRule]:
        return [cast(DriftRule, rule) for rule in rules if rule.kind in self.rule_kinds]


def _assessment(node: NodeAssessment) -> Assessment:
    facts = asdict(node)
    facts["vote_pubkeys"] = list(node.vote_pubkeys)
    return node.drifting, facts


SOURCE = NodesSource()
