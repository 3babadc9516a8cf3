"""Delivery through Apprise: one worker per URL, retried from the SQLite outbox.

The sender claims due deliveries and hands each URL's to that URL's own worker task (a URL
whose worker is busy is not claimed for), which sends them through Apprise, each send bounded by
``send_timeout`` (a slow URL never holds up another), and marks a delivery sent right after its
URL accepted it; otherwise it is rescheduled with backoff (``outbox``)
until the deadline, then given up ("dead") and reported to the fallback channels (a dead
letter). Deliveries to one URL go in the order they were queued; different URLs are served
concurrently. The due rows of one event rule for one URL go out together as one message, at
the pace its grouping allows (``watcher.delivery.digest``); each row is still marked on its own.

URLs carry secrets: only the channel name and the ``url_id`` are ever logged or stored, and
Apprise's own logs (and error texts) are scrubbed of every fragment of every configured URL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random as random_module
import sqlite3
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import apprise
import apprise.decorators
import structlog

from watcher.alerting.events import AlertMessage, Severity
from watcher.alerting.health import StateHealth
from watcher.core.clock import Clock
from watcher.core.errors import state_error
from watcher.core.redact import REDACTOR
from watcher.delivery import digest, outbox, sending
from watcher.delivery.outbox import Destination
from watcher.delivery.sending import notification_id, with_id_header
from watcher.delivery.sending import send_through as send_through  # for notify_check
from watcher.state.store import DeliveryRow, Store

log = structlog.get_logger(__name__)

NOT_CONFIGURED = "destination no longer configured"
REJECTED_URL = "Apprise does not accept this URL"
# One digest gathers at most this many alerts; more go out in the next one.
MAX_DIGEST_ROWS = 500

NOTIFY_TYPES: Mapping[Severity, apprise.NotifyType] = {
    "info": apprise.NotifyType.INFO,
    "warning": apprise.NotifyType.WARNING,
    "critical": apprise.NotifyType.FAILURE,
}

# -- message size --------------------------------------------------------------------------

# Longest message (title + newline + body) some services accept, by URL scheme.
MAX_MESSAGE_CHARS: Mapping[str, int] = {
    "tgram": 4096,
    "telegram": 4096,
    "discord": 2000,
}
TRUNCATED = "\n(truncated)"


def fit_for_url(url: str, title: str, body: str) -> tuple[str, str]:
    """Shorten the body (with a visible marker) so the message fits the service's limit."""
    limit = MAX_MESSAGE_CHARS.get(url.split("://", 1)[0].lower())
    if limit is None or len(title) + 1 + len(body) <= limit:
        return title, body
    title = title[: limit // 2]
    room = max(0, limit - len(title) - 1 - len(TRUNCATED))
    return title, body[:room] + TRUNCATED


# -- the console:// scheme (used by the demo) ---------------------------------------------

def console_notify(body: str, title: str, notify_type: str, *args: Any, **kwargs: Any) -> bool:
    """Print the notification to stdout: ``── title`` then the body (titles carry severity)."""
    print(f"── {title}\n{body}", file=sys.stdout, flush=True)
    return True


# Registered once, at import: Apprise refuses a second plugin for the same scheme.
apprise.decorators.notify(on="console", name="Watcher console")(  # type: ignore[no-untyped-call]
    console_notify
)


# -- keeping secrets out of logs ---------------------------------------------------------------

# Shorter parts are left alone: masking them would blank out ordinary words in every line.
_MIN_PASSWORD = 4
_MIN_TOKEN = 8


def secret_fragments(url: str) -> set[str]:
    """The parts of an Apprise URL that may be secrets: the whole URL, user and password,
    a host that is not a DNS name or IP (Telegram, Slack and Discord put tokens there), path
    segments and query values."""
    found = {url}
    try:
        parts = urlsplit(url)
    except ValueError:
        return found
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    if len(password) >= _MIN_PASSWORD:
        found.add(password)
    tokens = [
        user,
        *(p for p in hostport.split(":") if "." not in p and p != "localhost"),
        *parts.path.split("/"),
        *(value for _, value in parse_qsl(parts.query)),
        parts.fragment,
    ]
    found.update(t for t in tokens if len(t) >= _MIN_TOKEN)
    return found


class _RedactingFilter(logging.Filter):
    """Masks registered secrets in records of the libraries that handle delivery URLs, whatever
    handler (ours, pytest's, a user's) ends up rendering them."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = REDACTOR.redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


_FILTER = _RedactingFilter()
# A filter only sees records logged on its own logger, not those of its children.
_URL_LOGGERS = ("apprise", "urllib3", "urllib3.connectionpool", "urllib3.util.retry")


def protect_delivery_logs(urls: Iterable[str] = ()) -> None:
    """Register the URLs' secrets with the shared redactor and quiet the libraries that log URLs.

    Apprise logs each loaded URL (query tokens included) at DEBUG and progress at INFO;
    urllib3, under Apprise's HTTP plugins, logs each request line with its query at DEBUG.
    """
    for url in urls:
        REDACTOR.add(*secret_fragments(url))
    for name in ("apprise", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in _URL_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


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
    ) -> None:
        self._store = store
        self.configure_channels(channels, fallback_channels)
        self._clock = clock
        self._first_retry = first_retry
        self._max_backoff = max_backoff
        self._deadline = deadline
        self._random = random
        self._batch = batch
        self._send_timeout = send_timeout
        self._on_dead = on_dead
        self._on_idle = on_idle
        self._on_result = on_result
        self._db_retry = db_retry
        self.state_health = state_health or StateHealth()
        self._apprise: dict[str, apprise.Apprise] = {}
        self._stopping = False
        self._workers: dict[str, asyncio.Task[int]] = {}
        # url_id -> (notification id, send) of a send that timed out while still running.
        self._abandoned: dict[str, tuple[str, concurrent.futures.Future[str | None]]] = {}
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
        client = self._client(first.url_id, url, notification)
        if client is None:
            await self._give_up(rows, REJECTED_URL)
            return False, None
        title, body = fit_for_url(url, *digest.message_text(rows, notes))
        notify_type = NOTIFY_TYPES.get(digest.severity_of(rows))
        error = await self._send(first.url_id, notification, client, title, body, notify_type)
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

    async def _send(
        self,
        url_id: str,
        notification: str,
        client: apprise.Apprise,
        title: str,
        body: str,
        notify_type: apprise.NotifyType | None,
    ) -> str | None:
        """One attempt, bounded by ``send_timeout``. A send that timed out may still be
        running in its thread: until it ends, its URL gets no other send (no pile of hung
        threads); if it ends accepted, that counts as this message's delivery."""
        abandoned = self._abandoned.get(url_id)
        if abandoned is not None:
            previous, running = abandoned
            if not running.done():
                return f"the previous send, timed out ({self._send_timeout:g}s), is still running"
            del self._abandoned[url_id]
            if previous == notification and sending.accepted(running):
                log.info("a timed-out send was accepted after all", url_id=url_id)
                return None
        running = sending.start_thread(
            partial(sending.send_blocking, client, title, body, notify_type)
        )
        try:
            return await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(running)), self._send_timeout
            )
        except TimeoutError:
            self._abandoned[url_id] = (notification, running)
            return f"no answer within {self._send_timeout:g}s (delivery.send_timeout)"
        except asyncio.CancelledError:
            self._abandoned[url_id] = (notification, running)
            raise

    def _client(self, url_id: str, url: str, notification: str) -> apprise.Apprise | None:
        """The URL's Apprise object; the webhook schemes get one per message, carrying its id."""
        tagged = with_id_header(url, notification)
        if tagged is not None:
            client = sending.new_client(tagged)
            return client if client is not None else self._client_for(url_id, url)
        return self._client_for(url_id, url)

    def _client_for(self, url_id: str, url: str) -> apprise.Apprise | None:
        client = self._apprise.get(url_id)
        if client is None:
            client = sending.new_client(url)
            if client is None:
                return None
            self._apprise[url_id] = client
        return client

    async def _give_up(self, rows: list[DeliveryRow], error: str) -> None:
        """Mark the rows (one URL) dead and, in the same transaction, queue a dead letter for
        each to the fallback channels' other URLs; a dead letter's own death is only logged."""
        now = self._clock()
        failed_url = rows[0].url_id

        def elsewhere(alert: AlertMessage) -> list[Destination]:
            return [d for d in self.destinations(alert) if d.url_id != failed_url]

        reports: dict[int, AlertMessage] = {}
        for row in rows:
            if digest.is_dead_letter(row):
                continue
            letter = digest.dead_letter(row, error, channels=self._fallback_channels, now=now)
            if elsewhere(letter):
                reports[row.id] = letter
        ids, letters = [row.id for row in rows], list(reports.values())
        await self._db(
            "give up delivery",
            lambda: self._store.mark_dead(ids, error, now, letters, elsewhere),
        )
        for row in rows:
            log.error(
                "delivery given up",
                alert_id=row.alert_id,
                rule=row.rule,
                channel=row.channel,
                url_id=row.url_id,
                attempts=row.attempts + 1,
                error=error,
                dead_letter="queued" if row.id in reports else "not reported",
            )
            if row.id not in reports:
                log.error(
                    "dead letter not reported: it was one itself"
                    if digest.is_dead_letter(row)
                    else "dead letter not reported: no fallback_channels URL but the failed one",
                    alert_id=row.alert_id,
                    rule=row.rule,
                    title=row.title,
                    channel=row.channel,
                    url_id=row.url_id,
                )
            if self._on_dead is not None:
                self._on_dead(row, error)

