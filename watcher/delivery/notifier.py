"""Where a message goes out: the ``Notifier`` seam between the sender and a notification library.

The sender (``watcher.delivery.outbox_sender``) decides what to send, when, and what an
outcome means for the outbox; a notifier only sends one message to one URL and says how it went.
The daemon's notifier sends ``alertmanager://`` and ``webhook://`` URLs itself
(``watcher.delivery.alertmanager``, ``watcher.delivery.webhook``) and every other URL through
Apprise (``watcher.delivery.apprise_adapter``); tests can pass their own, as httpx's transports
are passed to a client.

A message is its words (title, body, tone) and the alerts it tells of, as stored: a channel that
speaks in alerts rather than in words (Alertmanager, the structured webhook), or that must tie a
resolution to the firing it ends (PagerDuty's dedup key, Opsgenie's alias), reads them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from watcher.core.events import AlertMessage, Severity

# How a message looks in a channel (Apprise's notify type: its colour and icon): its severity,
# or "resolved" for the end of an episode (Apprise's success type), whatever its severity.
Tone = Severity | Literal["resolved"]


EVENT_ID_CHARS = 16  # 64 bits of a hash: short for a label, a collision among events negligible


def event_id(alert: AlertMessage) -> str:
    """An event's own short, stable id: the first 16 hex digits of the SHA-256 of its
    ``dedup_key`` (unique across the history, but as long as a transaction's signature). The
    same on every post, every run and every instance, since it comes from the stored alert:
    Alertmanager's ``event_id`` label and PagerDuty's and Opsgenie's key of the event."""
    return hashlib.sha256(alert.dedup_key.encode("utf-8")).hexdigest()[:EVENT_ID_CHARS]


@dataclass(frozen=True)
class StoredAlert:
    """One alert a message tells of, as the outbox keeps it: its values and when it was
    queued (the moment the step that produced it committed)."""

    alert: AlertMessage
    created_at: float


@dataclass(frozen=True)
class Message:
    """One message to one URL: its words (``title``, ``body``, ``tone``), its id
    (``notification``: the same on every attempt, for a receiver to deduplicate on) and the
    alerts it tells of, in order (none for a message that is no alert, such as
    ``watcher notify-test``'s)."""

    title: str
    body: str
    tone: Tone
    notification: str
    alerts: Sequence[StoredAlert] = ()


@dataclass(frozen=True)
class Outcome:
    """How one send went: accepted (``refused`` is None), or refused and why (a text with no
    secret in it). ``final``: the URL can never be sent to (retrying is pointless)."""

    refused: str | None = None
    final: bool = False

    @property
    def accepted(self) -> bool:
        return self.refused is None


ACCEPTED = Outcome()


def refused(reason: str, *, final: bool = False) -> Outcome:
    return Outcome(reason, final)


class Notifier(Protocol):
    def send(self, url: str, message: Message) -> Outcome:
        """Send ``message`` to ``url`` and wait for its answer (called in a thread of its own;
        the caller bounds the wait)."""
        ...


class ByScheme:
    """Each URL to the notifier registered for its scheme (``alertmanager://``,
    ``webhook://``: the channels watcher posts itself), every other to ``other`` (Apprise)."""

    def __init__(self, schemes: Mapping[str, Notifier], other: Notifier) -> None:
        self.schemes = {scheme.lower(): notifier for scheme, notifier in schemes.items()}
        self.other = other

    def send(self, url: str, message: Message) -> Outcome:
        scheme = url.split("://", 1)[0].lower()
        return self.schemes.get(scheme, self.other).send(url, message)
