"""One send through Apprise, bounded and identified: the blocking send in its own thread, the
outcome as an error text (scrubbed) or None, and the notification id a receiver can
deduplicate on (``X-Watcher-Id`` for webhooks)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import apprise

from watcher.core.outbox_rows import DeliveryRow
from watcher.core.redact import REDACTOR
from watcher.delivery.paces import paced

T = TypeVar("T")


async def send_through(
    client: apprise.Apprise,
    title: str,
    body: str,
    notify_type: apprise.NotifyType | None,
    *,
    timeout: float,  # noqa: ASYNC109 (handed to Apprise, per send)
) -> str | None:
    """Ask Apprise to deliver; ``None`` when the URL accepted, else why not (scrubbed)."""
    try:
        result = await client.async_notify(
            body=body,
            title=title,
            notify_type=notify_type or apprise.NotifyType.INFO,
            body_format=apprise.NotifyFormat.TEXT,
            timeout=timeout,
        )
    except Exception as exc:  # a plugin bug must not stop the sender
        return REDACTOR.redact(f"{type(exc).__name__}: {exc}")[:500]
    return _outcome(result)


def send_blocking(
    client: apprise.Apprise,
    title: str,
    body: str,
    notify_type: apprise.NotifyType | None,
    body_format: apprise.NotifyFormat = apprise.NotifyFormat.TEXT,
) -> str | None:
    """``send_through`` in the calling thread (a client built with ``service_timeout=0``
    sends right there: no shared pool, whose threads would outlive a timed-out wait)."""
    try:
        result = client.notify(
            body=body,
            title=title,
            notify_type=notify_type or apprise.NotifyType.INFO,
            body_format=body_format,
        )
    except Exception as exc:  # a plugin bug must not stop the sender
        return REDACTOR.redact(f"{type(exc).__name__}: {exc}")[:500]
    return _outcome(result)


def _outcome(result: Any) -> str | None:
    # apprise 2.2: an AppriseResult, true only when every service (here: our one URL)
    # reports SUCCESS; its status also tells FAILURE, TIMEOUT and NOMATCH apart.
    with result:
        if result:
            return None
        messages = [
            entry.message
            for entry in result.logs()
            if entry.level in ("WARNING", "ERROR", "CRITICAL")
        ]
        error = "; ".join(messages) or f"Apprise reported {result.status.name}"
    return REDACTOR.redact(error)[:500]


# -- the notification id ------------------------------------------------------------------------

ID_HEADER = "X-Watcher-Id"
# Apprise's webhook schemes send ``+Name=value`` URL parameters as HTTP headers.
_HEADER_SCHEMES = frozenset({"json", "jsons", "form", "forms", "xml", "xmls"})


def notification_id(rows: Sequence[DeliveryRow]) -> str:
    """The same id on every attempt of one message to one URL (its alerts' dedup keys and the
    URL's id): a receiver that saw it already can drop a repeat after a crash."""
    keys = sorted(row.alert.dedup_key or f"delivery-{row.id}" for row in rows)
    text = "\n".join([rows[0].url_id, *keys])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def with_id_header(url: str, notification: str) -> str | None:
    """The URL sending ``X-Watcher-Id: <id>``, for the webhook schemes; None for others."""
    if url.split("://", 1)[0].lower() not in _HEADER_SCHEMES:
        return None
    base, hash_mark, fragment = url.partition("#")
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}+{ID_HEADER}={notification}{hash_mark}{fragment}"


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


def new_client(url: str) -> apprise.Apprise | None:
    """An Apprise object for one URL, paced by what its service needs (``paces``), or None
    when Apprise does not accept the URL."""
    # service_timeout=0: Apprise sends in the calling thread (ours), see send_blocking.
    client = apprise.Apprise(asset=apprise.AppriseAsset(service_timeout=0))
    return paced(client) if client.add(url) else None
