"""Versions of the cluster's nodes (pure): version strings read as numbers, the client family
each belongs to, and, from one answer of getClusterNodes and getVoteAccounts, the version of each
client and the feature set holding the most stake, and where a node stands against them
(``assess_node``). The kind ``version_drift`` (``watcher.kinds.version_drift``) fires on it, and the
``nodes`` source's samples on /metrics (``watcher.kinds.toolkit.metric_values``) show it.

Frankendancer reports ``0.703.20300`` while running the Agave 2.3 feature set: versions of
different clients never compare; feature sets compare across all clients.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from watcher.ledger.models import ClusterNode, VoteAccounts

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
