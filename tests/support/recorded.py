"""Recorded answers of real nodes, for parsing tests: small ones byte for byte from
tests/fixtures/, the two large mainnet ones from the copies packaged with the simulator."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watcher.ledger.simulator import recorded

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
