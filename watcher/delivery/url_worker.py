"""One URL's worker: its claimed messages, in order, through the notifier; each outcome recorded.

A URL has at most one worker task at a time (``UrlWorker.send_in_order``). A
message the URL accepted is marked sent right away (the shorter that window, the fewer repeats a
crash can cause); a refused one is rescheduled with backoff (``outbox.next_attempt``) and the
URL's later messages wait behind it; past the deadline it is given up and reported to the
fallback channels (``digest.letters``). A digest group whose time has not come goes back to wait
(``digest.release_at``) without holding up the others.

Every database operation is retried while its error is transient (``StoreCalls``): a send the URL
accepted is never sent again because its mark had to wait. A delivery whose row was deleted while
its message was in flight is logged (a warning with its id) and skipped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol, TypeVar

import structlog

from watcher.alerting.builtin import StateHealth
from watcher.core.clock import Clock
from watcher.core.errors import RetryPauses, StateError
from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import (
    DeadLetterReports,
    DeliveryRow,
    Destination,
)
from watcher.delivery import digest, outbox
from watcher.delivery.apprise_adapter import REJECTED_URL, notification_id
from watcher.delivery.channels import Channels
from watcher.delivery.notifier import BoundedSends, Message, StoredAlert
from watcher.state.interface import GiveUp, OutboxStore

log = structlog.get_logger(__name__)
# What became of a delivery given up is said as the sender's.
sender_log = structlog.get_logger("watcher.delivery.outbox_sender")

NOT_CONFIGURED = "destination no longer configured"
# Retrying a failed database operation: first wait, longest wait (seconds).
DB_RETRY_FIRST = 0.5
DB_RETRY_MAX = 30.0
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """When a refused message is tried again, and when it is given up."""

    first_retry: float
    max_backoff: float
    deadline: float
    random: Callable[[], float]  # jitter in [0, 1)


@dataclass
class StoreCalls:
    """Store calls retried with backoff while the database error is transient (locked, disk
    full), each failure and recovery recorded in ``state_health``; a permanent error is raised
    as ``PermanentStateError``."""

    store: OutboxStore
    state_health: StateHealth
    clock: Clock
    delays: tuple[float, float] = (DB_RETRY_FIRST, DB_RETRY_MAX)

    async def run(
        self, operation: str, call: Callable[[], Awaitable[T]], *, writes: bool = True
    ) -> T:
        """Run a store call; a transient database error (rolled back) is recorded and retried
        with backoff until it works, a permanent one is raised as ``PermanentStateError``."""
        pauses: RetryPauses | None = None  # made at the first failure: most calls work
        while True:
            try:
                result = await call()
            except StateError as exc:
                error = exc.during(operation)
                self.state_health.failed(error, self.clock())
                if not error.transient:
                    raise error from exc
                pauses = pauses or RetryPauses(*self.delays)
                await pauses.sleep()
                continue
            if writes:
                self.state_health.succeeded(self.clock())
            return result


class DeliveryMetrics(Protocol):
    """What the sender counts (``watcher.service.metrics.Metrics``)."""

    def claimed(self, seconds: float) -> None:
        """One claim of due deliveries took ``seconds``."""

    def delivered(self, channel: str, outcome: str) -> None:
        """One message to a URL of ``channel``: ``outcome`` "sent" or "failed"."""

    def given_up(self, row: DeliveryRow, error: str) -> None:
        """A delivery given up (dead) after ``error``."""


@dataclass
class UrlWorker:
    """What every URL's worker shares. ``channels`` is the value in force, replaced whole on
    reload; ``stopping`` is set once the sender stops starting sends."""

    db: StoreCalls
    sends: BoundedSends
    policy: RetryPolicy
    channels: Channels
    metrics: DeliveryMetrics | None = None
    stopping: bool = False

    @property
    def _store(self) -> OutboxStore:
        return self.db.store

    def _clock(self) -> float:
        return self.db.clock()

    async def send_in_order(self, queue: list[list[DeliveryRow]]) -> int:
        """One URL's messages, in order; after a failure the rest wait behind it. A digest
        group whose time has not come goes back to wait, without holding up the others."""
        sent = 0
        for index, rows in enumerate(queue):
            if self.stopping:
                rest = [r.id for later in queue[index:] for r in later]
                await self.db.run("release deliveries", partial(self._store.release, rest))
                break
            notes = await self._pace(rows)
            if notes is None:
                continue
            delivered, retry_at = await self._send_message(rows, notes)
            if delivered:
                sent += len(rows)
            elif retry_at is not None:
                rest = [r.id for later in queue[index + 1 :] for r in later]
                await self.db.run(
                    "release deliveries",
                    partial(self._store.release, rest, not_before=retry_at),
                )
                break
        return sent

    async def _pace(self, rows: list[DeliveryRow]) -> list[str] | None:
        """The notes a grouped message carries, or None when its group must wait (the rows
        are put back until its time, joining the group's rows already waiting)."""
        newest = rows[-1]
        if newest.group_key is None or newest.alert.grouping is None:
            return []
        group_key, url_id = newest.group_key, newest.url_id
        group = await self.db.run(
            "read digest group", lambda: self._store.group_sends(group_key, url_id), writes=False
        )
        first_queued = min(row.created_at for row in rows)
        now = self._clock()
        if group.scheduled_at is not None and group.scheduled_at > now:
            due = group.scheduled_at  # join the group's rows already waiting (or retrying)
        else:
            # The newest row carries the rule's grouping as it is now.
            due = digest.release_at(newest.alert.grouping, first_queued, group.sent)
        if due > now:
            ids = [row.id for row in rows]
            release = partial(self._store.release, ids, not_before=due)
            await self.db.run("release deliveries", release)
            return None
        return digest.pacing_notes(newest.alert.grouping, first_queued, group.sent, now)

    async def _send_message(
        self, rows: list[DeliveryRow], notes: list[str]
    ) -> tuple[bool, float | None]:
        """Send rows (one URL) as one message and record the outcome of each; returns
        (delivered, retry time if any)."""
        first = rows[0]
        channels = self.channels
        url = channels.urls.get(first.url_id)
        if url is None:
            await self._give_up(rows, NOT_CONFIGURED)
            return False, None
        title, body = digest.message_text(rows, notes, channels.presentation)
        message = Message(
            title,
            body,
            digest.tone_of(rows),
            notification_id(rows),
            [StoredAlert(row.alert, row.created_at) for row in rows],
        )
        outcome = await self.sends.send(first.url_id, url, message)
        if outcome.final:
            await self._give_up(rows, outcome.refused or REJECTED_URL)
            return False, None
        error = outcome.refused
        now = self._clock()
        ids = [row.id for row in rows]
        where = {"rule": first.alert.rule, "channel": first.channel, "url_id": first.url_id}
        if error is None:
            # First thing after the URL accepted: the shorter this window, the fewer repeats
            # a crash can cause. A failing mark is retried; the message is not sent again.
            group = None if first.group_key is None else (first.group_key, first.url_id)
            missing = await self.db.run(
                "mark sent", lambda: self._store.mark_sent(ids, now, group=group)
            )
            _log_gone(rows, missing, "sent")
            if self.metrics is not None:
                self.metrics.delivered(first.channel, "sent")
            if len(rows) == 1:
                log.info("delivered", alert_id=first.alert_id, id=message.notification, **where)
            else:
                log.info("delivered a digest", alerts=len(rows), id=message.notification, **where)
            return True, None
        if self.metrics is not None:
            self.metrics.delivered(first.channel, "failed")
        dead = [row for row in rows if outbox.is_dead(row.created_at, now, self.policy.deadline)]
        alive = [row for row in rows if row not in dead]
        if dead:
            await self._give_up(dead, error)
        if not alive:
            return False, None
        attempts = max(row.attempts for row in alive) + 1
        # The last retry happens at the deadline itself, not a backoff step after it.
        retry_at = min(
            outbox.next_attempt(
                attempts,
                now,
                jitter=self.policy.random(),
                first_retry=self.policy.first_retry,
                max_backoff=self.policy.max_backoff,
            ),
            min(row.created_at for row in alive) + self.policy.deadline,
        )
        alive_ids = [row.id for row in alive]
        missing = await self.db.run(
            "reschedule delivery", lambda: self._store.mark_retry(alive_ids, error, retry_at)
        )
        _log_gone(alive, missing, "retried")
        log.warning(
            "delivery failed, will retry",
            alert_id=first.alert_id if len(alive) == 1 else None,
            alerts=len(alive),
            attempts=attempts,
            retry_in=round(retry_at - now, 1),
            error=error,
            **where,
        )
        return False, retry_at

    async def _give_up(self, rows: list[DeliveryRow], error: str) -> None:
        """Mark the rows (one URL) dead and, in the same transaction, queue a dead letter for
        each to the fallback channels' other URLs; a dead letter's own death is only logged."""
        now = self._clock()
        failed_url = rows[0].url_id
        channels = self.channels

        def elsewhere(alert: AlertMessage) -> list[Destination]:
            return [d for d in channels.destinations(alert) if d.url_id != failed_url]

        letters = digest.letters(rows, error, channels.fallback, now, elsewhere)
        # Resolved here, not in the transaction: it may run on the store's own thread.
        reports = DeadLetterReports.of(letters, elsewhere)
        ids = [row.id for row in rows]
        missing = await self.db.run(
            "give up delivery",
            lambda: self._store.mark_dead(GiveUp(ids, error, now, reports)),
        )
        _log_gone(rows, missing, "given up")
        for row in rows:
            if row.id in missing:
                continue
            _log_given_up(row, error, reported=row.id in letters)
            if self.metrics is not None:
                self.metrics.given_up(row, error)


def _log_given_up(row: DeliveryRow, error: str, *, reported: bool) -> None:
    sender_log.error(
        "delivery given up",
        alert_id=row.alert_id,
        rule=row.alert.rule,
        channel=row.channel,
        url_id=row.url_id,
        attempts=row.attempts + 1,
        error=error,
        dead_letter="queued" if reported else "not reported",
    )
    if not reported:
        sender_log.error(
            "dead letter not reported: it was one itself"
            if digest.is_dead_letter(row)
            else "dead letter not reported: no fallback_channels URL but the failed one",
            alert_id=row.alert_id,
            rule=row.alert.rule,
            title=row.alert.title,
            channel=row.channel,
            url_id=row.url_id,
        )


def _log_gone(rows: Sequence[DeliveryRow], missing: Sequence[int], outcome: str) -> None:
    """A delivery row deleted while its message was in flight (by hand, or with its alert):
    its outcome has nowhere to go. Said once, and the URL's other messages go on."""
    for row in rows:
        if row.id in missing:
            log.warning(
                "delivery no longer in the database; skipped",
                delivery_id=row.id,
                alert_id=row.alert_id,
                rule=row.alert.rule,
                channel=row.channel,
                url_id=row.url_id,
                outcome=outcome,
            )
