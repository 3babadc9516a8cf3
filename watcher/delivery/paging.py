"""PagerDuty's and Opsgenie's keys: a resolution closes the incident its firing opened; an
event is an incident of its own, never resolved.

Apprise's PagerDuty plugin ties events together by ``dedup_key``: without ``dedup=`` it is a
hash of the message's first line, and watcher's firing (``[CRITICAL] ...``) and resolution
(``[RESOLVED] ...``) titles differ, so a resolution never met its incident. Apprise's Opsgenie
plugin closes only alerts it created in the same process (their ids kept in Apprise's store, in
memory by default), found by alias or title: after a restart, or from another instance, a
close finds nothing and says nothing.

So every episode of a state rule (one rule, one subject, one episode number: what the outbox's
``dedup_key`` holds before its last part) gets one key, ``episode_key``: a hash, the same for
the firing, the reminders and the resolution of that episode, on every run and every instance
(the episode's number is in the stored state, never reused), and a new one for the next
episode.

- ``pagerduty://``: the message goes through Apprise with ``dedup=<key>`` and ``action=map``
  (unless the URL sets ``action`` itself): a firing or a reminder triggers (PagerDuty folds it
  into the open incident with that key), a resolution (Apprise's success type) resolves it.
- ``opsgenie://``: a firing or a reminder goes through Apprise with ``alias=<key>`` and
  ``action=new`` (Opsgenie folds alerts with one open alias into one; Apprise's default,
  ``map``, would turn an ``info`` alert into a note on an alert this process opened, which is
  none after a restart: nothing sent). A resolution is not Apprise's to send (it would
  open a new "[RESOLVED]" alert, or close nothing after a restart): watcher closes the alert by
  its alias itself, ``POST /v2/alerts/<key>/close?identifierType=alias`` on the URL's region
  with its API key, which works whatever process opened it. A URL that sets ``alias`` keeps it
  (then every alert of the URL is one Opsgenie alert, as the user asked).

An event never resolves: each message of events is a trigger with a key of its own,
``event_key`` (``watcher-event-`` and the event's ``event_id``, the id Alertmanager's
``event_id`` label carries; for a digest of several events, a hash of theirs), so that two
events of one rule and subject are two incidents, never folded into one nor resolved by a
later message: PagerDuty ``dedup=<key>`` and ``action=trigger``, Opsgenie ``alias=<key>`` and
``action=new``. An inventory (what exists at a rule's first poll) is information, not an
incident: it is never sent to these two (``watcher.delivery.channels.Channels.destinations``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import apprise
import requests

from watcher.core.events import AlertMessage
from watcher.delivery import alertmanager
from watcher.delivery.notifier import (
    ACCEPTED,
    EVENT_ID_CHARS,
    Outcome,
    StoredAlert,
    event_id,
    refused,
    scheme,
)

CLOSE_TIMEOUT = 15.0
PAGING_SCHEMES = frozenset({"pagerduty", "opsgenie", *alertmanager.SCHEMES})
EVENT_PREFIX = "watcher-event-"  # an event's key; an episode's is "watcher-" and a hash
# Opsgenie's alert API, by region (what Apprise's plugin posts to).
OPSGENIE_API = {
    "us": "https://api.opsgenie.com/v2/alerts",
    "eu": "https://api.eu.opsgenie.com/v2/alerts",
}


def pages(url: str) -> bool:
    """Whether a URL pages someone: Alertmanager (whose routes lead to the pager), PagerDuty,
    Opsgenie. An inventory never goes to one (``watcher.delivery.channels``)."""
    return scheme(url) in PAGING_SCHEMES


def episode_key(alert: AlertMessage) -> str | None:
    """One key per episode of a state rule and subject (None for an event): a hash of the
    rule, the subject and the episode's number, from the stored alert."""
    if alert.reason == "event":
        return None
    episode = alert.dedup_key.rsplit("|", 1)[0]  # rule|subject|episode (the reason cut off)
    return "watcher-" + hashlib.sha256(episode.encode("utf-8")).hexdigest()[:32]


