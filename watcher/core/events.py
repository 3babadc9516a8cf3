"""Values passed between the stages: poll -> step (diff + rules + alerts) -> outbox -> sender.

Everything here is plain, immutable and JSON-friendly so that the pure stages can be tested with
tables and properties, and so that what reaches the outbox can be stored as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

Severity = Literal["info", "warning", "critical"]

# Why a notification exists. "event": a one-off occurrence (transactions, holder moves);
# "firing"/"resolved": the start and end of an episode of a state kind; "repeat": a reminder
# while an episode is still firing.
Reason = Literal["event", "firing", "resolved", "repeat"]

# A target's state is whatever its source needs to remember between polls (cursor, snapshot,
# per-rule references, episodes). It is stored as one JSON document per (source, target) and
# committed in the same transaction as the alerts it produced.
TargetState = dict[str, Any]

# Who writes which key of a target's state document. Every other key is the kind's own: its
# source's ``step`` writes it (a state kind's ``"v"`` and ``"episodes"`` through
# ``watcher.alerting.lifecycle``) and only that source reads it.
#
#   key          written by                             what it holds
#   "doubt"      watcher.ledger.plausibility (judge),   the streak of a doubtful picture held
#                committed by the target pipeline       back; a doubted poll writes only it, the
#                (watcher.service.target_pipeline)      next accepted step drops it
#   "set_aside"  the kind's step (transactions,         entries of the ledger's own that a
#                program_accounts)                      confirmed doubt set aside: taken, and not
#                                                       doubted again while listed
#   "_cadence"   watcher.budget.cadences (paced_state, a backing-off target's cadence; kinds
#                through the target pipeline)           never read it, the pipeline puts it back
#                                                       on every new state
#   "_since"     watcher.service.watch_starts, when the  when the watch of a history-reading
#                target is first asked for (the state's   target began (``WatchSince``): its
#                first row; never overwritten)            first poll notifies what came after;
#                                                       the first step's new state drops it
DOUBT_KEY: Final = "doubt"
SET_ASIDE_KEY: Final = "set_aside"
CADENCE_KEY: Final = "_cadence"
WATCH_SINCE_KEY: Final = "_since"


@dataclass(frozen=True)
class WatchSince:
    """When the watch of a target began: the daemon's start or the reload that first asked for
    it. ``at`` is Unix seconds; ``slot`` the cluster's slot at that moment when known (a lower
    bound: the highest slot seen by then), else None. Entries at or after it are new at the
    target's first poll, however late that poll comes; what came before is history."""

    at: float
    slot: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "slot": self.slot}

    @classmethod
    def of(cls, state: TargetState | None) -> WatchSince | None:
        """The watch's start kept in ``state`` (None: none kept, or unreadable)."""
        found = (state or {}).get(WATCH_SINCE_KEY)
        if not isinstance(found, dict) or not isinstance(found.get("at"), int | float):
            return None
        slot = found.get("slot")
        return cls(float(found["at"]), slot if isinstance(slot, int) else None)


@dataclass(frozen=True)
class Grouping:
    """How the alerts of an event rule are gathered, per destination, into digests
    (``watcher.delivery.digest``): the first waits ``wait`` seconds for company, then one message
    goes
    out; later ones go out at most once per ``interval``, and at most ``max_per_hour`` messages
    per rolling hour (the rest wait and go out together). ``kind`` (the rule's kind) picks the
    digest's wording."""

    kind: str
    wait: float = 0.0
    interval: float = 0.0
    max_per_hour: int | None = None


# The part of an inventory's dedup key that names it (``rule|target|inventory-N``): what
# ``AlertMessage.is_inventory`` reads, so that it holds for the alerts already stored too.
INVENTORY_PART: Final = "inventory-"


def inventory_key(rule: str, target: str, seq: int) -> str:
    """The dedup key of a rule's inventory of ``target``, taken at its ``seq``-th snapshot."""
    return f"{rule}|{target}|{INVENTORY_PART}{seq}"


