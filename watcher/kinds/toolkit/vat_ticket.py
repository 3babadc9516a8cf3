"""The arithmetic of the validator admission ticket (SIMD-0357, kind ``vat_eligibility``:
``watcher.kinds.vat_eligibility``): what a vote account needs in its balance, where a stake ranks
against the cut of the 2,000 most staked, and where the next epoch boundary is. Pure."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Mainnet's epoch schedule (no warm-up): what the rule's keys default to.
MAINNET_SLOTS_PER_EPOCH = 432_000
MAINNET_SLOT_SECONDS = 0.4
MAX_RANK = 2000  # SIMD-0357: the 2,000 vote accounts with the most stake
VAT_SOL = 1.6  # burnt from each admitted vote account at the boundary

# The rent-exempt minimum of a vote account as agave counts it for the ticket: that of a
# VoteStateV4 (3,762 bytes) at mainnet's rent, (128 + 3,762) bytes x 3,480 lamports per
# byte-year x 2 years. The service has no getMinimumBalanceForRentExemption.
VOTE_STATE_V4_SIZE = 3762
ACCOUNT_STORAGE_OVERHEAD = 128
LAMPORTS_PER_BYTE_YEAR = 3480
EXEMPTION_YEARS = 2
VOTE_RENT_EXEMPT_LAMPORTS = (
    (ACCOUNT_STORAGE_OVERHEAD + VOTE_STATE_V4_SIZE) * LAMPORTS_PER_BYTE_YEAR * EXEMPTION_YEARS
)


@dataclass(frozen=True)
class Standing:
    """Where a stake stands against the cut. ``rank``: 1 + the vote accounts of the others with
    at least as much stake (ties count against it); ``cut_stake``: the others' stake at the cut
    (the ``max_rank``-th largest of theirs; None: fewer others than places, no cut); ``gap``:
    lamports it lacks to pass the cut (0: it passes)."""

    rank: int
    cut_stake: int | None
    gap: int

    def passes(self, max_rank: int) -> bool:
        return self.rank <= max_rank


def standing(stake: int, others: Iterable[int], max_rank: int) -> Standing:
    """The rank of ``stake`` among the staked vote accounts ``others`` (itself left out) and what
    it lacks to pass a cut of ``max_rank``. agave keeps the ``max_rank`` largest and drops every
    account whose stake is at most the first one left out, so ``stake`` passes exactly when at
    most ``max_rank - 1`` others have as much or more: when it is above the ``max_rank``-th
    largest of the others."""
    staked = [other for other in others if other > 0]
    rank = 1 + sum(1 for other in staked if other >= stake)
    if len(staked) < max_rank:
        return Standing(rank, None, 0)
    cut = heapq.nlargest(max_rank, staked)[-1]
    return Standing(rank, cut, max(0, cut + 1 - stake))


def admitted(stakes: Mapping[str, int], max_rank: int) -> set[str]:
    """agave's cut of SIMD-0357, as written there (for the tests: ``standing`` must agree):
    the staked accounts; past ``max_rank`` of them, those above the stake of the first one out."""
    staked = {key: stake for key, stake in stakes.items() if stake > 0}
    if len(staked) <= max_rank:
        return set(staked)
    floor = sorted(staked.values(), reverse=True)[max_rank]
    return {key for key, stake in staked.items() if stake > floor}


@dataclass(frozen=True)
class Boundary:
    """The next epoch boundary seen from ``slot``."""

    epoch: int  # the epoch ``slot`` is in
    next_slot: int  # the first slot of the next epoch
    slots_left: int


def next_boundary(slot: int, slots_per_epoch: int, first_normal_slot: int = 0) -> Boundary | None:
    """Where the next epoch starts (None inside the warm-up, before ``first_normal_slot``: its
    short epochs are long past on every running cluster)."""
    if slot < first_normal_slot:
        return None
    into = slot - first_normal_slot
    number, offset = divmod(into, slots_per_epoch)
    first_normal_epoch = _warmup_epochs(first_normal_slot)
    next_slot = first_normal_slot + (number + 1) * slots_per_epoch
    return Boundary(first_normal_epoch + number, next_slot, slots_per_epoch - offset)


def _warmup_epochs(first_normal_slot: int) -> int:
    """Epochs of the warm-up (32, 64, 128 ... slots) before ``first_normal_slot``."""
    epochs, length, slot = 0, 32, 0
    while slot < first_normal_slot:
        slot, length, epochs = slot + length, length * 2, epochs + 1
    return epochs
