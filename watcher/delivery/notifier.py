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

``BoundedSends``: a notifier's sends, each in a thread of its own and bounded in time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal, Protocol, TypeVar

import structlog

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


# -- sends bounded in time ---------------------------------------------------------------------
# Each send runs in a thread of its own, waited for at most ``timeout`` seconds. A send that
# timed out may still be running in its thread: until it ends, its URL gets no other send (no
# pile of hung threads); if it ends accepted, that counts as the delivery of its message.

T = TypeVar("T")
log = structlog.get_logger("watcher.delivery.outbox_sender")


def start_thread(send: Callable[[], T]) -> concurrent.futures.Future[T]:
    """Run one blocking send in its own daemon thread: a send that hangs holds only its own
    thread, and never keeps the process from exiting."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(send())
        except BaseException as exc:  # handed to the waiter
            future.set_exception(exc)

    threading.Thread(target=run, name="watcher-send", daemon=True).start()
    return future


class BoundedSends:
    """One notifier's sends, each bounded by ``timeout``, remembering those still running."""

    def __init__(self, notifier: Notifier, timeout: float) -> None:
        self.notifier = notifier
        self.timeout = timeout
        # url_id -> (notification id, send) of a send that timed out while still running.
        self._running: dict[str, tuple[str, concurrent.futures.Future[Outcome]]] = {}

    async def send(self, url_id: str, url: str, message: Message) -> Outcome:
        """One attempt, bounded by ``send_timeout``. A send that timed out may still be
        running in its thread: until it ends, its URL gets no other send (no pile of hung
        threads); if it ends accepted, that counts as this message's delivery."""
        abandoned = self._running.get(url_id)
        if abandoned is not None:
            previous, running = abandoned
            if not running.done():
                return refused(
                    f"the previous send, timed out ({self.timeout:g}s), is still running"
                )
            del self._running[url_id]
            if previous == message.notification and _accepted(running):
                log.info("a timed-out send was accepted after all", url_id=url_id)
                return ACCEPTED
        running = start_thread(partial(self.notifier.send, url, message))
        try:
            return await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(running)), self.timeout
            )
        except TimeoutError:
            self._running[url_id] = (message.notification, running)
            return refused(f"no answer within {self.timeout:g}s (delivery.send_timeout)")
        except asyncio.CancelledError:
            self._running[url_id] = (message.notification, running)
            raise


def _accepted(send: concurrent.futures.Future[Outcome]) -> bool:
    return not send.cancelled() and send.exception() is None and send.result().accepted


def scheme(url: str) -> str:
    """The Apprise scheme of a URL, lower case (``slack``, ``json``...)."""
    return url.split("://", 1)[0].lower()
