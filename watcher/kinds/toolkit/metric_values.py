"""What each source's accepted observation shows on ``/metrics`` (pure: values in, values out).

One function per source (``SAMPLERS``, by source name) maps an answer taken as evidence, with the
rules watching its target, to ``Sample`` values; ``watcher.service.observed_values`` keeps the
latest of each target in memory and renders them when scraped. Where solana-exporter (v3) has the
same value, its name, labels and unit are used (stake and balances in SOL), so that its dashboard
panels and alert rules work unchanged; the other names follow the same style.

A sample names the ``subject`` it is about (a watched pubkey, or a rule for the fee kind; None:
the target as a whole), so that a reload that stops watching it drops it at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from watcher.kinds import fee_above, holder_changes, supply_changed, vat_eligibility, version_drift
from watcher.kinds.credits_low import account_finder, current_epoch, earned
from watcher.kinds.fee_above import FeeObservation
from watcher.kinds.holder_changes import HoldersObservation
from watcher.kinds.sources import accounts, votes
from watcher.kinds.sources.accounts import AccountObservation
from watcher.kinds.supply_changed import SupplyObservation
from watcher.kinds.toolkit.vat_ticket import next_boundary
from watcher.kinds.toolkit.versions import assess_node, index_cluster
from watcher.kinds.vat_eligibility import VatObservation, ticket_of
from watcher.kinds.version_drift import ClusterObservation
from watcher.ledger.models import VoteAccounts

LAMPORTS_PER_SOL = 10**9


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


def vote_samples(
    rules: Sequence[Any], target: str, observation: VoteAccounts
) -> tuple[Sample, ...]:
    """Source ``votes``: each watched validator's vote account, and the cluster as a whole."""
    accounts = (*observation.current, *observation.delinquent)
    highest_vote = max((account.last_vote for account in accounts), default=None)
    highest_root = max(
        (account.root_slot for account in accounts if account.root_slot is not None), default=None
    )
    samples = [
        Sample("solana_cluster_active_stake", (), sol(sum(a.activated_stake for a in accounts))),
        Sample("solana_cluster_validator_count", ("current",), len(observation.current)),
        Sample("solana_cluster_validator_count", ("delinquent",), len(observation.delinquent)),
    ]
    if highest_vote is not None:
        samples.append(Sample("solana_cluster_last_vote", (), highest_vote))
    if highest_root is not None:
        samples.append(Sample("solana_cluster_root_slot", (), highest_root))
    epoch = current_epoch(observation)
    current = {account.vote_pubkey for account in observation.current}
    find_account = account_finder(observation)
    for watched in validators_watched(rules):
        account = find_account(watched)
        if account is None:
            # In neither list (an unstaked delinquent is left out of both): delinquent, and
            # only the watched pubkey is known.
            samples.append(Sample("solana_validator_delinquent", (watched, ""), 1, watched))
            continue
        keys = (account.vote_pubkey, account.node_pubkey)
        delinquent = 0 if account.vote_pubkey in current else 1
        samples += [
            Sample("solana_validator_delinquent", keys, delinquent, watched),
            Sample("solana_validator_active_stake", keys, sol(account.activated_stake), watched),
            Sample("solana_validator_last_vote", keys, account.last_vote, watched),
        ]
        if account.root_slot is not None:
            samples.append(Sample("solana_validator_root_slot", keys, account.root_slot, watched))
        if account.commission is not None:
            samples.append(Sample("solana_validator_commission", keys, account.commission, watched))
        if epoch is not None:
            credits = earned(account, epoch)
            samples.append(Sample("solana_validator_epoch_credits", keys, credits, watched))
        if highest_vote is not None:
            lag = max(0, highest_vote - account.last_vote)
            samples.append(Sample("solana_validator_vote_lag_slots", keys, lag, watched))
    return unique(samples)


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


def account_samples(
    rules: Sequence[Any], target: str, observation: AccountObservation
) -> tuple[Sample, ...]:
    """Source ``accounts``: a plain account's balance in SOL (one that does not exist holds 0);
    a token account's balance is not SOL and shows nothing here."""
    if observation.token is not None:
        return ()
    lamports = observation.account.lamports if observation.account is not None else 0
    return (Sample("solana_account_balance", (observation.address,), sol(lamports)),)


