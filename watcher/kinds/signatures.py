"""Source ``signatures``: new transactions of watched addresses (rule kind ``new_transactions``).

State per address: ``{"v": 1, "cursor": Cursor.to_json(), "slot_time": 1790000000}``; no
``cursor`` = never polled. ``slot_time``: the blockTime of the cursor's entry, when known.

Doubts (``watcher.ledger.plausibility``), never taken as they are: an entry whose blockTime is more
than a day after the clock, or whose slot is further ahead than time allows since the cluster's
highest slot seen (``SlotTip``) or since the cursor's (``slot_time``); the cursor stays put and
the next answer is judged afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from watcher.alerting.events import AlertMessage, StepOutcome, TargetState
from watcher.alerting.messages import RuleView, make_alert, transactions_text
from watcher.core.errors import BadResponse
from watcher.kinds.base import LedgerReader
from watcher.kinds.diff import Cursor, baseline_cursor, new_signatures, page_is_last
from watcher.ledger.models import SignatureEntry
from watcher.ledger.plausibility import MAX_CLOCK_AHEAD, Doubt, SlotTip, picture_of, slot_allowance

STATE_VERSION = 1
PAGE_LIMIT = 1000  # the node's maximum
LISTED = 10  # signatures listed one by one in a notification
METHOD = "getSignaturesForAddress"


class TransactionsRule(RuleView, Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def addresses(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class SignaturesObservation:
    """The pages one poll fetched, newest first. ``baseline``: the first poll (``limit=1``),
    which only learns where history ends."""

    pages: tuple[tuple[SignatureEntry, ...], ...]
    baseline: bool


def cursor_of(state: TargetState | None) -> Cursor | None:
    if not state or state.get("cursor") is None:
        return None
    return Cursor.from_json(state["cursor"])


class SignaturesSource:
    name = "signatures"
    rule_kinds: tuple[str, ...] = ("new_transactions",)

    def targets(self, rules: Sequence[Any]) -> list[str]:
        return sorted({address for rule in self._rules(rules) for address in rule.addresses})

    async def observe(
        self, ledger: LedgerReader, target: str, state: TargetState | None
    ) -> SignaturesObservation:
        cursor = cursor_of(state)
        if cursor is None:
            newest = await ledger.get_signatures_for_address(target, limit=1)
            return SignaturesObservation(pages=(tuple(newest),), baseline=True)
        pages: list[tuple[SignatureEntry, ...]] = []
        fetched: set[str] = set()
        before: str | None = None
        while True:
            # Any failure propagates: nothing is committed and the cursor stays put.
            page = tuple(
                await ledger.get_signatures_for_address(
                    target, before=before, until=cursor.sig, limit=PAGE_LIMIT
                )
            )
            if page and all(entry.signature in fetched for entry in page):
                # A node ignoring `before` would loop forever; committing what we have would
                # skip the entries between: fail this round instead.
                raise BadResponse(f"{METHOD} paging made no progress", method=METHOD)
            pages.append(page)
            fetched.update(entry.signature for entry in page)
            if page_is_last(cursor, page, PAGE_LIMIT):
                return SignaturesObservation(pages=tuple(pages), baseline=False)
            before = page[-1].signature

    def tip(self, observation: SignaturesObservation) -> int | None:
        return None  # an address's own entries are what is judged, not a reference

    def doubt(
        self,
        state: TargetState | None,
        observation: SignaturesObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        entries = [entry for page in observation.pages for entry in page]
        for entry in entries:
            if entry.block_time is not None and entry.block_time > now + MAX_CLOCK_AHEAD:
                reason = f"{entry.signature} has a blockTime more than a day in the future"
                return Doubt(reason, picture_of("future", entry.signature), confirmable=False)
        # The highest slot a real entry can have: from the cluster's tip, and from the cursor's
        # own slot and time (a first poll has only the tip).
        bounds = [tip.bound(now)] if tip is not None else []
        cursor = cursor_of(state)
        slot_time = (state or {}).get("slot_time")
        if cursor is not None and cursor.slot is not None and slot_time is not None:
            bounds.append(cursor.slot + slot_allowance(now - float(slot_time)))
        if not bounds:
            return None
        for entry in entries:
            if entry.slot > min(bounds):
                reason = f"{entry.signature} is at slot {entry.slot}, beyond {min(bounds)}"
                return Doubt(reason, picture_of("ahead", entry.signature), confirmable=False)
        return None

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: SignaturesObservation,
        now: float,
    ) -> StepOutcome:
        cursor = cursor_of(state)
        if observation.baseline or cursor is None:
            first_page = observation.pages[0] if observation.pages else ()
            newest = max(first_page, key=lambda entry: entry.slot, default=None)
            slot_time = None if newest is None else newest.block_time
            return StepOutcome(state=_state(baseline_cursor(first_page), slot_time))
        fresh, new_cursor = new_signatures(cursor, observation.pages)
        if not fresh:
            return StepOutcome(state=_state(new_cursor, (state or {}).get("slot_time")))
        alerts = tuple(
            _alert(rule, target, fresh) for rule in self._rules(rules) if target in rule.addresses
        )
        return StepOutcome(state=_state(new_cursor, fresh[0].block_time), alerts=alerts)

    def _rules(self, rules: Sequence[Any]) -> list[TransactionsRule]:
        return [cast(TransactionsRule, rule) for rule in rules if rule.kind in self.rule_kinds]


def _state(cursor: Cursor, slot_time: int | None) -> TargetState:
    return {"v": STATE_VERSION, "cursor": cursor.to_json(), "slot_time": slot_time}


def _alert(rule: TransactionsRule, address: str, fresh: Sequence[SignatureEntry]) -> AlertMessage:
    newest = fresh[0]
    facts = {
        "address": address,
        "count": len(fresh),
        "failed": sum(1 for entry in fresh if entry.err is not None),
        "newest_slot": newest.slot,
        "newest_signature": newest.signature,
        "signatures": [_entry_facts(entry) for entry in fresh[:LISTED]],
        "more": max(0, len(fresh) - LISTED),
    }
    return make_alert(
        rule,
        subject=address,
        reason="event",
        dedup_key=f"{rule.name}|{address}|{newest.signature}|event",
        facts=facts,
        wording=transactions_text,
    )


def _entry_facts(entry: SignatureEntry) -> dict[str, Any]:
    return {
        "signature": entry.signature,
        "slot": entry.slot,
        "failed": entry.err is not None,
        "err": entry.err,
        "memo": entry.memo,
        "block_time": entry.block_time,
    }


SOURCE = SignaturesSource()
