"""Recorded mainnet answers shipped with the package (see ``data/README.md``)."""

from __future__ import annotations

import gzip
import json
from functools import cache
from importlib import resources
from typing import Any

# Highest lastVote among the recorded current vote accounts: the tip of the recorded cluster.
MAINNET_TIP_SLOT = 361_641_764
# When the recorded cluster was at that tip (2025-08-21T00:00:00Z, the day it was recorded):
# the fixed epoch from which a simulator following the wall clock counts its slots.
MAINNET_TIP_TIME = 1_755_734_400
SLOT_SECONDS = 0.4  # a mainnet slot's target duration
MAINNET_EPOCH = 837
MAINNET_SHRED_VERSION = 50_093
# apiVersion the recorded getTokenLargestAccounts answer reports in its context.
API_VERSION = "2.2.7"


def wall_clock_slot(now: float) -> int:
    """The slot a cluster at the recorded tip, one slot per 400 ms since, is at ``now`` (Unix
    seconds): about mainnet's, and never lower for a later ``now``."""
    # In whole milliseconds: 62.8 s after the tip is 157 slots, not 156.99999.
    millis = round((now - MAINNET_TIP_TIME) * 1000)
    return MAINNET_TIP_SLOT + max(0, millis // round(SLOT_SECONDS * 1000))


@cache
def _load(name: str) -> Any:
    raw = resources.files("watcher.simulator").joinpath("data", name).read_bytes()
    return json.loads(gzip.decompress(raw))


def vote_accounts() -> dict[str, list[dict[str, Any]]]:
    """getVoteAccounts result, 2025-08-21: ``{"current": [...], "delinquent": [...]}``.

    Shared and cached: callers must copy what they mutate.
    """
    result: dict[str, list[dict[str, Any]]] = _load("mainnet_vote_accounts.json.gz")
    return result


def cluster_nodes() -> list[dict[str, Any]]:
    """getClusterNodes result, 2025-08-22 (6455 nodes). Shared and cached: copy to mutate."""
    result: list[dict[str, Any]] = _load("mainnet_cluster_nodes.json.gz")
    return result


def token_largest_accounts() -> dict[str, Any]:
    """getTokenLargestAccounts result of an 8-decimal mint at slot 361665664 (20 entries)."""
    result: dict[str, Any] = _load("mainnet_token_largest_accounts.json.gz")
    return result


def top_holders() -> tuple[list[tuple[str, int]], int]:
    """The recorded top 20 as ``([(token account, raw amount)], decimals)``."""
    value = token_largest_accounts()["value"]
    holders = [(str(entry["address"]), int(entry["amount"])) for entry in value]
    return holders, int(value[0]["decimals"])
