"""The ``alertmanager://`` channel: alerts posted to Prometheus Alertmanager's ``/api/v2/alerts``.

``alertmanager://host:port[/prefix]`` (``alertmanagers://`` for HTTPS, ``user:password@`` for
basic auth; a path prefix is kept) posts to ``{prefix}/api/v2/alerts``. Apprise has no such
plugin and hands a plugin only a title, a body and a type, so this channel is sent here, beside
Apprise (``notifier.ByScheme`` picks by scheme), from the alerts themselves.

Each alert is one Alertmanager alert: labels ``alertname`` (the rule's name), ``kind``,
``severity``, ``subject`` and ``type`` (its identity: what Alertmanager groups, silences and
deduplicates on), annotations ``summary`` (the title), ``description`` (the body) and
``runbook_url`` (when the rule has a runbook).

``type`` tells the two lives of an alert apart, so that a route can send them differently
(events to receivers without ``send_resolved``, states with it):

- ``type="state"``: an episode of a state rule (or a built-in alert), whose firing, reminders
  and resolution share one set of labels, so that the resolution ends the alert the firing
  started;
- ``type="event"``: a one-off occurrence, which also carries ``event_id``, its own short id
  (``watcher.delivery.notifier.event_id``: 16 hex digits of a hash of its dedup key): two
  events of one rule and subject (two changes of one mint, two transactions of one address)
  are two alerts, never one fingerprint whose second post replaces the first's words and
  notifies nothing.

As Prometheus sends:

- a firing state alert has ``startsAt`` = when it fired and ``endsAt`` = now + four re-post
  intervals (``delivery.alertmanager_repost_every``, a minute by default: ``FIRING_TTL``), and
  is posted again every interval while it fires: an Alertmanager that restarted (it keeps alerts
  in memory) has it back within a minute, and a watcher that died lets it expire instead of
  firing forever;
- a resolution has ``endsAt`` = the moment it resolved (and ``startsAt`` its firing's start),
  posted again for ``RESOLVED_KEPT_SECONDS`` (15 minutes);
- an event (event kinds never resolve) is a short alert that ends by itself, ``EVENT_TTL``
  after it is posted (Alertmanager needs an end; a receiver with ``send_resolved`` would tell
  that end as "resolved", which is why events are routed apart by ``type``). An inventory
  (the first poll's report of what exists) is never posted here: it is information, not an
  incident (``watcher.core.events.AlertMessage.is_inventory``).

Why the first post is an outbox delivery and the re-posts a small task (``Reposter``)
-------------------------------------------------------------------------------------
The first post of every alert goes through the outbox like any other channel: committed with
the step, claimed (one instance at a time on PostgreSQL), retried on a refusal (a connection
error, a 5xx), given up past ``delivery.deadline``; a 4xx is final. The re-posts are not
deliveries: a delivery is "sent" once, and a row that stayed pending while an alert fires would
count as backlog in ``/metrics`` and in the outbox's health. What the re-posts need is already
in the store: the alerts firing now (``firing_alerts``) and the resolutions of the last 15
minutes, each with its deliveries' URLs. So the ``Reposter`` asks the store for them
(``Store.standing_alerts``) every minute and posts each to the Alertmanager URLs it went to.
Nothing of it lives in memory: a restarted watcher re-posts the same set. With several
instances on one PostgreSQL, each re-posts only the alerts whose shard it holds (the alert's
rule and subject hashed into the shards the instances lease, under the pseudo-source
``REPOST_SOURCE``): each alert is re-posted by one instance at a time, and by another one
within a lease's time to live when its instance dies. A re-post that fails is not retried
before the next round: the next one comes within a minute, and a repeat is harmless
(Alertmanager merges alerts with the same labels).

A watcher silence (``watcher silence add``) covering a firing alert stops its re-posts: the
alert then ends in Alertmanager at its last ``endsAt``, as one from a watcher that died, and one
silence (the watcher's) is enough. When the silence ends and the alert still fires, the re-posts
resume and it is back in Alertmanager within an interval. A resolution is posted again whatever
the silences: it only ends what Alertmanager holds.

Secrets: the URL's password and the URL never appear in an error text or a log line (the URL
is posted to without its credentials, which go in the ``Authorization`` header, and errors are
worded here, never from the HTTP library's texts).
"""

from __future__ import annotations

import asyncio
import calendar
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import httpx
import structlog

from watcher.core.clock import Clock
from watcher.core.events import AlertMessage, Silence
from watcher.core.outbox_rows import DeliveryRow
from watcher.delivery.notifier import (
    Message,
    Outcome,
    StoredAlert,
    event_id,
    refused,
)
from watcher.delivery.post_endpoint import PostEndpoint, PostWords, post_endpoint

log = structlog.get_logger(__name__)

