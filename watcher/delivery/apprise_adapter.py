"""The Apprise adapter: one message to one Apprise URL, and what Apprise needs around it.

- Each service's pace (``PACE_SECONDS``): Apprise paces each plugin instance
  (``URLBase.throttle``), sleeping before a send until ``request_rate_per_sec`` seconds have
  passed since that instance's previous one. The sender keeps one Apprise object per URL and
  sends to a URL one message after another, so this pause is what every message of a burst
  waits behind the one before it. Apprise's values are set per service class, and a service
  that sets none gets 5.5 s (email among them: ten alerts took nearly a minute). Here each
  service gets the pause it documents needing, set on our own instances (``paced``), never on
  Apprise's classes. Bursts are for digests to absorb (``watcher.delivery.digest``), and a
  refusal (HTTP 429) is retried with backoff anyway.
- One send, bounded and identified: the blocking send in its own thread, the outcome as an
  error text (scrubbed) or None, and the notification id a receiver can deduplicate on
  (``X-Watcher-Id`` for webhooks).
- Markdown for the services that render it, plain text for the others (below).
- PagerDuty and Opsgenie: each message carries its episode's or its event's key
  (``watcher.delivery.paging``).
- The notifier (``AppriseNotifier``): the above, messages cut to each service's size, the
  ``console://`` scheme of the demo, and Apprise's and urllib3's logs kept free of the URLs'
  secrets.

Markdown
--------
Messages are worded once, as plain text that reads well as it is (``watcher.alerting.messages``):
a key in a body is followed by a line holding only its explorer link (indented), a list item
starts with ``- ``. Channels that render Markdown (Slack, Telegram, Discord, and email, which
Apprise turns into HTML) get the same text as Markdown, decided per Apprise schema
(``MARKDOWN_SCHEMES``): each link line becomes a link on the key above it (a signature's text
shortened to its first and last 8 characters, the link keeping the full value), other URLs
become links, and everything else is escaped so that it shows exactly as written. Every other
channel (webhooks, PagerDuty, the console...) gets the plain text.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import apprise
import apprise.decorators
from apprise.plugins.base import NotifyBase

from watcher.core import outbox_rows
from watcher.core.outbox_rows import DeliveryRow
from watcher.core.redact import REDACTOR
from watcher.delivery.notifier import (
    ACCEPTED,
    Message,
    Outcome,
    Tone,
    refused,
    scheme,
)
from watcher.delivery.paging import close_opsgenie, closes_itself, keyed_url, with_params

# Seconds between two messages to one URL, by Apprise scheme (a plugin's schemes share a pace).
PACE_SECONDS: Mapping[str, float] = {
    # An SMTP server takes messages back to back; providers cap messages per day, not per
    # second.
    "mailto": 0.0,
    "mailtos": 0.0,
    # Your own endpoints (Apprise does not pace them either), and the demo's console.
    "json": 0.0,
    "jsons": 0.0,
    "form": 0.0,
    "forms": 0.0,
    "xml": 0.0,
    "xmls": 0.0,
    "console": 0.0,
    # Slack: no more than one message per second (short bursts tolerated, then HTTP 429).
    "slack": 1.0,
    # Telegram bots: no more than about one message per second in one chat (30 per second
    # across chats; 20 per minute in a group, beyond which it answers 429).
    "tgram": 1.0,
    # Discord: Apprise waits by the webhook's own X-RateLimit-Remaining/-Reset answers.
    "discord": 0.0,
    # ntfy.sh: a burst of 60 requests, then one per 5 s (its server's defaults).
    "ntfy": 0.0,
    "ntfys": 0.0,
    # PagerDuty Events API v2: 120 events per minute per integration key.
    "pagerduty": 0.5,
}
# Any other service: Apprise's own pace, at most this. Apprise gives 5.5 s to every service
# that names none, a guess rather than a documented limit.
LONGEST_DEFAULT_PACE = 1.0


def _schemes(service: NotifyBase) -> list[str]:
    schemes: list[str] = []
    for names in (service.protocol, service.secure_protocol):
        if isinstance(names, str):
            schemes.append(names)
        elif names:
            schemes.extend(str(name) for name in names)
    return [name.lower() for name in schemes]


def pace_of(service: NotifyBase) -> float:
    """The pause before each message after the first to this service's URL (seconds)."""
    for name in _schemes(service):
        if name in PACE_SECONDS:
            return PACE_SECONDS[name]
    return min(float(type(service).request_rate_per_sec), LONGEST_DEFAULT_PACE)


def paced(client: apprise.Apprise) -> apprise.Apprise:
    """Give each service of ``client`` its pace, on the instance: Apprise's classes, shared by
    every Apprise object of the process, are left as they are."""
    for service in client:
        service.request_rate_per_sec = pace_of(service)
    return client


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
    if scheme(url) not in _HEADER_SCHEMES:
        return None
    return with_params(url, {f"+{ID_HEADER}": notification})


def new_client(url: str) -> apprise.Apprise | None:
    """An Apprise object for one URL, paced by what its service needs (``paces``), or None
    when Apprise does not accept the URL."""
    # service_timeout=0: Apprise sends in the calling thread (ours), see send_blocking.
    client = apprise.Apprise(asset=apprise.AppriseAsset(service_timeout=0))
    return paced(client) if client.add(url) else None


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
    limit = MAX_MESSAGE_CHARS.get(scheme(url))
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


