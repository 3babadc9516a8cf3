"""Delivery: one worker per URL, retried from the SQLite outbox.

The sender claims due deliveries and hands each URL's to that URL's own worker task (a URL
whose worker is busy is not claimed for), which sends them through the notifier (Apprise:
``watcher.delivery.apprise_notifier``; the seam: ``watcher.delivery.notifier``), each send
bounded by ``send_timeout`` (a slow URL never holds up another), and marks a delivery sent
right after its URL accepted it; otherwise it is rescheduled with backoff (``outbox``) until the
deadline, then given up ("dead") and reported to the fallback channels (a dead
letter). Deliveries to one URL go in the order they were queued; different URLs are served
concurrently. The due rows of one event rule for one URL go out together as one message, at
the pace its grouping allows (``watcher.delivery.digest``); each row is still marked on its own.

URLs carry secrets: only the channel name and the ``url_id`` are ever logged or stored, and
Apprise's own logs (and error texts) are scrubbed of every fragment of every configured URL.
"""

from __future__ import annotations

import asyncio
import random as random_module
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TypeVar

import structlog

from watcher.alerting.events import AlertMessage
from watcher.alerting.health import StateHealth
from watcher.alerting.messages import PLAIN, Presentation
from watcher.core.clock import Clock
from watcher.core.errors import state_error
from watcher.delivery import dead_letters, digest, outbox
from watcher.delivery.apprise_notifier import (
    REJECTED_URL,
    AppriseNotifier,
    protect_delivery_logs,
)
from watcher.delivery.bounded import BoundedSends
from watcher.delivery.notifier import Notifier
from watcher.delivery.outbox import DeliveryRow, Destination
from watcher.delivery.sending import notification_id
from watcher.state.store import Store

log = structlog.get_logger(__name__)

NOT_CONFIGURED = "destination no longer configured"
# One digest gathers at most this many alerts; more go out in the next one.
MAX_DIGEST_ROWS = 500

# -- the sender -------------------------------------------------------------------------------

# Retrying a failed database operation: first wait, longest wait (seconds).
DB_RETRY_FIRST = 0.5
DB_RETRY_MAX = 30.0
T = TypeVar("T")