SCHEMES = frozenset({"alertmanager", "alertmanagers"})
API_PATH = "/api/v2/alerts"
REPOST_SECONDS = 60.0  # a standing alert is posted again every minute (by default)
TTL_REPOSTS = 4  # a firing alert's endsAt: now + 4 re-post intervals (3 may fail in a row)
FIRING_TTL = TTL_REPOSTS * REPOST_SECONDS  # endsAt of a firing alert at the default interval
EVENT_TTL = 300.0  # an event's alert ends by itself, 5 minutes after its post
RESOLVED_KEPT_SECONDS = 900.0  # a resolution is posted again for 15 minutes
POST_TIMEOUT = 10.0
REPOST_SOURCE = "alertmanager-repost"  # the shards' pseudo-source of the re-posts
BUILTIN_KIND = "builtin"  # the kind label of the watcher's own alerts (RPC down...)
EVENT, STATE = "event", "state"  # the values of the ``type`` label


def is_alertmanager(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SCHEMES


Endpoint = PostEndpoint
WORDS = PostWords("Alertmanager", "Alertmanager unreachable", "Alertmanager refused the alerts")


def endpoint(url: str) -> Endpoint | None:
    """The endpoint of an ``alertmanager://`` URL (its path a prefix kept before the API's),
    or None when it is not one (or unreadable)."""
    return post_endpoint(
        url,
        {"alertmanager": "http", "alertmanagers": "https"},
        lambda parts: parts.path.rstrip("/") + API_PATH,
        query=False,
    )


# -- the payload (pure) -----------------------------------------------------------------------


def rfc3339(ts: float) -> str:
    """Unix seconds -> ``2026-11-21T12:00:00.250Z`` (what Alertmanager reads)."""
    whole = int(ts // 1)
    millis = round((ts - whole) * 1000)
    if millis == 1000:
        whole, millis = whole + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z"


def _from_iso(text: Any) -> float | None:
    """``2026-11-21T12:00:00Z`` (``watcher.core.clock.iso``) -> Unix seconds; None if not."""
    if not isinstance(text, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def labels(stored: StoredAlert) -> dict[str, str]:
    """An alert's identity in Alertmanager: the same for a state's firing, repeats and
    resolution; an event's own (its ``event_id``)."""
    alert = stored.alert
    kind = alert.facts.get("kind") or (alert.grouping.kind if alert.grouping else BUILTIN_KIND)
    found = {
        "alertname": alert.rule,
        "kind": str(kind),
        "severity": alert.severity,
        "subject": alert.subject,
    }
    if alert.reason == "event":
        return {**found, "type": EVENT, "event_id": event_id(alert)}
    return {**found, "type": STATE}


def started_at(stored: StoredAlert) -> float:
    """When the episode fired (its firing's time, as the facts say it), else when queued."""
    fired = _from_iso(stored.alert.facts.get("firing_since"))
    return stored.created_at if fired is None else min(fired, stored.created_at)


def payload(stored: StoredAlert, now: float, firing_ttl: float = FIRING_TTL) -> dict[str, Any]:
    """One alert of ``POST /api/v2/alerts`` as posted at ``now`` (a firing one ending
    ``firing_ttl`` later unless posted again)."""
    alert = stored.alert
    annotations = {"summary": alert.title, "description": alert.body}
    runbook = alert.facts.get("runbook")
    if runbook:
        annotations["runbook_url"] = str(runbook)
    if alert.reason == "event":
        starts, ends = stored.created_at, max(stored.created_at, now) + EVENT_TTL
    elif alert.reason == "resolved":
        starts, ends = started_at(stored), stored.created_at
    else:  # firing, repeat
        starts, ends = started_at(stored), max(stored.created_at, now) + firing_ttl
    return {
        "labels": labels(stored),
        "annotations": annotations,
        "startsAt": rfc3339(starts),
        "endsAt": rfc3339(ends),
    }


def standing(rows: Iterable[DeliveryRow]) -> list[DeliveryRow]:
    """What to re-post, of the store's firing alerts and recent resolutions: per URL and
    (rule, subject), the newest alert only. A resolution followed by a new firing is not posted
    again: its labels are the new firing's, and posting it would end the new episode."""
    newest: dict[tuple[str, str, str], DeliveryRow] = {}
    for row in rows:
        key = (row.url_id, row.alert.rule, row.alert.subject)
        kept = newest.get(key)
        if kept is None or row.alert_id > kept.alert_id:
            newest[key] = row
    return sorted(newest.values(), key=lambda row: row.alert_id)


# -- posting ------------------------------------------------------------------------------------


def post(
    url: str,
    alerts: Sequence[StoredAlert],
    now: float,
    client: httpx.Client | None = None,
    timeout: float = POST_TIMEOUT,
    firing_ttl: float = FIRING_TTL,
) -> Outcome:
    """Post ``alerts`` to the Alertmanager of ``url``: accepted on 2xx; a 4xx is final (the
    payload or the credentials are wrong, retrying cannot help); a connection error, a timeout
    or a 5xx is retried. The error texts name no URL and no credential."""
    where = endpoint(url)
    if where is None:
        return refused("not a readable alertmanager:// URL", final=True)
    body = [payload(alert, now, firing_ttl) for alert in alerts]
    return where.post(body, WORDS, client=client, timeout=timeout)


class AlertmanagerNotifier:
    """Sends a message's alerts to an ``alertmanager://`` URL (a message with no alert, such
    as ``watcher notify-test``'s, is posted as one short info alert)."""

    def __init__(
        self,
        clock: Clock = time.time,
        timeout: float = POST_TIMEOUT,
        firing_ttl: float = FIRING_TTL,
    ) -> None:
        self._clock = clock
        self._timeout = timeout
        self._firing_ttl = firing_ttl

    def send(self, url: str, message: Message) -> Outcome:
        now = self._clock()
        alerts = message.alerts or [probe_alert(message.title, message.body, now)]
        return post(url, alerts, now, timeout=self._timeout, firing_ttl=self._firing_ttl)


def probe_alert(title: str, body: str, now: float) -> StoredAlert:
    """A message that is no alert (``watcher notify-test``), as a short info alert."""
    message = AlertMessage(
        rule="watcher_test",
        severity="info",
        subject="notify-test",
        reason="event",
        dedup_key=f"watcher_test|{now}",
        title=title,
        body=body,
        channels=(),
        facts={"kind": "test"},
    )
    return StoredAlert(message, now)


# -- the re-posts -------------------------------------------------------------------------------


class Reposter:
    """Posts again, every ``every`` seconds, the firing alerts and the recent resolutions the
    store keeps, to the Alertmanager URLs they went to (see the module's docstring), but the
    firing ones a watcher silence covers now (``active_silences``)."""

    def __init__(
        self,
        standing_alerts: Callable[[Sequence[str], float], Awaitable[list[DeliveryRow]]],
        holds: Callable[[str, str], bool],
        urls: Callable[[], Mapping[str, str]],
        clock: Clock,
        *,
        active_silences: Callable[[float], Awaitable[list[Silence]]] | None = None,
        every: float = REPOST_SECONDS,
        post_in_thread: Callable[[str, Sequence[StoredAlert], float], Awaitable[Outcome]]
        | None = None,
    ) -> None:
        self._standing_alerts = standing_alerts
        self._active_silences = active_silences
        self._holds = holds
        self._urls = urls
        self._clock = clock
        self.every = every
        self._post = post_in_thread or partial(_post_in_thread, firing_ttl=TTL_REPOSTS * every)
        self._last: float | None = None
        self._task: asyncio.Task[int] | None = None

    def due(self, now: float) -> bool:
        """Whether a round is due: the first comes a full interval after the start (the
        first posts are the outbox's), and one round runs at a time."""
        if self._task is not None and not self._task.done():
            return False
        if self._last is None:
            self._last = now
            return False
        return now - self._last >= self.every

    def next_round_at(self) -> float | None:
        """When the next round falls due (clock time); None before the first ``maybe_start``
        (which starts the interval) or while no Alertmanager URL is configured."""
        if self._last is None or not any(is_alertmanager(u) for u in self._urls().values()):
            return None
        return self._last + self.every

    def maybe_start(self) -> asyncio.Task[int] | None:
        """Start a round when one is due and an Alertmanager URL is configured."""
        now = self._clock()
        if not self.due(now):
            return None
        self._last = now
        if not any(is_alertmanager(url) for url in self._urls().values()):
            return None
        self._task = asyncio.create_task(self.round(), name="alertmanager re-posts")
        self._task.add_done_callback(_log_failure)
        return self._task

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def round(self) -> int:
        """One round: read the standing alerts, post each URL's (those of shards held here);
        how many alerts were posted and accepted."""
        urls = {uid: url for uid, url in self._urls().items() if is_alertmanager(url)}
        if not urls:
            return 0
        now = self._clock()
        rows = await self._standing_alerts(list(urls), now - RESOLVED_KEPT_SECONDS)
        silences = [] if self._active_silences is None else await self._active_silences(now)
        by_url: dict[str, list[StoredAlert]] = {}
        for row in standing(rows):
            if row.alert.reason != "resolved" and any(s.matches(row.alert) for s in silences):
                continue  # silenced here: Alertmanager lets it end at its endsAt
            if self._holds(REPOST_SOURCE, f"{row.alert.rule}|{row.alert.subject}"):
                by_url.setdefault(row.url_id, []).append(StoredAlert(row.alert, row.created_at))
        posted = 0
        for url_id, alerts in by_url.items():
            outcome = await self._post(urls[url_id], alerts, now)
            if outcome.accepted:
                posted += len(alerts)
            else:
                log.warning(
                    "alertmanager re-post failed; the next round tries again",
                    url_id=url_id,
                    alerts=len(alerts),
                    error=outcome.refused,
                )
        return posted


async def _post_in_thread(
    url: str, alerts: Sequence[StoredAlert], now: float, *, firing_ttl: float = FIRING_TTL
) -> Outcome:
    return await asyncio.to_thread(partial(post, firing_ttl=firing_ttl), url, alerts, now)


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("alertmanager re-posts failed", error=repr(task.exception()))
