"""Recorded answers of real nodes, for parsing tests: small ones byte for byte from
tests/fixtures/, the two large mainnet ones from the copies packaged with the simulator."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watcher.ledger.models import ClusterNode, VoteAccounts
from watcher.simulator import recorded

FIXTURES = Path(__file__).parent.parent / "fixtures"

_PACKAGED: dict[str, Callable[[], Any]] = {
    "mainnet_getVoteAccounts_2025-08-21_sava.json": recorded.vote_accounts,
    "mainnet_getClusterNodes_2025-08-22_sava.json": recorded.cluster_nodes,
}


def answer_bytes(name: str) -> bytes:
    """The whole JSON-RPC answer as a node sent it (the large ones re-wrapped, compact)."""
    if name in _PACKAGED:
        body = {"jsonrpc": "2.0", "result": _PACKAGED[name](), "id": 1}
        return json.dumps(body, separators=(",", ":")).encode()
    return (FIXTURES / name).read_bytes()


def result_of(name: str) -> Any:
    return json.loads(answer_bytes(name))["result"]


# Picked from the fixtures: (identity, its vote account) of a node on the reference version and
# of one behind it.
ON_REFERENCE = (
    "PAWsME7oYbjt5TRNc11mBa33JhKnQr9AYherdr9YAZ6",
    "3ZUQekqiZoybB57y49eqtvSaoonqDwuNbeqEGwN88JkQ",
)
BEHIND = (
    "5RvfTSowms7BTYaBj8SxVjj7ELAAKdQadKsuNpmBAwCs",
    "C89gGyN6Q4N47bg5kZWGYVc3P1x3rYaHbpG3EjSLeEx3",
)


@functools.cache
def load_mainnet() -> tuple[list[ClusterNode], VoteAccounts]:
    """Real answers of one day (August 2025), parsed by our models."""
    raw_nodes = result_of("mainnet_getClusterNodes_2025-08-22_sava.json")
    assert isinstance(raw_nodes, list)
    nodes = [ClusterNode.model_validate(node) for node in raw_nodes]
    vote_accounts = VoteAccounts.model_validate(
        result_of("mainnet_getVoteAccounts_2025-08-21_sava.json")
    )
    return nodes, vote_accounts
