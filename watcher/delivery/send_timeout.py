"""Sends bounded in time: each in a thread of its own, waited for at most ``timeout`` seconds.

A send that timed out may still be running in its thread: until it ends, its URL gets no other
send (no pile of hung threads); if it ends accepted, that counts as the delivery of its message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import structlog

from watcher.delivery.notifier import ACCEPTED, Message, Notifier, Outcome, refused

log = structlog.get_logger("watcher.delivery.outbox_sender")


T = TypeVar("T")


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