# -- Markdown, for the services that render it (see the module) --------------------------

# Schemas whose services render Markdown (or, for email, HTML made from it by Apprise).
MARKDOWN_SCHEMES = frozenset({"slack", "tgram", "discord", "mailto", "mailtos"})

_URL = re.compile(r"https?://[^\s<>]+")
_LINK_LINE = re.compile(r"^\s+(https?://[^\s<>]+)$")
_B58 = "1-9A-HJ-NP-Za-km-z"
# A key in full, or shortened (``5VERv8NM…diSZkQUW``, ``9xQe…VFin``).
_KEY = re.compile(rf"[{_B58}]{{32,88}}|[{_B58}]{{4,8}}…[{_B58}]{{4,8}}")
# CommonMark's specials that plain text may hold; "-" only starts a list (kept: our lists).
_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~])")
SIGNATURE_CHARS = 64  # longer keys are signatures: shown shortened (the link has them in full)
SHOWN_CHARS = 8


def renders_markdown(url: str) -> bool:
    """Whether the service behind an Apprise URL shows Markdown (decided by its schema)."""
    return scheme(url) in MARKDOWN_SCHEMES


def escape(text: str) -> str:
    """Text shown exactly as written in Markdown (URLs in it become links)."""
    parts: list[str] = []
    last = 0
    for match in _URL.finditer(text):
        parts.append(_SPECIAL.sub(r"\\\1", text[last : match.start()]))
        parts.append(f"<{match.group(0)}>")
        last = match.end()
    parts.append(_SPECIAL.sub(r"\\\1", text[last:]))
    return "".join(parts)


def to_markdown(body: str) -> str:
    """A plain body as Markdown: each link line joined to the key above it as a link."""
    out: list[str] = []
    pending: str | None = None  # the previous plain line, not written yet
    for line in body.split("\n"):
        link = _LINK_LINE.match(line)
        if link is not None and pending is not None:
            out.append(_linked(pending, link.group(1)))
            pending = None
            continue
        if pending is not None:
            out.append(escape(pending))
        if out and out[-1].lstrip().startswith("- ") and line and not line.startswith(("- ", " ")):
            out.append("")  # a line after a list is not part of its last item
        pending = line
    if pending is not None:
        out.append(escape(pending))
    return "\n".join(out)


def _linked(line: str, url: str) -> str:
    """``line`` with the key its link is about as the link's text (escaped around it)."""
    for match in _KEY.finditer(line):
        key = match.group(0)
        if _names(key, url):
            text = key
            if len(key) > SIGNATURE_CHARS:
                text = f"{key[:SHOWN_CHARS]}…{key[-SHOWN_CHARS:]}"
            before, after = line[: match.start()], line[match.end() :]
            return f"{escape(before)}[{text}]({url}){escape(after)}"
    return f"{escape(line)}\n<{url}>"


def _names(key: str, url: str) -> bool:
    """Whether the link is about ``key`` (in full, or shortened: its two ends)."""
    if "…" not in key:
        return key in url
    start, end = key.split("…")
    return any(
        full.startswith(start) and full.endswith(end)
        for full in re.findall(rf"[{_B58}]{{32,88}}", url)
    )


# -- the notifier ---------------------------------------------------------------------------


class AppriseNotifier:
    """Sends through Apprise; one Apprise object per URL, kept (the webhook schemes get one per
    message, carrying its id as ``X-Watcher-Id``; PagerDuty and Opsgenie one per message,
    carrying its episode's or its event's key: ``keyed_url``)."""

    def __init__(self) -> None:
        self._clients: dict[str, apprise.Apprise] = {}

    def send(self, url: str, message: Message) -> Outcome:
        alerts, body = message.alerts, message.body
        if closes_itself(url, alerts):  # Opsgenie: closed by its alias, here
            return close_opsgenie(url, alerts, body)
        keyed = keyed_url(url, alerts)  # PagerDuty, Opsgenie: an episode's or event's key
        client = self._client(url, message.notification) if keyed is None else new_client(keyed)
        if client is None:
            return refused(REJECTED_URL, final=True)
        body_format = apprise.NotifyFormat.TEXT
        if renders_markdown(url):  # Slack, Telegram, Discord, email (as HTML)
            body, body_format = to_markdown(body), apprise.NotifyFormat.MARKDOWN
        title, body = fit_for_url(url, message.title, body)
        notify_type = NOTIFY_TYPES.get(message.tone)
        error = send_blocking(client, title, body, notify_type, body_format)
        return ACCEPTED if error is None else refused(error)

    def _client(self, url: str, notification: str) -> apprise.Apprise | None:
        tagged = with_id_header(url, notification)
        if tagged is not None:
            client = new_client(tagged)
            if client is not None:
                return client
        url_id = outbox_rows.url_id(url)
        client = self._clients.get(url_id)
        if client is None:
            client = new_client(url)
            if client is None:
                return None
            self._clients[url_id] = client
        return client
