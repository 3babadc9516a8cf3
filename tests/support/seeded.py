"""A small seeded ledger and the four base rules watching it, for the in-process tests of
evidence (tests/test_evidence.py) and quorum (tests/test_quorum.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from watcher.ledger.simulator import Ledger
from watcher.ledger.simulator.keys import derived_pubkey

TREASURY = derived_pubkey("evidence treasury")
MINT = derived_pubkey("evidence mint")
HOLDERS = [derived_pubkey(f"evidence holder {i}") for i in range(21)]
OUR_VOTE, OUR_NODE = derived_pubkey("evidence our vote"), derived_pubkey("evidence our node")
BIG_VOTE, BIG_NODE = derived_pubkey("evidence big vote"), derived_pubkey("evidence big node")
FEATURE_SET = 3640012085
START = 1_790_000_000.0  # the injected clock (2026-09)


def small_cluster(clock: Callable[[], float]) -> Ledger:
    ledger = Ledger(seed=11, clock=clock)
    ledger.add_transactions(TREASURY, 5)
    ledger.set_holders(MINT, [(h, 1_000_000 * (100 - i)) for i, h in enumerate(HOLDERS[:20])])
    for vote, node, stake in (
        (BIG_VOTE, BIG_NODE, 10_000_000_000_000_000),
        (OUR_VOTE, OUR_NODE, 50_000_000_000_000),
    ):
        ledger.set_validator(vote, node, stake=stake)
        ledger.set_node(node, version="2.3.6", feature_set=FEATURE_SET)
    return ledger


def base_rules() -> list[dict[str, Any]]:
    return [
        {"name": "treasury", "kind": "new_transactions", "addresses": [TREASURY],
         "every": "1s", "notify": ["hooks"]},
        {"name": "whales", "kind": "holder_changes", "mints": [MINT], "min_change_pct": 10,
         "every": "1s", "notify": ["hooks"]},
        {"name": "my-validator", "kind": "delinquent_validators", "validators": [OUR_VOTE],
         "every": "1s", "notify": ["hooks"]},
        {"name": "drift", "kind": "version_drift", "validators": [OUR_NODE],
         "every": "1s", "notify": ["hooks"]},
    ]  # fmt: skip
