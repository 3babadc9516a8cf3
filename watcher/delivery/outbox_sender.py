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
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import structlog

from watcher.alerting.formatting import PLAIN, Presentation
from watcher.alerting.health import StateHealth
from watcher.config.sections import DeliverySettings
from watcher.core import outbox_rows
from watcher.core.clock import Clock
from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import DeliveryRow, Destination
from watcher.delivery import digest, paging
from watcher.delivery.alertmanager import (
    TTL_REPOSTS,
    AlertmanagerNotifier,
    AlertmanagerOrApprise,
    Reposter,
)
from watcher.delivery.apprise_notifier import AppriseNotifier, protect_delivery_logs
from watcher.delivery.notifier import Notifier
from watcher.delivery.send_timeout import BoundedSends
from watcher.delivery.url_worker import (
    DB_RETRY_FIRST,
    DB_RETRY_MAX,
    RetryPolicy,
    StoreCalls,
    UrlWorker,
)
from watcher.delivery.webhook import WebhookOr
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


class Sender:
    """Sends the outbox's due deliveries: one worker task per URL, so each destination
    progresses on its own; each send is bounded by ``send_timeout``.

    Every database operation of a worker is retried while the error is transient (locked,
    disk full: ``watcher.core.errors``), recorded in ``state_health``; a send the URL accepted is
    marked sent before anything else, and never sent again because the mark had to wait.
    """

    def __init__(
        self,
        store: SenderStore,
        channels: Mapping[str, Sequence[str]],
        *,
        clock: Clock,
        delivery: DeliverySettings = DELIVERY_DEFAULTS,
        random: Callable[[], float] = random_module.random,
        batch: int = 100,
        fallback_channels: Sequence[str] = (),
        on_dead: Callable[[DeliveryRow, str], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        on_result: Callable[[str, str], None] | None = None,  # (channel, "sent" | "failed")
        on_claim: Callable[[float], None] | None = None,  # seconds a claim took
        state_health: StateHealth | None = None,
        db_retry: tuple[float, float] = (DB_RETRY_FIRST, DB_RETRY_MAX),
        notifier: Notifier | None = None,
        presentation: Callable[[], Presentation] = lambda: PLAIN,
    ) -> None:
        """``delivery``: when a refused message is tried again and given up, how long one
        send may take, how often Alertmanager is told again (the settings' ``delivery``)."""
        self._store = store
        self.configure_channels(channels, fallback_channels)
        self._clock = clock
        self._batch = batch
        self._on_idle = on_idle
        self._on_claim = on_claim
        self.state_health = state_health or StateHealth()
        self._stopping = False
        repost_every = delivery.alertmanager_repost_every
        if notifier is None:
            notifier = WebhookOr(
                AlertmanagerOrApprise(
                    AppriseNotifier(),
                    AlertmanagerNotifier(firing_ttl=TTL_REPOSTS * repost_every),
                )
            )
        self._workers: dict[str, asyncio.Task[int]] = {}
        # Why a worker died (not a cancellation): the daemon's supervisor stops on it.
        self.failure: BaseException | None = None
        self._url_worker = UrlWorker(
            db=StoreCalls(store, self.state_health, clock, db_retry),
            sends=BoundedSends(notifier, delivery.send_timeout),
            policy=RetryPolicy(
                delivery.first_retry, delivery.max_backoff, delivery.deadline, random
            ),
            urls=lambda: self._urls,
            destinations=self.destinations,
            fallback_channels=lambda: self._fallback_channels,
            # How digests show keys: labels and explorer links (those in force, read at each).
            presentation=presentation,
            stopping=lambda: self._stopping,
            on_dead=on_dead,
            on_result=on_result,
        )
        self._requeued = False  # the previous process's interrupted sends: before the first claim
        # Alertmanager forgets what it is not told again: the standing alerts, re-posted, but
        # those a watcher silence covers (they then end there).
        self.reposter = Reposter(
            store.standing_alerts,
            store.holds,
            lambda: self._urls,
            clock,
            active_silences=store.active_silences,
            every=repost_every,
        )

    def configure_channels(
        self, channels: Mapping[str, Sequence[str]], fallback_channels: Sequence[str] = ()
    ) -> None:
        """Set (at start) or replace (on reload) the channels. Pending deliveries to a URL that
        is gone are given up with NOT_CONFIGURED when their turn comes."""
        self._fallback_channels = tuple(fallback_channels)
        self._channels = {name: tuple(urls) for name, urls in channels.items()}
        self._urls = {
            outbox_rows.url_id(url): url for urls in self._channels.values() for url in urls
        }
        protect_delivery_logs(self._urls.values())

    def destinations(self, alert: AlertMessage) -> list[Destination]:
        """Every URL of every channel the alert names (unknown channels were refused earlier),
        but those that page (``paging.pages``) for an inventory: information, not an
        incident, decided here, where an alert's URLs are known, for every engine and path."""
        return [
            Destination(channel, url)
            for channel in alert.channels
            for url in self._channels.get(channel, ())
            if not (alert.is_inventory and paging.pages(url))
        ]

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
        if self._stopping:
            return []
        self.reposter.maybe_start()
        if not self._requeued:
            # The previous process may have stopped mid-send: those rows go out again.
            requeued = await self._store.requeue_interrupted()
            self._requeued = True
            if requeued:
                log.warning("requeued deliveries interrupted by the last stop", count=requeued)
        busy = [url_id for url_id, task in self._workers.items() if not task.done()]
        claiming = time.monotonic()
        rows = await self._store.claim_due(
            self._clock(), self._batch, group_limit=MAX_DIGEST_ROWS, skip_urls=busy
        )
        if self._on_claim is not None:
            self._on_claim(time.monotonic() - claiming)
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
        self.reposter.cancel()
        tasks = [t for t in self._workers.values() if not t.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