@dataclass(frozen=True)
class AlertMessage:
    """One notification to deliver: the output of a step, the input of the outbox.

    ``dedup_key`` is unique across the whole history (``rule|subject|episode-or-event|reason``):
    the outbox refuses a second row with the same key, which makes re-running a step after a
    crash harmless.
    """

    rule: str
    severity: Severity
    subject: str
    reason: Reason
    dedup_key: str
    # Empty as a step says it (facts only); set once, by ``watcher.kinds.word``, before storing.
    title: str
    body: str
    channels: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)
    # None: sent on its own, at once (state kinds: firing, resolved, repeat).
    grouping: Grouping | None = None
    # What failed while wording it (a template, the default wording): noted in the body and
    # logged by the daemon; the alert goes out all the same
    # (``watcher.alerting.messages.render_checked``).
    wording_problems: tuple[str, ...] = ()

    @property
    def is_inventory(self) -> bool:
        """A rule's first poll telling what exists (``inventory: true``): information, not an
        incident. It goes to the rule's channels but never pages: no Alertmanager, PagerDuty
        or Opsgenie URL (``watcher.delivery.outbox_sender``), and a rule routed by severity
        sends it by its own (``info``: ``watcher.alerting.pipeline``)."""
        last = self.dedup_key.rsplit("|", 1)[-1]
        return self.reason == "event" and last.startswith(INVENTORY_PART)

    @property
    def group_key(self) -> str | None:
        """Alerts with the same key (and URL) share digests: one rule's events of one kind."""
        return None if self.grouping is None else f"{self.rule}|{self.grouping.kind}"


@dataclass(frozen=True)
class StepOutcome:
    """What one observation of one target amounts to: the state to keep and what to say."""

    state: TargetState
    alerts: tuple[AlertMessage, ...] = ()


# The key of an alert's facts that names the silence which muted it.
SILENCE_FACT = "silenced_by"
# The key of an alert's facts saying it stayed below its rule's thresholds (``reason``: the
# label of ``watcher_events_suppressed_total``, ``detail``: why, in words): recorded in the
# history as a silenced one is, sent nowhere.
BELOW_THRESHOLD_FACT = "below_threshold"


@dataclass(frozen=True)
class NewSilence:
    """A silence to add: mutes ``rule`` (for ``subject`` only, or every subject when ``None``)
    during ``[starts_at, ends_at)``; the store gives it its id and ``created_at``. The fields
    are in the order of the ``silences`` table's columns (``astuple`` gives the row to insert)."""

    rule: str
    subject: str | None
    starts_at: float
    ends_at: float
    comment: str
    created_by: str | None

    def added(self, silence_id: int, created_at: float) -> Silence:
        """The silence as stored under ``silence_id`` at ``created_at``."""
        return Silence(
            silence_id,
            self.rule,
            self.subject,
            self.starts_at,
            self.ends_at,
            self.comment,
            self.created_by,
            created_at,
        )


@dataclass(frozen=True)
class Silence:
    """Mutes ``rule`` (for ``subject`` only, or every subject when ``None``) during
    ``[starts_at, ends_at)``, unless expired early (``expired_at``)."""

    id: int
    rule: str
    subject: str | None
    starts_at: float
    ends_at: float
    comment: str
    created_by: str | None
    created_at: float
    expired_at: float | None = None

    def is_active(self, now: float) -> bool:
        if self.expired_at is not None and self.expired_at <= now:
            return False
        return self.starts_at <= now < self.ends_at

    def ended_at(self) -> float:
        """When it stopped (or will stop) muting: its end, or earlier when expired by hand."""
        return self.ends_at if self.expired_at is None else min(self.ends_at, self.expired_at)

    def matches(self, alert: AlertMessage) -> bool:
        return alert.rule == self.rule and self.subject in (None, alert.subject)

    def as_fact(self) -> dict[str, Any]:
        """What an alert records about the silence that muted it."""
        return {"id": self.id, "comment": self.comment, "ends_at": self.ends_at}

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rule": self.rule,
            "subject": self.subject,
            "starts_at": self.starts_at,
            "ends_at": self.ends_at,
            "comment": self.comment,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "expired_at": self.expired_at,
        }
