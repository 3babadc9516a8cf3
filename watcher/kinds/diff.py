"""Pure diffs: previous snapshot or cursor + new observation -> what is new.

No clock, no I/O: tables and properties test these directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

from watcher.ledger.models import SignatureEntry, VoteAccount, VoteAccounts

# -- signatures ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cursor:
    """How far the signatures of one address have been seen.

    ``sig`` is the newest signature seen (what ``until`` is set to), ``slot`` its slot and
    ``sigs_at_slot`` every signature seen at that slot: nodes order one slot's entries
    differently, so "at the cursor's slot" alone cannot tell old from new. ``sig is None``
    means "baselined on an empty history": everything found later is new. ``slot_closed``
    marks a baseline learned with ``limit=1``: the other entries of that slot were not listed
    but predate the first poll, so every entry at ``slot`` counts as seen.
    """

    sig: str | None
    slot: int | None
    sigs_at_slot: frozenset[str] = frozenset()
    slot_closed: bool = False

    def has_seen(self, entry: SignatureEntry) -> bool:
        if self.slot is None:
            return False
        if entry.slot != self.slot:
            return entry.slot < self.slot
        return self.slot_closed or entry.signature in self.sigs_at_slot

    def to_json(self) -> dict[str, Any]:
        return {
            "sig": self.sig,
            "slot": self.slot,
            "sigs_at_slot": sorted(self.sigs_at_slot),
            "slot_closed": self.slot_closed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cursor:
        return cls(
            sig=data.get("sig"),
            slot=data.get("slot"),
            sigs_at_slot=frozenset(data.get("sigs_at_slot") or ()),
            slot_closed=bool(data.get("slot_closed", False)),
        )


EMPTY_HISTORY = Cursor(sig=None, slot=None)


def baseline_cursor(page: Sequence[SignatureEntry]) -> Cursor:
    """The cursor learned from the first poll (``limit=1``): the newest entry, or empty."""
    if not page:
        return EMPTY_HISTORY
    newest = max(page, key=lambda entry: entry.slot)
    at_slot = frozenset(entry.signature for entry in page if entry.slot == newest.slot)
    return Cursor(newest.signature, newest.slot, at_slot, slot_closed=True)


def page_is_last(cursor: Cursor | None, page: Sequence[SignatureEntry], limit: int) -> bool:
    """Stop paging back: the page is short, or it reached what the cursor has seen (its
    signature, its slot's signatures, or an older slot). The last test is what keeps a node that
    ignores ``until`` from walking the whole history."""
    if len(page) < limit:
        return True
    if cursor is None:
        return False
    return any(cursor.has_seen(entry) for entry in page)


def new_signatures(
    cursor: Cursor | None, pages: Iterable[Sequence[SignatureEntry]]
) -> tuple[tuple[SignatureEntry, ...], Cursor]:
    """Entries of ``pages`` the cursor has not seen, newest first, de-duplicated by signature,
    and the cursor after them (unchanged when nothing is new)."""
    known: set[str] = set()
    fresh: list[SignatureEntry] = []
    for page in pages:
        for entry in page:
            if entry.signature in known:
                continue
            known.add(entry.signature)
            if cursor is None or not cursor.has_seen(entry):
                fresh.append(entry)
    # Stable sort: inside one slot the node's own order is kept.
    fresh.sort(key=lambda entry: entry.slot, reverse=True)
    if not fresh:
        return (), cursor if cursor is not None else EMPTY_HISTORY
    newest = fresh[0]
    at_slot = {entry.signature for entry in fresh if entry.slot == newest.slot}
    if cursor is not None and cursor.slot == newest.slot:
        at_slot |= cursor.sigs_at_slot
    return tuple(fresh), Cursor(newest.signature, newest.slot, frozenset(at_slot))


# -- holders ---------------------------------------------------------------------------------

# A top-holders snapshot: token account address -> raw amount (integer, never a float).
Top = Mapping[str, int]


@dataclass(frozen=True)
class BalanceChange:
    account: str
    old: int  # the amount last notified for this account (or its baseline)
    new: int

    @property
    def pct(self) -> Fraction | None:
        """Signed change in percent of ``old``; None when ``old`` is 0 (no base to compare)."""
        if self.old == 0:
            return None
        return Fraction(self.new - self.old, self.old) * 100


def ranks(top: Top) -> dict[str, int]:
    """1-based rank by amount, largest first (ties by account, to be deterministic)."""
    ordered = sorted(top.items(), key=lambda item: (-item[1], item[0]))
    return {account: rank for rank, (account, _) in enumerate(ordered, start=1)}


def diff_holders(prev_top: Top, new_top: Top) -> tuple[list[str], list[str]]:
    """(accounts that entered the top, accounts that left it), each largest first."""
    entered = [account for account in ranks(new_top) if account not in prev_top]
    left = [account for account in ranks(prev_top) if account not in new_top]
    return entered, left


def holder_changes(
    refs: Top, new_top: Top, min_pct: float
) -> tuple[list[BalanceChange], dict[str, int]]:
    """Balances that moved by at least ``min_pct`` percent from their reference (the amount
    last notified, or the baseline), largest first, and the references after notifying them.

    Comparing with the last *notified* amount, not the last polled one, is what catches slow
    creep. An account without a reference gets its current amount as baseline; accounts no
    longer in the top lose theirs (they come back as "entered").
    """
    threshold = Fraction(Decimal(str(min_pct)))
    changes: list[BalanceChange] = []
    new_refs: dict[str, int] = {}
    for account in ranks(new_top):
        amount = new_top[account]
        if account not in refs:
            new_refs[account] = amount
            continue
        ref = refs[account]
        moved = amount > 0 if ref == 0 else abs(amount - ref) * 100 >= threshold * ref
        if moved and amount != ref:
            changes.append(BalanceChange(account, ref, amount))
            new_refs[account] = amount
        else:
            new_refs[account] = ref
    return changes, new_refs


# -- validators ------------------------------------------------------------------------------

VoteState = Literal["current", "delinquent", "missing"]


@dataclass(frozen=True)
class ValidatorStatus:
    """Where a watched pubkey (vote account or identity) stands in getVoteAccounts."""

    watched: str
    state: VoteState
    vote_pubkey: str | None = None
    node_pubkey: str | None = None
    activated_stake: int | None = None
    last_vote: int | None = None
    slots_behind: int | None = None  # behind the newest vote of the current set


def classify_validators(
    watched: Iterable[str], vote_accounts: VoteAccounts
) -> dict[str, ValidatorStatus]:
    """A watched pubkey matches a vote account's ``votePubkey`` or ``nodePubkey``. Found in
    ``current`` -> current (an identity with several vote accounts counts as current when one of
    them is); else in ``delinquent`` -> delinquent; in neither -> missing (which fires too: an
    unstaked delinquent is left out of both lists)."""
    newest_vote = max((acc.last_vote for acc in vote_accounts.current), default=None)
    current = _by_pubkey(vote_accounts.current)
    delinquent = _by_pubkey(vote_accounts.delinquent)
    statuses: dict[str, ValidatorStatus] = {}
    for pubkey in watched:
        state: VoteState
        if pubkey in current:
            state, account = "current", current[pubkey]
        elif pubkey in delinquent:
            state, account = "delinquent", delinquent[pubkey]
        else:
            statuses[pubkey] = ValidatorStatus(pubkey, "missing")
            continue
        behind = None if newest_vote is None else max(0, newest_vote - account.last_vote)
        statuses[pubkey] = ValidatorStatus(
            watched=pubkey,
            state=state,
            vote_pubkey=account.vote_pubkey,
            node_pubkey=account.node_pubkey,
            activated_stake=account.activated_stake,
            last_vote=account.last_vote,
            slots_behind=behind,
        )
    return statuses


def _by_pubkey(accounts: Iterable[VoteAccount]) -> dict[str, VoteAccount]:
    """Vote and identity pubkey -> account (the most staked one when an identity has several)."""
    index: dict[str, VoteAccount] = {}
    for account in sorted(accounts, key=lambda acc: acc.activated_stake):
        index[account.vote_pubkey] = account
        index[account.node_pubkey] = account
    return index