class Sender:
    """Sends the outbox's due deliveries: one worker task per URL, so each destination
    progresses on its own; each send is bounded by ``send_timeout``.

    Every database operation of a worker is retried while the error is transient (locked,
    disk full: ``watcher.core.errors``), recorded in ``state_health``; a send the URL accepted is
    marked sent before anything else, and never sent again because the mark had to wait.
    """

    def __init__(
        self,
        store: Store,
        channels: Mapping[str, Sequence[str]],
        *,
        clock: Clock,
        first_retry: float = 2.0,
        max_backoff: float = 300.0,
        deadline: float = 86400.0,
        random: Callable[[], float] = random_module.random,
        batch: int = 100,
        send_timeout: float = 30.0,
        fallback_channels: Sequence[str] = (),
        on_dead: Callable[[DeliveryRow, str], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        on_result: Callable[[str, str], None] | None = None,  # (channel, "sent" | "failed")
        state_health: StateHealth | None = None,
        db_retry: tuple[float, float] = (DB_RETRY_FIRST, DB_RETRY_MAX),
        notifier: Notifier | None = None,
        presentation: Presentation = PLAIN,
    ) -> None:
        self._store = store
        # How digests show keys: labels and explorer links (the settings'; replaced on reload).
        self.presentation = presentation
        self._sends = BoundedSends(
            AppriseNotifier() if notifier is None else notifier, send_timeout
        )
        self.configure_channels(channels, fallback_channels)
        self._clock = clock
        self._first_retry = first_retry
        self._max_backoff = max_backoff
        self._deadline = deadline
        self._random = random
        self._batch = batch
        self._on_dead = on_dead
        self._on_idle = on_idle
        self._on_result = on_result
        self._db_retry = db_retry
        self.state_health = state_health or StateHealth()
        self._stopping = False
        self._workers: dict[str, asyncio.Task[int]] = {}
        # Why a worker died (not a cancellation): the daemon's supervisor stops on it.
        self.failure: BaseException | None = None
        # The previous process may have stopped mid-send: those rows go out again.
        requeued = store.requeue_interrupted()
        if requeued:
            log.warning("requeued deliveries interrupted by the last stop", count=requeued)

    def configure_channels(
        self, channels: Mapping[str, Sequence[str]], fallback_channels: Sequence[str] = ()
    ) -> None:
        """Set (at start) or replace (on reload) the channels. Pending deliveries to a URL that
        is gone are given up with NOT_CONFIGURED when their turn comes."""
        self._fallback_channels = tuple(fallback_channels)
        self._channels = {name: tuple(urls) for name, urls in channels.items()}
        self._urls = {outbox.url_id(url): url for urls in self._channels.values() for url in urls}
        protect_delivery_logs(self._urls.values())

    def destinations(self, alert: AlertMessage) -> list[Destination]:
        """Every URL of every channel the alert names; unknown channels were refused earlier."""
        return [
            Destination(channel, url)
            for channel in alert.channels
            for url in self._channels.get(channel, ())
        ]

    async def send_due(self) -> int:
        """Start the workers for what is due now and wait for them; returns how many
        deliveries they delivered. (The daemon calls ``dispatch`` and does not wait.)"""
        started = self.dispatch()
        if not started:
            return 0
        # Shielded: a cancelled caller does not cut a send in half; drain() waits for it.
        counts = await asyncio.shield(asyncio.gather(*started))
        return sum(counts)

    def dispatch(self) -> list[asyncio.Task[int]]:
        """Claim the due deliveries of every URL that has no worker running and start one
        worker per URL. Raises ``sqlite3.Error`` when the claim failed (rolled back: nothing
        claimed); the caller records it and tries again later."""
        if self._stopping:
            return []
        busy = [url_id for url_id, task in self._workers.items() if not task.done()]
        rows = self._store.claim_due(
            self._clock(), self._batch, group_limit=MAX_DIGEST_ROWS, skip_urls=busy
        )
        if rows:
            self.state_health.succeeded(self._clock())
        by_url: dict[str, list[list[DeliveryRow]]] = {}
        for message in digest.batches(rows):
            by_url.setdefault(message[0].url_id, []).append(message)
        started = []
        for url_id, queue in by_url.items():
            task = asyncio.create_task(self._send_in_order(queue), name=f"send to {url_id}")
            self._workers[url_id] = task
            task.add_done_callback(self._worker_done)
            started.append(task)
        return started

    def _worker_done(self, task: asyncio.Task[int]) -> None:
        for url_id, worker in list(self._workers.items()):
            if worker is task:
                del self._workers[url_id]
        if not task.cancelled() and task.exception() is not None and self.failure is None:
            self.failure = task.exception()
        if self._on_idle is not None:
            self._on_idle()  # its URL may have more due: look again

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 (a grace period)
        """Stop starting sends; wait up to ``timeout`` for the sends in flight to finish.

        Rows not attempted go back to pending untouched; a send still running at the
        timeout stays claimed and is requeued by the next start (at-least-once).
        """
        self._stopping = True
        tasks = [t for t in self._workers.values() if not t.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)

    async def _db(self, operation: str, call: Callable[[], T], *, writes: bool = True) -> T:
        """Run a store call; a transient database error (rolled back) is recorded and retried
        with backoff until it works, a permanent one is raised as ``PermanentStateError``."""
        delay, longest = self._db_retry
        while True:
            try:
                result = call()
            except sqlite3.Error as exc:
                error = state_error(exc, operation)
                self.state_health.failed(error, self._clock())
                if not error.transient:
                    raise error from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, longest)
                continue
            if writes:
                self.state_health.succeeded(self._clock())
            return result

    async def _send_in_order(self, queue: list[list[DeliveryRow]]) -> int:
        """One URL's messages, in order; after a failure the rest wait behind it. A digest
        group whose time has not come goes back to wait, without holding up the others."""
        sent = 0
        for index, rows in enumerate(queue):
            if self._stopping:
                rest = [r.id for later in queue[index:] for r in later]
                await self._db("release deliveries", partial(self._store.release, rest))
                break
            notes = await self._pace(rows)
            if notes is None:
                continue
            delivered, retry_at = await self._send_message(rows, notes)
            if delivered:
                sent += len(rows)
            elif retry_at is not None:
                rest = [r.id for later in queue[index + 1 :] for r in later]
                await self._db(
                    "release deliveries",
                    partial(self._store.release, rest, not_before=retry_at),
                )
                break
        return sent

    async def _pace(self, rows: list[DeliveryRow]) -> list[str] | None:
        """The notes a grouped message carries, or None when its group must wait (the rows
        are put back until its time, joining the group's rows already waiting)."""
        newest = rows[-1]
        if newest.group_key is None or newest.grouping is None:
            return []
        group_key, url_id = newest.group_key, newest.url_id
        group = await self._db(
            "read digest group", lambda: self._store.group_sends(group_key, url_id), writes=False
        )
        first_queued = min(row.created_at for row in rows)
        now = self._clock()
        if group.scheduled_at is not None and group.scheduled_at > now:
            due = group.scheduled_at  # join the group's rows already waiting (or retrying)
        else:
            # The newest row carries the rule's grouping as it is now.
            due = digest.release_at(newest.grouping, first_queued, group.sent)
        if due > now:
            ids = [row.id for row in rows]
            await self._db("release deliveries", lambda: self._store.release(ids, not_before=due))
            return None
        return digest.pacing_notes(newest.grouping, first_queued, group.sent, now)

    async def _send_message(
        self, rows: list[DeliveryRow], notes: list[str]
    ) -> tuple[bool, float | None]:
        """Send rows (one URL) as one message and record the outcome of each; returns
        (delivered, retry time if any)."""
        first = rows[0]
        url = self._urls.get(first.url_id)
        if url is None:
            await self._give_up(rows, NOT_CONFIGURED)
            return False, None
        notification = notification_id(rows)
        title, body = digest.message_text(rows, notes, self.presentation)
        tone = digest.tone_of(rows)
        outcome = await self._sends.send(first.url_id, notification, url, title, body, tone)
        if outcome.final:
            await self._give_up(rows, outcome.refused or REJECTED_URL)
            return False, None
        error = outcome.refused
        now = self._clock()
        ids = [row.id for row in rows]
        where = {"rule": first.rule, "channel": first.channel, "url_id": first.url_id}
        if error is None:
            # First thing after the URL accepted: the shorter this window, the fewer repeats
            # a crash can cause. A failing mark is retried; the message is not sent again.
            group = None if first.group_key is None else (first.group_key, first.url_id)
            await self._db("mark sent", lambda: self._store.mark_sent(ids, now, group=group))
            if self._on_result is not None:
                self._on_result(first.channel, "sent")
            if len(rows) == 1:
                log.info("delivered", alert_id=first.alert_id, id=notification, **where)
            else:
                log.info("delivered a digest", alerts=len(rows), id=notification, **where)
            return True, None
        if self._on_result is not None:
            self._on_result(first.channel, "failed")
        dead = [row for row in rows if outbox.is_dead(row.created_at, now, self._deadline)]
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
                jitter=self._random(),
                first_retry=self._first_retry,
                max_backoff=self._max_backoff,
            ),
            min(row.created_at for row in alive) + self._deadline,
        )
        alive_ids = [row.id for row in alive]
        await self._db(
            "reschedule delivery", lambda: self._store.mark_retry(alive_ids, error, retry_at)
        )
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

        def elsewhere(alert: AlertMessage) -> list[Destination]:
            return [d for d in self.destinations(alert) if d.url_id != failed_url]

        reports = dead_letters.letters(rows, error, self._fallback_channels, now, elsewhere)
        ids, letters = [row.id for row in rows], list(reports.values())
        await self._db(
            "give up delivery",
            lambda: self._store.mark_dead(ids, error, now, letters, elsewhere),
        )
        for row in rows:
            dead_letters.log_given_up(row, error, reported=row.id in reports)
            if self._on_dead is not None:
                self._on_dead(row, error)
