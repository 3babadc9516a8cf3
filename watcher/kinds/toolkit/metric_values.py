"""What each source's accepted observation shows on ``/metrics`` (pure: values in, values out).

A source that shows values names its sampler (``metric_values``: ``watcher.kinds.base.Graphed``,
gathered by source name in ``watcher.kinds.SAMPLERS``): it maps an answer taken as evidence, with
the rules watching its target, to ``Sample`` values; ``watcher.service.metrics.ObservedValues``
keeps the latest of each target in memory and renders them when scraped. Where solana-exporter
(v3) has the same value, its name, labels and unit are used (stake and balances in SOL), so that
its dashboard panels and alert rules work unchanged; the other names follow the same style.

A sample names the ``subject`` it is about (a watched pubkey, or a rule for the fee kind; None:
the target as a whole), so that a reload that stops watching it drops it at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from watcher.core.lamports import LAMPORTS_PER_SOL


@dataclass(frozen=True)
class MetricSpec:
    help: str
    labels: tuple[str, ...] = ()
    # Untyped, not a gauge: promtool's lint reserves the ``_count`` suffix for histograms and
    # summaries, and solana-exporter's name must stay as it is (Prometheus reads both alike).
    untyped: bool = False


VALIDATOR = ("votekey", "nodekey")

# Every metric the observed values may show, by name: its help text and label names.
METRICS: Mapping[str, MetricSpec] = {
    "solana_validator_delinquent": MetricSpec(
        "1 while the validator is delinquent (or absent from getVoteAccounts), else 0", VALIDATOR
    ),
    "solana_validator_active_stake": MetricSpec(
        "Activated stake of the validator's vote account, in SOL", VALIDATOR
    ),
    "solana_validator_last_vote": MetricSpec("Last slot the validator voted on", VALIDATOR),
    "solana_validator_root_slot": MetricSpec(
        "Root slot of the validator's vote account", VALIDATOR
    ),
    "solana_validator_commission": MetricSpec("Commission of the vote account, percent", VALIDATOR),
    "solana_validator_epoch_credits": MetricSpec(
        "Vote credits the validator earned in the current epoch", VALIDATOR
    ),
    "solana_validator_vote_lag_slots": MetricSpec(
        "Slots between the cluster's highest last vote and the validator's", VALIDATOR
    ),
    "solana_cluster_active_stake": MetricSpec("Activated stake of all vote accounts, in SOL"),
    "solana_cluster_last_vote": MetricSpec("Highest last vote of any vote account"),
    "solana_cluster_root_slot": MetricSpec("Highest root slot of any vote account"),
    "solana_cluster_validator_count": MetricSpec(
        "Vote accounts by state (current, delinquent)", ("state",), untyped=True
    ),
    "solana_node_version_info": MetricSpec(
        "1 for each watched node seen in gossip, labelled with its version", ("nodekey", "version")
    ),
    "solana_node_version_behind": MetricSpec(
        "1 while the watched node is behind its client's reference version or missing from "
        "gossip, else 0",
        ("nodekey",),
    ),
    "solana_validator_vat_rank": MetricSpec(
        "Rank of the validator's activated stake among the staked vote accounts (ties count "
        "against it): the admission ticket takes ranks up to its cut (2,000)",
        VALIDATOR,
    ),
    "solana_validator_vat_stake_gap": MetricSpec(
        "SOL of activated stake the validator lacks to pass the admission ticket's cut (0: it "
        "passes; absent while fewer vote accounts are staked than the cut admits)",
        VALIDATOR,
    ),
    "solana_validator_vote_account_balance": MetricSpec(
        "Balance of the validator's vote account, in SOL (the ticket needs 1.6 SOL above its "
        "rent-exempt minimum)",
        VALIDATOR,
    ),
    "solana_validator_vat_min_vote_balance": MetricSpec(
        "Balance the validator's vote account needs to pass the admission ticket, in SOL: its "
        "rent-exempt minimum and the strictest rule's min_vote_balance_sol (1.6 by default)",
        VALIDATOR,
    ),
    "solana_validator_vat_boundary_seconds": MetricSpec(
        "Seconds to the next epoch boundary, where the admission ticket is checked (the slots "
        "left at the rule's slot_time: an estimate)",
        VALIDATOR,
    ),
    "solana_account_balance": MetricSpec("Balance of the watched account, in SOL", ("address",)),
    "solana_token_supply": MetricSpec(
        "Supply of the watched mint, in UI units (amount / 10^decimals)", ("mint",)
    ),
    "solana_token_largest_account_balance": MetricSpec(
        "Balance of one of the mint's largest token accounts, in UI units", ("mint", "account")
    ),
    "solana_fee_lamports": MetricSpec(
        "Fee of the fee_above rule's sample message (getFeeForMessage), in lamports", ("rule",)
    ),
}


class Sample(NamedTuple):
    name: str  # a key of METRICS
    labels: tuple[str, ...]  # in the order of the metric's label names
    value: float
    subject: str | None = None  # what it is about; None: the target as a whole


# (the rules watching the target, the target, the accepted observation) -> its samples
Sampler = Callable[[Sequence[Any], str, Any], tuple[Sample, ...]]


def sol(lamports: int) -> float:
    return lamports / LAMPORTS_PER_SOL


def ui_units(amount: int, decimals: int) -> float:
    return amount / 10.0**decimals


def validators_watched(rules: Iterable[Any]) -> list[str]:
    """The validators the rules name (vote or identity pubkeys), each once, in order."""
    return list(dict.fromkeys(key for rule in rules for key in getattr(rule, "validators", ())))


def unique(samples: Iterable[Sample]) -> tuple[Sample, ...]:
    """Each series once (a validator watched by its vote and its identity pubkey shows once)."""
    seen: dict[tuple[str, tuple[str, ...]], Sample] = {}
    for sample in samples:
        seen.setdefault((sample.name, sample.labels), sample)
    return tuple(seen.values())
