"""Where the signatures of one address have been seen up to (``Cursor``), and the paging of
getSignaturesForAddress against it: which entries of the pages are new, and when to stop paging
back (kind ``new_transactions``, ``watcher.kinds.new_transactions``). Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watcher.core.events import WatchSince
from watcher.ledger.models import SignatureEntry, SignaturePage


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


def continues_from(data: Mapping[str, Any]) -> str | None:
    """The signature a cursor (as ``to_json`` wrote it) continues from: its ``sig``, read
    without parsing the rest."""
    sig: str | None = data.get("sig")
    return sig


def baseline_cursor(page: Sequence[SignatureEntry]) -> Cursor:
    """The cursor learned from the first poll (``limit=1``): the newest entry, or empty."""
    if not page:
        return EMPTY_HISTORY
    newest = max(page, key=lambda entry: entry.slot)
    at_slot = frozenset(entry.signature for entry in page if entry.slot == newest.slot)
    return Cursor(newest.signature, newest.slot, at_slot, slot_closed=True)


def left_out(page: Sequence[SignatureEntry]) -> tuple[Any, ...]:
    """The entries of ``page`` the node listed with an unreadable identity (``SignaturePage``)."""
    return page.left_out if isinstance(page, SignaturePage) else ()


def listed(page: Sequence[SignatureEntry]) -> int:
    """How many entries the node listed on ``page``, unreadable ones left out included."""
    return len(page) + len(left_out(page))


def page_is_last(cursor: Cursor | None, page: Sequence[SignatureEntry], limit: int) -> bool:
    """Stop paging back: the page is short, or it reached what the cursor has seen (its
    signature, its slot's signatures, or an older slot). The last test is what keeps a node that
    ignores ``until`` from walking the whole history. Short counts what the node listed: an
    unreadable entry left out of a full page does not end the paging."""
    if listed(page) < limit:
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


def after_watch_began(entry: SignatureEntry, since: WatchSince) -> bool | None:
    """Whether ``entry`` came at or after the moment its watch began (True), before it (False),
    or cannot tell by itself (None: no ``blockTime``, and the slot at that moment unknown).

    By ``blockTime`` (whole seconds: the second the watch began in counts as after it, so an
    entry of that second is notified rather than lost); without one, by slot when the slot at
    that moment is known (a lower bound, the highest slot seen by then: at or above it is
    after)."""
    if entry.block_time is not None:
        return entry.block_time >= math.floor(since.at)
    if since.slot is not None:
        return entry.slot >= since.slot
    return None


def split_at_watch(
    entries: Iterable[SignatureEntry], since: WatchSince
) -> tuple[tuple[SignatureEntry, ...], tuple[SignatureEntry, ...]]:
    """A first poll's entries (de-duplicated by signature) as (new, history), each newest
    first: new is what came at or after the watch began (``after_watch_began``).

    An entry that cannot tell by itself is placed by the entries around it, slots being
    ordered as time is: at or above the lowest slot of a new one it is new, at or below the
    highest slot of an old one it is history. Between the two, or with neither, it is new:
    a notification marked "time unknown" costs a glance, a deposit taken as history is lost."""
    unique: dict[str, SignatureEntry] = {}
    for entry in entries:
        unique.setdefault(entry.signature, entry)
    told = [(entry, after_watch_began(entry, since)) for entry in unique.values()]
    lowest_new = min((e.slot for e, after in told if after is True), default=None)
    highest_old = max((e.slot for e, after in told if after is False), default=None)
    new: list[SignatureEntry] = []
    old: list[SignatureEntry] = []
    for entry, after in told:
        if after is None:
            if lowest_new is not None and entry.slot >= lowest_new:
                after = True
            else:
                after = highest_old is None or entry.slot > highest_old
        (new if after else old).append(entry)
    # Stable sort: inside one slot the node's own order is kept.
    new.sort(key=lambda entry: entry.slot, reverse=True)
    old.sort(key=lambda entry: entry.slot, reverse=True)
    return tuple(new), tuple(old)


def predates_watch(page: Sequence[SignatureEntry], since: WatchSince) -> bool:
    """Whether ``page`` holds an entry known to come before the watch began: paging back a
    first poll's history can stop there."""
    return any(after_watch_began(entry, since) is False for entry in page)


def cursor_after_first_poll(
    entries: Sequence[SignatureEntry], new: Sequence[SignatureEntry]
) -> Cursor:
    """The cursor after a first poll that paged back to where its watch began: at the newest
    entry listed, with every listed entry of its slot. With nothing new, the baseline's (its
    slot closed: what was not listed of it predates the watch)."""
    if not new:
        return baseline_cursor(entries)
    newest = max(entries, key=lambda entry: entry.slot)
    at_slot = frozenset(entry.signature for entry in entries if entry.slot == newest.slot)
    return Cursor(newest.signature, newest.slot, at_slot)
