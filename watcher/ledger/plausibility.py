"""Is an answer that fits its model plausible against what came before? (pure)

Three kinds of wrong answer, three treatments (docs/operations.md):

- **Bad**: a value outside the documented ranges (a slot beyond u64 or ``2^40``, a stake above
  all the SOL there is, a key that is not base58 of the right length). The answer models refuse
  it (``watcher.ledger.models``): ``BadResponse``, retried, a failed call; never a step. A field
  that only informs (a blockTime in milliseconds or more than a day ahead, a memo, a commission)
  is instead that field unknown, the answer taken.
- **Impossible now** (``Doubt(confirmable=False)``): an answer that goes back in slots (a
  context slot older than the last one accepted: a lagging node behind a load balancer), a slot
  far ahead of what time allows since the last accepted one (``slot_allowance``). Ignored, never
  accepted as it is; the bound of "far ahead" grows with the time since the last accepted
  answer, so a real slot always gets in at last: no target is wedged for good. Besides a
  target's own last slot, the daemon keeps the highest slot any answer has shown (``SlotTip``:
  context slots, votes), which also bounds a first poll.
- **Doubtful** (``Doubt(confirmable=True)``): an answer that would turn the whole picture upside
  down: every holder gone at once, an empty cluster, no node in gossip, no vote account; or one
  entry of an address's history that cannot be taken (its signature or slot unreadable, or its
  slot further ahead than time allows). Not evidence while it is new; the *same* doubtful
  picture seen ``CONFIRM_POLLS`` polls in a row is accepted (a real mass change gets through,
  two polls late; an odd entry, which stays in the history, is then set aside and the rest
  taken, so one entry never mutes its address).

What is not accepted is logged (a warning once per stretch), counted as a failed call for the
endpoint's health (``rpc_unhealthy``), and the target's state does not advance: only the
streak of the doubtful picture is kept in it (under ``DOUBT_KEY``: ``watcher.core.events`` says
who writes which key), and the next accepted step drops it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from watcher.core.events import DOUBT_KEY, TargetState

CONFIRM_POLLS = 3  # the same doubtful picture this many polls in a row is accepted

# A slot may be ahead of the last accepted one by this margin plus MAX_SLOTS_PER_SECOND for each
# second since: four times the 2.5 slots a second of a real cluster (400 ms slots), plus days.
SLOT_MARGIN = 1_000_000
MAX_SLOTS_PER_SECOND = 10
MAX_CLOCK_AHEAD = 86_400  # a blockTime more than a day after the daemon's clock is wrong


@dataclass(frozen=True)
class Doubt:
    """Why an answer is not taken as evidence. ``picture``: a fingerprint of what the answer
    shows; the same picture again confirms it (when ``confirmable``)."""

    reason: str
    picture: str
    confirmable: bool = True
    # What the doubt is about (e.g. the entries a confirmed answer sets aside), kept with its
    # streak in the state (``judge``) for the step that takes the confirmed answer.
    entries: tuple[str, ...] = ()


@dataclass(frozen=True)
class SlotTip:
    """The highest slot an accepted answer has shown, and when it was seen."""

    slot: int
    at: float

    def bound(self, now: float) -> int:
        """The highest slot a real answer can show at ``now``."""
        return self.slot + slot_allowance(now - self.at)

    def after(self, slot: int | None, now: float) -> SlotTip:
        """This tip raised by an accepted answer at ``slot`` (None: the answer shows none)."""
        return self if slot is None or slot <= self.slot else SlotTip(slot, now)


@dataclass(frozen=True)
class Verdict:
    accept: bool
    seen: int  # polls in a row with this doubtful picture, this one included
    new_stretch: bool  # the first doubtful answer after an accepted one, or a new picture
    state: TargetState  # when not accepted: the previous state with the streak recorded


def picture_of(*parts: Any) -> str:
    """A short stable fingerprint of JSON-friendly values."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def slot_allowance(elapsed: float) -> int:
    """How far ahead of the last accepted slot a slot may be, ``elapsed`` seconds later."""
    return SLOT_MARGIN + int(MAX_SLOTS_PER_SECOND * max(0.0, elapsed))


def judge(state: TargetState | None, doubt: Doubt) -> Verdict:
    """What to do with a doubtful answer given the streak recorded in ``state``."""
    previous: dict[str, Any] = dict((state or {}).get(DOUBT_KEY) or {})
    same = previous.get("picture") == doubt.picture
    seen = int(previous.get("seen", 0)) + 1 if same else 1
    accept = doubt.confirmable and seen >= CONFIRM_POLLS
    record: dict[str, Any] = {"picture": doubt.picture, "reason": doubt.reason, "seen": seen}
    if doubt.entries:
        record["entries"] = list(doubt.entries)
    return Verdict(
        accept=accept,
        seen=seen,
        new_stretch=not same,
        state={**(state or {}), DOUBT_KEY: record},
    )


def older_slot(last: Any, slot: int | None) -> Doubt | None:
    """An answer read at a slot older than the last one taken is stale: never evidence, never
    confirmable (``last``: the slot stored with the state, if any)."""
    if last is None or slot is None or slot >= int(last):
        return None
    reason = f"stale answer: context slot {slot} is older than {last}"
    return Doubt(reason, picture_of("stale", slot), confirmable=False)
