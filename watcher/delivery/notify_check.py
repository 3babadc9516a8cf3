"""``watcher notify-test``: send a test notification to every URL of one channel, right now.

Straight through Apprise, one Apprise object per URL (as the sender does; an
``alertmanager://`` URL gets one short info alert, ``watcher.delivery.alertmanager``), not
through the outbox: nothing is recorded and nothing is retried; the operator sees each URL's
outcome at once. URLs carry tokens, so a URL is only ever shown as its scheme and a host that
is a DNS name or an IP (else ``***``), plus its ``url_id``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import apprise

from watcher.core.outbox_rows import url_id
from watcher.core.redact import MASK, REDACTOR
from watcher.delivery import alertmanager, webhook
from watcher.delivery.apprise_adapter import REJECTED_URL, protect_delivery_logs, send_through
from watcher.delivery.notifier import Message

SEND_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class UrlOutcome:
    shown_as: str  # the URL with every possible secret left out
    error: str | None  # None: the URL accepted the notification

    def line(self) -> str:
        return f"{self.shown_as}  {'ok' if self.error is None else f'FAILED: {self.error}'}"


def public_form(url: str) -> str:
    """``json://user:pw@hooks.example.com:8080/T0KEN`` -> ``json://hooks.example.com:8080
    (id 1a2b...)``. Telegram, Slack and Discord put tokens where the host goes: such a "host"
    (no dot, not localhost) is masked."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return f"(id {url_id(url)})"
    netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    hostport = netloc.rpartition("@")[2]
    host, _, port = hostport.partition(":")
    looks_public = ("." in host or host == "localhost") and (not port or port.isdigit())
    shown = REDACTOR.redact(hostport if looks_public else MASK)
    return f"{scheme}://{shown} (id {url_id(url)})"


def unreadable_urls(channels: Mapping[str, Sequence[str]]) -> Iterator[tuple[str, int]]:
    """(channel, index) of each URL Apprise cannot read (``watcher check``)."""
    for name, urls in channels.items():
        for index, url in enumerate(urls):
            if alertmanager.is_alertmanager(url):
                if alertmanager.endpoint(url) is None:
                    yield name, index
            elif webhook.is_webhook(url):
                if webhook.endpoint(url) is None:
                    yield name, index
            elif not apprise.Apprise().add(url):
                yield name, index


def probe_message(channel: str, host: str) -> tuple[str, str]:
    """The title and body of a test notification."""
    return (
        f"watcher test notification from {host}",
        f"This is a test of the channel '{channel}', sent by `watcher notify-test` on {host}. "
        "If you can read it, the channel works. No action is needed.",
    )


async def send_test(channel: str, urls: Sequence[str]) -> list[UrlOutcome]:
    """Send the test message to each URL concurrently; one outcome per URL, in order."""
    protect_delivery_logs(urls)
    title, body = probe_message(channel, socket.gethostname())

    async def one(url: str) -> UrlOutcome:
        if alertmanager.is_alertmanager(url):
            notifier = alertmanager.AlertmanagerNotifier(timeout=SEND_TIMEOUT_SECONDS)
            message = Message(title, body, "info", "")
            outcome = await asyncio.to_thread(notifier.send, url, message)
            return UrlOutcome(public_form(url), outcome.refused)
        if webhook.is_webhook(url):
            hook = webhook.WebhookNotifier(timeout=SEND_TIMEOUT_SECONDS)
            outcome = await asyncio.to_thread(hook.send, url, Message(title, body, "info", ""))
            return UrlOutcome(public_form(url), outcome.refused)
        client = apprise.Apprise()
        if not client.add(url):
            return UrlOutcome(public_form(url), REJECTED_URL)
        error = await send_through(
            client, title, body, apprise.NotifyType.INFO, timeout=SEND_TIMEOUT_SECONDS
        )
        return UrlOutcome(public_form(url), error)

    return list(await asyncio.gather(*(one(url) for url in urls)))
