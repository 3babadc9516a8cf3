"""Silences: an operator's "I know, stop telling me" for one rule (optionally one subject) for
a while, as in Alertmanager.

A silenced alert is still recorded in the history (status ``silenced``, with the silence that
muted it in its facts), but gets no delivery. Silences live in SQLite (``Store.add_silence``)
and are managed with ``watcher silence add|list|expire``; the daemon reads the active ones
before each commit, so a silence added while it runs takes effect on the next poll.

Pure: the caller passes ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from watcher.alerting.events import AlertMessage

# The key of an alert's facts that names the silence which muted it.
SILENCE_FACT = "silenced_by"


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


def silenced_by(silences: Iterable[Silence], alert: AlertMessage, now: float) -> Silence | None:
    """The first silence active at ``now`` that mutes ``alert``, else ``None``."""
    for silence in silences:
        if silence.matches(alert) and silence.is_active(now):
            return silence
    return None


def is_silenced(alert: AlertMessage) -> bool:
    """Whether ``mark_silenced`` marked this alert (it then gets no delivery)."""
    return SILENCE_FACT in alert.facts


def mark_silenced(
    alerts: Iterable[AlertMessage], silences: Iterable[Silence], now: float
) -> list[AlertMessage]:
    """The alerts, each muted one carrying its silence in its facts (kept in the history)."""
    active = [silence for silence in silences if silence.is_active(now)]
    marked = []
    for alert in alerts:
        silence = silenced_by(active, alert, now)
        if silence is not None:
            alert = replace(alert, facts={**alert.facts, SILENCE_FACT: silence.as_fact()})
        marked.append(alert)
    return marked
