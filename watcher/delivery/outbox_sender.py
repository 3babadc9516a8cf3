"""Delivery: one worker per URL, retried from the outbox.

The sender claims due deliveries and hands each URL's to that URL's own worker task (a URL
whose worker is busy is not claimed for), which sends them through the notifier (Apprise:
``watcher.delivery.apprise_adapter``; the seam: ``watcher.delivery.notifier``), each send
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
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from watcher.alerting.builtin import StateHealth
from watcher.config.sections import DeliverySettings
from watcher.core.clock import Clock
from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import DeliveryRow, Destination
from watcher.delivery import alertmanager, digest, webhook
from watcher.delivery.alertmanager import (
    TTL_REPOSTS,
    AlertmanagerNotifier,
    Reposter,
)
from watcher.delivery.apprise_adapter import AppriseNotifier, protect_delivery_logs
from watcher.delivery.channels import Channels
from watcher.delivery.notifier import BoundedSends, ByScheme, Notifier
from watcher.delivery.url_worker import (
    DB_RETRY_FIRST,
    DB_RETRY_MAX,
    DeliveryMetrics,
    RetryPolicy,
    StoreCalls,
    UrlWorker,
)
from watcher.delivery.webhook import WebhookNotifier
from watcher.state.interface import LeaseStore, OutboxStore, SilenceStore

log = structlog.get_logger(__name__)

# One digest gathers at most this many alerts; more go out in the next one.
MAX_DIGEST_ROWS = 500

# The settings' own defaults (``DeliverySettings``), for a sender built without settings.
DELIVERY_DEFAULTS = DeliverySettings()


class SenderStore(OutboxStore, LeaseStore, SilenceStore, Protocol):
    """What the sender asks of the store: the outbox, which targets this instance holds (the
    Alertmanager channel re-posts only the alerts of its own shards) and the silences in force
    (it re-posts none they cover)."""


@dataclass(frozen=True)
class SendSettings:
    """How the sender works through the outbox: ``delivery``, when a refused message is tried
    again and given up, how long one send may take, how often Alertmanager is told again (the
    settings' ``delivery``); ``random``, the backoff's jitter in [0, 1); ``batch``, the most
    deliveries one claim takes; ``db_retry``, the first and longest wait before a failed
    database operation is tried again."""

    delivery: DeliverySettings = DELIVERY_DEFAULTS
    random: Callable[[], float] = random_module.random
    batch: int = 100
    db_retry: tuple[float, float] = (DB_RETRY_FIRST, DB_RETRY_MAX)


SEND_DEFAULTS = SendSettings()


class Sender:
    """Sends the outbox's due deliveries: one worker task per URL, so each destination
    progresses on its own; each send is bounded by ``send_timeout``.

    Every database operation of a worker is retried while the error is transient (locked,
    disk full: ``watcher.core.errors``), recorded in ``state_health``; a send the URL accepted is
    marked sent before anything else, and never sent again because the mark had to wait.
    ``more_due`` (its own event when not given) is set each time a worker finishes: its URL may
    have more due.
    """

    def __init__(
        self,
        store: SenderStore,
        channels: Channels,
        *,
        clock: Clock,
        settings: SendSettings = SEND_DEFAULTS,
        metrics: DeliveryMetrics | None = None,
        state_health: StateHealth | None = None,
        notifier: Notifier | None = None,
        more_due: asyncio.Event | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._batch = settings.batch
        self._metrics = metrics
        self.more_due = more_due or asyncio.Event()
        self.state_health = state_health or StateHealth()
        delivery = settings.delivery
        repost_every = delivery.alertmanager_repost_every
        if notifier is None:
            posted_here = AlertmanagerNotifier(firing_ttl=TTL_REPOSTS * repost_every)
            hooks = WebhookNotifier()
            notifier = ByScheme(
                {
                    **dict.fromkeys(alertmanager.SCHEMES, posted_here),
                    **dict.fromkeys(webhook.SCHEMES, hooks),
                },
                AppriseNotifier(),
            )
        self._workers: dict[str, asyncio.Task[int]] = {}
        # Why a worker died (not a cancellation): the daemon's supervisor stops on it.
        self.failure: BaseException | None = None
        self._url_worker = UrlWorker(
            db=StoreCalls(store, self.state_health, clock, settings.db_retry),
            sends=BoundedSends(notifier, delivery.send_timeout),
            policy=RetryPolicy(
                delivery.first_retry, delivery.max_backoff, delivery.deadline, settings.random
            ),
            channels=channels,
            metrics=metrics,
        )
        self.use(channels)
        self._requeued = False  # the previous process's interrupted sends: before the first claim
        # Alertmanager forgets what it is not told again: the standing alerts, re-posted, but
        # those a watcher silence covers (they then end there).
        self.reposter = Reposter(
            store.standing_alerts,
            store.holds,
            lambda: self.channels.urls,
            clock,
            active_silences=store.active_silences,
            every=repost_every,
        )

    @property
    def channels(self) -> Channels:
        """The channels in force."""
        return self._url_worker.channels

    def use(self, channels: Channels) -> None:
        """Put ``channels`` in force (at start, and on reload): the workers read them at their
        next message. Pending deliveries to a URL that is gone are given up with
        NOT_CONFIGURED when their turn comes."""
        self._url_worker.channels = channels
        protect_delivery_logs(channels.urls.values())

    def destinations(self, alert: AlertMessage) -> list[Destination]:
        """Every URL the alert goes to by the channels in force (``Channels.destinations``)."""
        return self.channels.destinations(alert)

    async def send_due(self) -> int:
        """Start the workers for what is due now and wait for them; returns how many
        deliveries they delivered. (The daemon calls ``dispatch`` and does not wait.)"""
        started = await self.dispatch()
        if not started:
            return 0
        # Shielded: a cancelled caller does not cut a send in half; drain() waits for it.
        counts = await asyncio.shield(asyncio.gather(*started))
        return sum(counts)

    async def dispatch(self) -> list[asyncio.Task[int]]:
        """Claim the due deliveries of every URL that has no worker running and start one
        worker per URL. Raises ``StateError`` when the claim failed (rolled back: nothing
        claimed); the caller records it and tries again later. The first call puts back first
        what the previous process left mid-send."""
        if self._url_worker.stopping:
            return []
        if self.channels.has_alertmanager:  # else no round to start, at each wake
            self.reposter.maybe_start()
        if not self._requeued:
            # The previous process may have stopped mid-send: those rows go out again.
            requeued = await self._store.requeue_interrupted()
            self._requeued = True
            if requeued:
                log.warning("requeued deliveries interrupted by the last stop", count=requeued)
        busy = self._busy_urls()
        claiming = time.monotonic()
        rows = await self._store.claim_due(
            self._clock(), self._batch, group_limit=MAX_DIGEST_ROWS, skip_urls=busy
        )
        if self._metrics is not None:
            self._metrics.claimed(time.monotonic() - claiming)
        if rows:
            self.state_health.succeeded(self._clock())
        by_url: dict[str, list[list[DeliveryRow]]] = {}
        for message in digest.batches(rows):
            by_url.setdefault(message[0].url_id, []).append(message)
        started = []
        for url_id, queue in by_url.items():
            task = asyncio.create_task(
                self._url_worker.send_in_order(queue), name=f"send to {url_id}"
            )
            self._workers[url_id] = task
            task.add_done_callback(self._worker_done)
            started.append(task)
        return started

    async def next_due(self) -> float | None:
        """When this sender next has work that no wake (``more_due``) announces: the earliest
        pending delivery to a URL whose worker is idle falls due, or the next Alertmanager
        re-post round (clock time); None: nothing is pending. Raises ``StateError`` as
        ``dispatch`` does."""
        due = await self._store.next_due(skip_urls=self._busy_urls())
        repost = self.reposter.next_round_at() if self.channels.has_alertmanager else None
        return min((at for at in (due, repost) if at is not None), default=None)

    @property
    def sending(self) -> bool:
        """Whether a worker is still at work: its end sets ``more_due``."""
        return bool(self._workers)

    def _busy_urls(self) -> list[str]:
        return [url_id for url_id, task in self._workers.items() if not task.done()]

    def _worker_done(self, task: asyncio.Task[int]) -> None:
        for url_id, worker in list(self._workers.items()):
            if worker is task:
                del self._workers[url_id]
        if not task.cancelled() and task.exception() is not None and self.failure is None:
            self.failure = task.exception()
        self.more_due.set()  # its URL may have more due: look again

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 (a grace period)
        """Stop starting sends; wait up to ``timeout`` for the sends in flight to finish.

        Rows not attempted go back to pending untouched; a send still running at the
        timeout stays claimed and is requeued by the next start (at-least-once).
        """
        self._url_worker.stopping = True
        self.reposter.cancel()
        tasks = [t for t in self._workers.values() if not t.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
