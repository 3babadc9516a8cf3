"""The outbox's rows as plain values: where a delivery goes (an id, never the URL), what is due,
what became of each. The store fills them; the sender, the digests and the commands read them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from watcher.core.events import AlertMessage


def url_id(url: str) -> str:
    """A stable, non-reversible name for an Apprise URL: first 16 hex digits of its sha256.

    Apprise URLs carry tokens and passwords, so only this id is stored or logged.
    """
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Destination:
    """One Apprise URL of one channel. ``repr`` leaves the URL out so it cannot leak into logs."""

    channel: str
    url: str = field(repr=False)

    @property
    def url_id(self) -> str:
        return url_id(self.url)


@dataclass(frozen=True)
class ResolvedDestinations:
    """Where each of some alerts goes, resolved before the transaction that queues them (which
    may run on the store's own thread): a lookup over values, reading nothing a reload
    replaces. Looked up by identity: only the alerts it was resolved for."""

    by_alert: Mapping[int, tuple[Destination, ...]]  # by the alert's id()

    @classmethod
    def of(
        cls,
        alerts: Iterable[AlertMessage],
        destinations: Callable[[AlertMessage], Sequence[Destination]],
    ) -> ResolvedDestinations:
        return cls({id(alert): tuple(destinations(alert)) for alert in alerts})

    def for_alert(self, alert: AlertMessage) -> Sequence[Destination]:
        """Where ``alert`` goes (``KeyError``: not one it was resolved for)."""
        return self.by_alert[id(alert)]


@dataclass(frozen=True)
class DeadLetterReports:
    """The dead letters to queue with deliveries given up, in the same transaction: the alert
    saying so for each delivery (``by_delivery``, by delivery id), sent to ``destinations``."""

    by_delivery: Mapping[int, AlertMessage]
    destinations: ResolvedDestinations

    @classmethod
    def of(
        cls,
        by_delivery: Mapping[int, AlertMessage],
        destinations: Callable[[AlertMessage], Sequence[Destination]],
    ) -> DeadLetterReports:
        """The reports, each letter's destinations resolved now by ``destinations``."""
        return cls(by_delivery, ResolvedDestinations.of(by_delivery.values(), destinations))

    def letters_except(self, not_given_up: Collection[int]) -> list[AlertMessage]:
        """The dead letters to queue: none for a delivery not given up (gone, or no longer
        held), so each dead letter is reported once."""
        return [alert for id_, alert in self.by_delivery.items() if id_ not in not_given_up]


# Delivery statuses: pending (waiting for its next attempt), sending (claimed by the sender),
# sent, dead (given up). Alert statuses are derived from its deliveries: queued (nothing
# sent yet), partial (some sent, others waiting or dead), sent, dead (none sent, all given
# up), silenced (no destination at all).
DELIVERY_STATUSES = ("pending", "sending", "sent", "dead")
ALERT_STATUSES = ("queued", "partial", "sent", "dead", "silenced")


@dataclass(frozen=True)
class DeliveryRow:
    """A delivery due (or claimed) for sending, with what to send."""

    id: int
    alert_id: int
    channel: str
    url_id: str
    status: str
    attempts: int
    next_attempt_at: float
    created_at: float
    alert: AlertMessage  # what to send, as stored (worded once, before it was stored)
    # Rows with the same group_key and url_id go out together as one digest
    # (watcher.delivery.digest).
    group_key: str | None = None


@dataclass(frozen=True)
class GroupSends:
    """What decides when a digest group may send: its other rows already scheduled and its
    recent messages."""

    scheduled_at: float | None  # earliest next attempt of its pending rows not claimed now
    sent: tuple[float, ...]  # when its recent messages went out, oldest first


@dataclass(frozen=True)
class DeliveryStatus:
    channel: str
    url_id: str
    status: str
    attempts: int
    last_error: str | None
    sent_at: float | None


@dataclass(frozen=True)
class AlertRecord:
    """One line of the alert history, with the fate of each of its deliveries."""

    id: int
    created_at: float
    alert: AlertMessage  # as stored
    status: str
    deliveries: tuple[DeliveryStatus, ...]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (``watcher alerts --json``), one level deep."""
        alert = self.alert
        return {
            "id": self.id,
            "created_at": self.created_at,
            "rule": alert.rule,
            "severity": alert.severity,
            "subject": alert.subject,
            "reason": alert.reason,
            "dedup_key": alert.dedup_key,
            "title": alert.title,
            "body": alert.body,
            "facts": alert.facts,
            "status": self.status,
            "deliveries": [asdict(delivery) for delivery in self.deliveries],
        }
