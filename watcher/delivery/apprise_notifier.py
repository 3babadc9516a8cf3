"""The Apprise notifier: one message to one Apprise URL, and what Apprise needs around it
(Markdown for the services that render it, ``watcher.delivery.markup``; messages cut to each
service's size, the ``console://`` scheme of the demo, and Apprise's and
urllib3's logs kept free of the URLs' secrets).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import apprise
import apprise.decorators

from watcher.core import outbox_rows
from watcher.core.redact import REDACTOR
from watcher.delivery import apprise_send, markup, paging
from watcher.delivery.apprise_send import new_client, with_id_header
from watcher.delivery.notifier import ACCEPTED, Message, Outcome, Tone, refused

REJECTED_URL = "Apprise does not accept this URL"

NOTIFY_TYPES: Mapping[Tone, apprise.NotifyType] = {
    "info": apprise.NotifyType.INFO,
    "warning": apprise.NotifyType.WARNING,
    "critical": apprise.NotifyType.FAILURE,
    "resolved": apprise.NotifyType.SUCCESS,
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
    """Shorten the body (with a visible marker) so the message fits the service's limit,
    at the end of a line where one is near."""
    limit = MAX_MESSAGE_CHARS.get(url.split("://", 1)[0].lower())
    if limit is None or len(title) + 1 + len(body) <= limit:
        return title, body
    title = title[: limit // 2]
    room = max(0, limit - len(title) - 1 - len(TRUNCATED))
    cut = body[:room]
    line_end = cut.rfind("\n")
    if line_end >= room // 2:  # at a line's end: no link (Markdown) is cut in two
        cut = cut[:line_end]
    return title, cut + TRUNCATED


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


# -- the notifier ---------------------------------------------------------------------------


class AppriseNotifier:
    """Sends through Apprise; one Apprise object per URL, kept (the webhook schemes get one per
    message, carrying its id as ``X-Watcher-Id``; PagerDuty and Opsgenie one per message,
    carrying its episode's or its event's key: ``watcher.delivery.paging``)."""

    def __init__(self) -> None:
        self._clients: dict[str, apprise.Apprise] = {}

    def send(self, url: str, message: Message) -> Outcome:
        alerts, body = message.alerts, message.body
        if paging.closes_itself(url, alerts):  # Opsgenie: closed by its alias, here
            return paging.close_opsgenie(url, alerts, body)
        keyed = paging.keyed_url(url, alerts)  # PagerDuty, Opsgenie: an episode's or event's key
        client = self._client(url, message.notification) if keyed is None else new_client(keyed)
        if client is None:
            return refused(REJECTED_URL, final=True)
        body_format = apprise.NotifyFormat.TEXT
        if markup.renders_markdown(url):  # Slack, Telegram, Discord, email (as HTML)
            body, body_format = markup.to_markdown(body), apprise.NotifyFormat.MARKDOWN
        title, body = fit_for_url(url, message.title, body)
        notify_type = NOTIFY_TYPES.get(message.tone)
        error = apprise_send.send_blocking(client, title, body, notify_type, body_format)
        return ACCEPTED if error is None else refused(error)

    def _client(self, url: str, notification: str) -> apprise.Apprise | None:
        tagged = with_id_header(url, notification)
        if tagged is not None:
            client = apprise_send.new_client(tagged)
            if client is not None:
                return client
        url_id = outbox_rows.url_id(url)
        client = self._clients.get(url_id)
        if client is None:
            client = apprise_send.new_client(url)
            if client is None:
                return None
            self._clients[url_id] = client
        return client
