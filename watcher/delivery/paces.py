"""How long Apprise waits between two messages to one URL, service by service.

Apprise paces each plugin instance (``URLBase.throttle``): before a send it sleeps until
``request_rate_per_sec`` seconds have passed since that instance's previous send. The sender
keeps one Apprise object per URL and sends to a URL one message after another, so this pause is
what every message of a burst waits behind the one before it. Apprise's values are set per
service class, and a service that sets none gets 5.5 s (email among them: ten alerts took
nearly a minute). Here each service gets the pause it documents needing, set on our own
instances (``paced``), never on Apprise's classes. Bursts are for digests to absorb
(``watcher.delivery.digest``), and a refusal (HTTP 429) is retried with backoff anyway.
"""

from __future__ import annotations

from collections.abc import Mapping

import apprise
from apprise.plugins.base import NotifyBase

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
    return [scheme.lower() for scheme in schemes]


def pace_of(service: NotifyBase) -> float:
    """The pause before each message after the first to this service's URL (seconds)."""
    for scheme in _schemes(service):
        if scheme in PACE_SECONDS:
            return PACE_SECONDS[scheme]
    return min(float(type(service).request_rate_per_sec), LONGEST_DEFAULT_PACE)


def paced(client: apprise.Apprise) -> apprise.Apprise:
    """Give each service of ``client`` its pace, on the instance: Apprise's classes, shared by
    every Apprise object of the process, are left as they are."""
    for service in client:
        service.request_rate_per_sec = pace_of(service)
    return client
