"""Versions, clients and stake-weighted references, against real mainnet answers (Aug 2025)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from watcher.kinds.toolkit.versions import (
    AGAVE,
    FRANKENDANCER,
    ClusterIndex,
    assess_node,
    client_of,
    index_cluster,
    node_stakes,
    parse_version,
)
from watcher.ledger.models import ClusterNode, VoteAccounts

from support.recorded import BEHIND, ON_REFERENCE, load_mainnet

# More picks from the fixtures (identity, its vote account)
AHEAD_OTHER_FEATURE_SET = "Uf7TePem6vihMBiRg2d1ivnoNtRapdATfe5o99NuZH6"  # 3.0.0
FRANKENDANCER_OTHER_FEATURE_SET = "CaveyttUBTKttncu1e4RF814XjuoGfYv8cEsiKGDNCPX"
DELINQUENT_NOT_IN_GOSSIP = (
    "A31PGH4i5xGn7SHWpsQRhpBYUwanRuqNrHBp8bSeCSEr",
    "EkLA4nA5jtM2t2FkNWo6XWAyvQyaJJUZoX5p7LMawoaz",
)


@pytest.fixture(scope="module")
def mainnet() -> tuple[list[ClusterNode], VoteAccounts]:
    return load_mainnet()


@pytest.fixture(scope="module")
def cluster(mainnet: tuple[list[ClusterNode], VoteAccounts]) -> ClusterIndex:
    return index_cluster(*mainnet)


def test_parse_version_table() -> None:
    assert parse_version("2.3.6") == (2, 3, 6)
    assert parse_version("3.0.0") == (3, 0, 0)
    assert parse_version("0.703.20300") == (0, 703, 20300)
    assert parse_version("v2.2.20") == (2, 2, 20)
    assert parse_version("3.0.0-rc.1") == (3, 0, 0)
    assert parse_version("2.3.10") > parse_version("2.3.9")  # type: ignore[operator]
    for unreadable in (None, "", "unknown", "x.1"):
        assert parse_version(unreadable) is None


def test_an_absurdly_long_version_is_unreadable_not_a_crash() -> None:
    # int() refuses more than 4300 digits with ValueError: that was a traceback in the poll.
    for hostile in ("9" * 5000, "2.3." + "1" * 5000, "2.3.6" + "-x" * 5000):
        assert parse_version(hostile) is None


def test_clients_are_told_apart_by_their_numbering() -> None:
    assert client_of((0, 703, 20300)) == FRANKENDANCER
    assert client_of((2, 3, 6)) == AGAVE
    assert client_of((3, 0, 0)) == AGAVE


def test_mainnet_references(cluster: ClusterIndex) -> None:
    assert cluster.references[AGAVE].version == "2.3.6"
    frankendancer = cluster.references[FRANKENDANCER].version
    assert frankendancer.startswith("0.70"), frankendancer
    assert cluster.reference_feature_set == 3640012085
    assert cluster.reference_feature_set_stake_pct is not None
    assert cluster.reference_feature_set_stake_pct > 95


def test_mainnet_stake_shares_match_what_was_published(
    mainnet: tuple[list[ClusterNode], VoteAccounts],
) -> None:
    nodes, vote_accounts = mainnet
    stakes = node_stakes(vote_accounts)
    by_version: dict[str | None, int] = defaultdict(int)
    for node in nodes:
        by_version[node.version] += stakes.get(node.pubkey, 0)
    total = sum(by_version.values())
    share = {version: stake * 100 / total for version, stake in by_version.items()}
    frankendancer = sum(pct for version, pct in share.items() if version and version[:2] == "0.")
    assert share["2.3.6"] == pytest.approx(76, abs=1.5)
    assert share["2.3.5"] == pytest.approx(11, abs=1.5)
    assert frankendancer == pytest.approx(11, abs=1.5)
    # Current and delinquent stake together: a node's stake adds up its vote accounts.
    assert sum(stakes.values()) == sum(
        acc.activated_stake for acc in (*vote_accounts.current, *vote_accounts.delinquent)
    )


@pytest.mark.parametrize("watched", ON_REFERENCE)
def test_a_node_on_the_reference_is_ok_by_identity_or_vote_pubkey(
    cluster: ClusterIndex, watched: str
) -> None:
    result = assess_node(watched, cluster)
    assert result.status == "ok" and result.drifting is False
    assert result.node_pubkey == ON_REFERENCE[0]
    assert result.vote_pubkeys == (ON_REFERENCE[1],)
    assert result.stake > 0


@pytest.mark.parametrize("watched", BEHIND)
def test_a_node_behind_its_client_reference_drifts(cluster: ClusterIndex, watched: str) -> None:
    result = assess_node(watched, cluster)
    assert result.status == "behind" and result.drifting is True
    assert (result.version, result.reference_version, result.client) == ("2.3.5", "2.3.6", AGAVE)


def test_a_node_ahead_of_its_reference_on_a_new_feature_set_is_not_drifting(
    cluster: ClusterIndex,
) -> None:
    result = assess_node(AHEAD_OTHER_FEATURE_SET, cluster)
    assert result.version == "3.0.0"
    assert result.feature_set != cluster.reference_feature_set
    assert result.status == "ok"


def test_frankendancer_compares_by_feature_set_only(cluster: ClusterIndex) -> None:
    result = assess_node(FRANKENDANCER_OTHER_FEATURE_SET, cluster)
    assert result.client == FRANKENDANCER
    # 0.703 is not "behind" Agave 2.3.6: versions of different clients never compare.
    assert result.reference_version == cluster.references[FRANKENDANCER].version
    assert result.status == "feature_set"
    assert result.reference_feature_set == 3640012085


@pytest.mark.parametrize("watched", DELINQUENT_NOT_IN_GOSSIP)
def test_a_node_missing_from_gossip_drifts(cluster: ClusterIndex, watched: str) -> None:
    result = assess_node(watched, cluster)
    assert result.status == "missing" and result.drifting is True
    assert result.node_pubkey == DELINQUENT_NOT_IN_GOSSIP[0]
    assert result.vote_pubkeys == (DELINQUENT_NOT_IN_GOSSIP[1],)


def test_a_node_without_version_is_unknown_not_evidence() -> None:
    nodes = [
        ClusterNode.model_construct(pubkey="A", version="2.3.6", feature_set=7),
        ClusterNode.model_construct(pubkey="B", version=None, feature_set=None),
    ]
    result = assess_node("B", index_cluster(nodes, VoteAccounts(current=[], delinquent=[])))
    assert result.status == "unknown" and result.drifting is None


def test_without_stake_the_most_common_version_is_the_reference() -> None:
    nodes = [
        ClusterNode.model_construct(pubkey=p, version=v, feature_set=7)
        for p, v in [("A", "2.3.5"), ("B", "2.3.6"), ("C", "2.3.6"), ("D", "0.705.20306")]
    ]
    cluster = index_cluster(nodes, VoteAccounts(current=[], delinquent=[]))
    assert cluster.references[AGAVE].version == "2.3.6"
    assert cluster.references[FRANKENDANCER].version == "0.705.20306"
    assert assess_node("A", cluster).status == "behind"
    assert assess_node("D", cluster).status == "ok"