def event_key(alerts: Sequence[StoredAlert]) -> str:
    """The key of a message of events: its event's ``event_id``, or for a digest a hash of
    its events' ids (the same rows on every attempt: the same key)."""
    ids = [event_id(stored.alert) for stored in alerts]
    if len(ids) == 1:
        return f"{EVENT_PREFIX}{ids[0]}"
    joined = ",".join(sorted(ids)).encode("utf-8")
    return EVENT_PREFIX + hashlib.sha256(joined).hexdigest()[:EVENT_ID_CHARS]


def is_events(alerts: Sequence[StoredAlert]) -> bool:
    return bool(alerts) and all(stored.alert.reason == "event" for stored in alerts)


def message_key(alerts: Sequence[StoredAlert]) -> str | None:
    """The key of a message: its episode's for one state alert, its own for events; None for
    anything else (a message that is no alert)."""
    if is_events(alerts):
        return event_key(alerts)
    if len(alerts) != 1:
        return None
    return episode_key(alerts[0].alert)


def _query(url: str) -> dict[str, str]:
    try:
        return {k.lower(): v for k, v in parse_qsl(urlsplit(url).query)}
    except ValueError:
        return {}


def with_params(url: str, params: dict[str, str]) -> str:
    """``url`` with ``params`` added to its query (their values quoted), its fragment kept."""
    base, hash_mark, fragment = url.partition("#")
    joiner = "&" if "?" in base else "?"
    extra = "&".join(f"{name}={quote(value, safe='')}" for name, value in params.items())
    return f"{base}{joiner}{extra}{hash_mark}{fragment}"


def keyed_url(url: str, alerts: Sequence[StoredAlert]) -> str | None:
    """The URL carrying the message's episode key (PagerDuty: ``dedup`` and ``action=map``,
    Opsgenie: ``alias``); None when the URL or the message needs none."""
    kind = scheme(url)
    if kind not in ("pagerduty", "opsgenie"):
        return None
    key = message_key(alerts)
    if key is None:
        return None
    set_already = _query(url)
    if kind == "pagerduty":
        # An event is only ever triggered: nothing may resolve it.
        wanted = {"dedup": key, "action": "trigger" if is_events(alerts) else "map"}
    elif any(stored.alert.reason == "resolved" for stored in alerts):
        wanted = {"alias": key}  # closed by watcher (close_opsgenie) unless the URL has an alias
    else:
        wanted = {"alias": key, "action": "new"}
    params = {name: value for name, value in wanted.items() if name not in set_already}
    return with_params(url, params) if params else None


def closes_itself(url: str, alerts: Sequence[StoredAlert]) -> bool:
    """Whether this message is an Opsgenie resolution watcher closes by alias itself."""
    if scheme(url) != "opsgenie" or "alias" in _query(url):
        return False
    return len(alerts) == 1 and alerts[0].alert.reason == "resolved"


def close_opsgenie(url: str, alerts: Sequence[StoredAlert], note: str) -> Outcome:
    """Close the Opsgenie alert of the resolved episode by its alias (see the module's
    docstring). Error texts name no key and no URL."""
    key = message_key(alerts)
    plugin: Any = apprise.Apprise.instantiate(url)
    if key is None or plugin is None or not getattr(plugin, "apikey", None):
        return refused("Apprise does not accept this URL", final=True)
    api = OPSGENIE_API.get(str(getattr(plugin, "region_name", "us")).lower(), OPSGENIE_API["us"])
    try:
        answer = requests.post(
            f"{api}/{quote(key, safe='')}/close",
            params={"identifierType": "alias"},
            json={"source": "watcher", "user": "watcher", "note": note[:25000]},
            headers={"Authorization": f"GenieKey {plugin.apikey}"},
            timeout=CLOSE_TIMEOUT,
        )
    except requests.RequestException as exc:
        return refused(f"Opsgenie unreachable ({type(exc).__name__})")
    if answer.status_code in (200, 202):
        return ACCEPTED
    status = answer.status_code
    if 400 <= status < 500 and status not in (408, 429):
        return refused(f"Opsgenie refused the close: HTTP {status}", final=True)
    return refused(f"Opsgenie answered HTTP {status}")