def supply_samples(
    rules: Sequence[Any], target: str, observation: SupplyObservation
) -> tuple[Sample, ...]:
    """Source ``supply``: the mint's supply in UI units."""
    supply = ui_units(observation.amount, observation.decimals)
    return (Sample("solana_token_supply", (target,), supply),)


def holder_samples(
    rules: Sequence[Any], target: str, observation: HoldersObservation
) -> tuple[Sample, ...]:
    """Source ``holders``: the balance of each of the mint's largest token accounts."""
    return unique(
        Sample(
            "solana_token_largest_account_balance",
            (target, str(account.address)),
            ui_units(account.amount, account.decimals),
        )
        for account in observation.accounts
    )


def fee_samples(
    rules: Sequence[Any], target: str, observation: FeeObservation
) -> tuple[Sample, ...]:
    """Source ``fees``: the sample message's fee, labelled by each rule sending it (the target
    is the message itself: long, and telling an operator nothing)."""
    if observation.fee is None:
        return ()
    names = dict.fromkeys(rule.name for rule in rules if getattr(rule, "message", None) == target)
    return tuple(Sample("solana_fee_lamports", (name,), observation.fee, name) for name in names)


def vat_samples(
    rules: Sequence[Any], target: str, observation: VatObservation
) -> tuple[Sample, ...]:
    """Source ``vat`` (one watched validator): its rank by activated stake, the stake it lacks
    to reach the cut (of the strictest ``max_rank`` watching it), its vote account's balance
    against the strictest minimum, and the time to the next boundary. No stake: no rank nor
    gap; no vote account to read: no balance; no slot read: no time to the boundary."""
    mine = [rule for rule in rules if isinstance(rule, vat_eligibility.VatEligibilityRule)]
    if not mine:
        return ()
    max_rank = min(rule.max_rank for rule in mine)
    ticket = ticket_of(target, observation, max_rank)
    vote = ticket.vote.vote_pubkey if ticket.vote is not None else observation.vote_pubkey
    keys = (vote or target, ticket.vote.node_pubkey if ticket.vote is not None else "")
    samples: list[Sample] = []
    if ticket.standing is not None:
        samples.append(Sample("solana_validator_vat_rank", keys, ticket.standing.rank, target))
        if ticket.standing.cut_stake is not None:
            gap = sol(ticket.standing.gap)
            samples.append(Sample("solana_validator_vat_stake_gap", keys, gap, target))
    if ticket.balance is not None:
        balance = sol(ticket.balance)
        samples.append(Sample("solana_validator_vote_account_balance", keys, balance, target))
        minimum = sol(max(rule.min_balance for rule in mine))
        samples.append(Sample("solana_validator_vat_min_vote_balance", keys, minimum, target))
    schedule = mine[0]  # the cluster's epoch schedule: the same in every rule of one cluster
    if observation.slot is not None:
        boundary = next_boundary(
            observation.slot, schedule.slots_per_epoch, schedule.first_normal_slot
        )
        if boundary is not None:
            seconds = boundary.slots_left * schedule.slot_time
            samples.append(Sample("solana_validator_vat_boundary_seconds", keys, seconds, target))
    return tuple(samples)


def unique(samples: Iterable[Sample]) -> tuple[Sample, ...]:
    """Each series once (a validator watched by its vote and its identity pubkey shows once)."""
    seen: dict[tuple[str, tuple[str, ...]], Sample] = {}
    for sample in samples:
        seen.setdefault((sample.name, sample.labels), sample)
    return tuple(seen.values())


SAMPLERS: Mapping[str, Sampler] = {
    votes.SOURCE.name: vote_samples,
    version_drift.SOURCE.name: node_samples,
    accounts.SOURCE.name: account_samples,
    supply_changed.SOURCE.name: supply_samples,
    holder_changes.SOURCE.name: holder_samples,
    fee_above.SOURCE.name: fee_samples,
    vat_eligibility.SOURCE.name: vat_samples,
}
