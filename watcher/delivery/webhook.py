"""The ``webhook://`` channel: each message posted as JSON in the body of Alertmanager's own
webhook (version 4), so that a receiver written for Alertmanager reads it unchanged, with
watcher's own fields (each alert's id, rule, kind, severity, subject, reason, facts, links,
title and text) under the top-level key ``watcher``.

``webhook://host[:port][/path][?query]`` posts to ``http://host:port/path?query``
(``webhooks://`` to ``https://``; ``user:password@`` is sent as basic auth, never in the URL).
Apprise's ``json://`` body is a title and a message only, so this channel is sent here, beside
Apprise, as ``alertmanager://`` is (``notifier.ByScheme`` picks by scheme), through the same outbox:
retried on a refusal (a connection error, a timeout, a 5xx, a 408 or 429), given up past
``delivery.deadline``; any other 4xx is final. A digest (one rule's events, grouped) is one
post carrying every alert of it. Each post carries the ``X-Watcher-Id`` header (the same on
every attempt), as Apprise's webhooks do.

Why Alertmanager's layout with an extra top-level key rather than annotations: an Alertmanager
annotation is a string, while facts and links are structures an automation reads as they are;
Alertmanager's receivers decode ``receiver``, ``status``, ``alerts``... and ignore a key they do
not know. The labels and annotations are those the ``alertmanager://`` channel posts
(``watcher.delivery.alertmanager.labels`` and ``payload``), so one routing serves both.

The schema, in docs/settings.md ("Structured webhook"). Secrets: the URL and its password never
appear in an error text or a log line (errors are worded here, never from httpx's texts).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from watcher.core.clock import Clock
from watcher.core.events import AlertMessage
from watcher.delivery import alertmanager
from watcher.delivery.notifier import Message, Outcome, StoredAlert, refused
from watcher.delivery.post_endpoint import PostEndpoint, PostWords, post_endpoint

SCHEMES = frozenset({"webhook", "webhooks"})
VERSION = "4"  # Alertmanager's webhook payload version
WATCHER_VERSION = 1  # of the ``watcher`` key's layout
RECEIVER = "watcher"
ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of an alert still firing
POST_TIMEOUT = 10.0
GROUP_LABELS = ("alertname", "subject")
_LINK = re.compile(r"https?://[^\s<>\"')\]]+")


def is_webhook(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SCHEMES


Endpoint = PostEndpoint
WORDS = PostWords("the webhook", "the webhook is unreachable", "the webhook refused the message")


def endpoint(url: str) -> Endpoint | None:
    """The endpoint of a ``webhook://`` URL (its path and query posted to as they are), or
    None when it is not one (or unreadable)."""
    return post_endpoint(
        url, {"webhook": "http", "webhooks": "https"}, lambda parts: parts.path or "/", query=True
    )


# -- the body (pure) ----------------------------------------------------------------------------


def fingerprint(labels: Mapping[str, str]) -> str:
    """Alertmanager's fingerprint of a label set (FNV-1a 64 over the sorted names and values,
    each followed by 0xff; 16 hex digits), so that a receiver keying on it finds the same
    alert as Alertmanager names it."""
    value = 0xCBF29CE484222325
    for name in sorted(labels):
        for part in (name, labels[name]):
            for byte in part.encode() + b"\xff":
                value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def links(alert: AlertMessage) -> list[str]:
    """The URLs an alert's text gives (explorer links, its runbook), in order, each once."""
    found = _LINK.findall(alert.body)
    runbook = alert.facts.get("runbook")
    if runbook:
        found.append(str(runbook))
    return list(dict.fromkeys(found))


def reason(alert: AlertMessage) -> str:
    """``firing`` (a repeat too), ``resolved``, ``event``, or ``inventory`` (the event listing
    what exists at a rule's first poll: information, not a change)."""
    if alert.reason == "repeat":
        return "firing"
    if alert.is_inventory:
        return "inventory"
    return alert.reason


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    if not maps:
        return {}
    first, *rest = maps
    return {k: v for k, v in first.items() if all(m.get(k) == v for m in rest)}


def _alert(stored: StoredAlert, now: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """One alert as Alertmanager's webhook shows it, and watcher's fields of it."""
    alert = stored.alert
    posted = alertmanager.payload(stored, now)
    resolved = alert.reason == "resolved"
    found = links(alert)
    key = fingerprint(posted["labels"])
    kind = posted["labels"].get("kind") or alert.facts.get("kind") or ""
    shown = {
        "status": "resolved" if resolved else "firing",
        "labels": posted["labels"],
        "annotations": posted["annotations"],
        "startsAt": posted["startsAt"],
        "endsAt": posted["endsAt"] if resolved else ZERO_TIME,
        "generatorURL": found[0] if found else "",
        "fingerprint": key,
    }
    own = {
        "id": alert.dedup_key,
        "fingerprint": key,
        "rule": alert.rule,
        "kind": str(kind),
        "severity": alert.severity,
        "subject": alert.subject,
        "reason": reason(alert),
        "repeat": alert.reason == "repeat",
        "title": alert.title,
        "text": alert.body,
        "facts": alert.facts,
        "links": found,
        "queued_at": alertmanager.rfc3339(stored.created_at),
    }
    return shown, own


def body(message: Message, now: float) -> dict[str, Any]:
    """The JSON body of one message (docs/settings.md, "Structured webhook")."""
    stored = list(message.alerts) or [alertmanager.probe_alert(message.title, message.body, now)]
    pairs = [_alert(alert, now) for alert in stored]
    shown = [pair[0] for pair in pairs]
    labels = [a["labels"] for a in shown]
    common = _common(labels)
    group = {k: common[k] for k in GROUP_LABELS if k in common}
    key = ", ".join(f'{k}="{v}"' for k, v in sorted(group.items()))
    return {
        "version": VERSION,
        "groupKey": f"{{}}:{{{key}}}",
        "truncatedAlerts": 0,
        "status": "firing" if any(a["status"] == "firing" for a in shown) else "resolved",
        "receiver": RECEIVER,
        "groupLabels": group,
        "commonLabels": common,
        "commonAnnotations": _common([a["annotations"] for a in shown]),
        "externalURL": "",
        "alerts": shown,
        "watcher": {
            "version": WATCHER_VERSION,
            "id": message.notification,
            "title": message.title,
            "text": message.body,
            "alerts": [pair[1] for pair in pairs],
        },
    }


# -- posting ------------------------------------------------------------------------------------


def post(
    url: str,
    message: Message,
    now: float,
    client: httpx.Client | None = None,
    timeout: float = POST_TIMEOUT,
) -> Outcome:
    """Post ``message`` to ``url``: accepted on 2xx; a 4xx but 408 and 429 is final; a
    connection error, a timeout or another status is retried. The error texts name no URL and
    no credential."""
    where = endpoint(url)
    if where is None:
        return refused("not a readable webhook:// URL", final=True)
    headers = {"X-Watcher-Id": message.notification} if message.notification else {}
    return where.post(body(message, now), WORDS, headers=headers, client=client, timeout=timeout)


class WebhookNotifier:
    """Posts a message (its alerts, or one short info alert for a message with none, such as
    ``watcher notify-test``'s) to a ``webhook://`` URL."""

    def __init__(self, clock: Clock = time.time, timeout: float = POST_TIMEOUT) -> None:
        self._clock = clock
        self._timeout = timeout

    def send(self, url: str, message: Message) -> Outcome:
        return post(url, message, self._clock(), timeout=self._timeout)
