"""PagerDuty and Opsgenie close what they open, and never an event: what Apprise's plugins (and
watcher's own Opsgenie close) would send, captured at the ``requests`` level (the services
cannot run here).

One episode's firing and resolution carry one key (PagerDuty: ``dedup_key``, trigger then
resolve; Opsgenie: the alias, created then closed by alias); the next episode gets a new key;
a new notifier (a restarted watcher, another instance) keeps the key, since it comes from the
stored alert. Each event is a trigger (an Opsgenie alert created) with a key of its own,
whatever its severity: two events of one subject are two incidents, and none is resolved."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any
from unittest import mock

import pytest
import requests

from watcher.core.events import AlertMessage, Reason, Severity
from watcher.delivery import notifier
from watcher.delivery.apprise_adapter import AppriseNotifier
from watcher.delivery.notifier import Message, StoredAlert, Tone
from watcher.delivery.paging import episode_key, keyed_url, message_key

PAGERDUTY = "pagerduty://integr4tionKey0123@ap1Key0123456789"
OPSGENIE = "opsgenie://0psg3nieApiKey0123456789/@ops-team"
T0 = 1_800_000_000.0


def stored(reason: Reason, episode: int = 1, subject: str = "Vote111") -> StoredAlert:
    head = "RESOLVED" if reason == "resolved" else "CRITICAL"
    return StoredAlert(
        AlertMessage(
            rule="my-validator",
            severity="critical",
            subject=subject,
            reason=reason,
            dedup_key=f"my-validator|{subject}|{episode}|{reason}",
            title=f"[{head}] my-validator: {subject} is delinquent",
            body="the body",
            channels=("pager",),
        ),
        T0,
    )


@pytest.fixture
def posts() -> Iterator[list[dict[str, Any]]]:
    """Every ``requests.post`` made, as url, params and JSON body; each answered 202."""
    seen: list[dict[str, Any]] = []

    def post(url: str, *args: Any, **kwargs: Any) -> requests.Response:
        data = kwargs.get("json")
        if data is None and kwargs.get("data"):
            data = json.loads(kwargs["data"])
        seen.append({"url": url, "params": kwargs.get("params"), "json": data})
        answer = requests.Response()
        answer.status_code = 202
        answer._content = b'{"requestId": "r-1", "result": "Request will be processed"}'
        return answer

    with mock.patch("requests.post", side_effect=post):
        yield seen


def event(change: str, severity: Severity = "critical", subject: str = "Mint111") -> StoredAlert:
    return StoredAlert(
        AlertMessage(
            rule="mint-powers",
            severity=severity,
            subject=subject,
            reason="event",
            dedup_key=f"mint-powers|{subject}|{change}|event",
            title=f"[{severity.upper()}] mint-powers: mint {subject}: {change}",
            body="the body",
            channels=("pager",),
        ),
        T0,
    )


def send(
    url: str, alert: StoredAlert | Sequence[StoredAlert], notifier: AppriseNotifier | None = None
) -> None:
    alerts = [alert] if isinstance(alert, StoredAlert) else list(alert)
    first = alerts[0].alert
    tone: Tone = "resolved" if first.reason == "resolved" else first.severity
    message = Message(first.title, first.body, tone, "n-1", alerts)
    outcome = (notifier or AppriseNotifier()).send(url, message)
    assert outcome.accepted, outcome.refused


def test_pagerduty_resolves_the_incident_its_firing_opened(posts: list[dict[str, Any]]) -> None:
    send(PAGERDUTY, stored("firing"))
    send(PAGERDUTY, stored("repeat"))
    send(PAGERDUTY, stored("resolved"), AppriseNotifier())  # after a restart
    send(PAGERDUTY, stored("firing", episode=2))
    events = [(p["json"]["event_action"], p["json"]["dedup_key"]) for p in posts]
    key_1 = episode_key(stored("firing").alert)
    key_2 = episode_key(stored("firing", episode=2).alert)
    assert events == [
        ("trigger", key_1),
        ("trigger", key_1),
        ("resolve", key_1),
        ("trigger", key_2),
    ]
    assert key_1 != key_2


@pytest.mark.parametrize("url", [PAGERDUTY, f"{PAGERDUTY}?action=map"])
def test_pagerduty_triggers_each_event_with_its_own_key_and_never_resolves_it(
    posts: list[dict[str, Any]], url: str
) -> None:
    # Two changes of one mint, then an info one: three incidents, each its own key.
    first, second = event("freeze authority removed"), event("mint authority changed")
    send(url, first)
    send(url, second, AppriseNotifier())
    send(url, event("metadata changed", "info"))
    sent = [(p["json"]["event_action"], p["json"]["dedup_key"]) for p in posts]
    assert [action for action, _ in sent] == ["trigger", "trigger", "trigger"]
    keys = [key for _, key in sent]
    assert len(set(keys)) == 3
    assert keys[0] == f"watcher-event-{notifier.event_id(first.alert)}"
    assert keys[1] == f"watcher-event-{notifier.event_id(second.alert)}"


def test_a_digest_of_events_is_one_trigger_with_a_key_of_its_own(
    posts: list[dict[str, Any]],
) -> None:
    digest = [event("a"), event("b")]
    send(PAGERDUTY, digest)
    send(PAGERDUTY, digest)  # a retry of the same digest: the same key
    send(PAGERDUTY, event("a"))
    keys = [p["json"]["dedup_key"] for p in posts]
    assert keys[0] == keys[1] != keys[2]
    assert {p["json"]["event_action"] for p in posts} == {"trigger"}


def test_opsgenie_creates_each_event_under_its_own_alias_and_never_closes_it(
    posts: list[dict[str, Any]],
) -> None:
    first, second = event("freeze authority removed"), event("mint authority changed")
    send(OPSGENIE, first)
    send(OPSGENIE, second)
    # Apprise's default would make an info message a note on an alert of this process: none.
    send(OPSGENIE, event("metadata changed", "info"), AppriseNotifier())
    assert [p["url"] for p in posts] == ["https://api.opsgenie.com/v2/alerts"] * 3
    aliases = [p["json"]["alias"] for p in posts]
    assert aliases[:2] == [
        f"watcher-event-{notifier.event_id(first.alert)}",
        f"watcher-event-{notifier.event_id(second.alert)}",
    ]
    assert len(set(aliases)) == 3


def test_an_info_state_alert_opens_an_opsgenie_alert(posts: list[dict[str, Any]]) -> None:
    firing = stored("firing")
    info = StoredAlert(dataclasses.replace(firing.alert, severity="info"), T0)
    send(OPSGENIE, info)
    [created] = posts
    assert created["url"] == "https://api.opsgenie.com/v2/alerts"
    assert created["json"]["alias"] == episode_key(firing.alert)


def test_pagerduty_keeps_an_action_the_user_set(posts: list[dict[str, Any]]) -> None:
    send(f"{PAGERDUTY}?action=trigger", stored("resolved"))
    [event] = posts
    assert event["json"]["event_action"] == "trigger"
    assert event["json"]["dedup_key"] == episode_key(stored("resolved").alert)


def test_opsgenie_closes_by_the_alias_its_firing_carried(posts: list[dict[str, Any]]) -> None:
    send(OPSGENIE, stored("firing"))
    send(OPSGENIE, stored("resolved"), AppriseNotifier())  # another process: closed all the same
    send(OPSGENIE, stored("firing", episode=2))
    key_1 = episode_key(stored("firing").alert)
    key_2 = episode_key(stored("firing", episode=2).alert)
    created, closed, again = posts
    assert created["url"] == "https://api.opsgenie.com/v2/alerts"
    assert created["json"]["alias"] == key_1
    assert closed["url"] == f"https://api.opsgenie.com/v2/alerts/{key_1}/close"
    assert closed["params"] == {"identifierType": "alias"}
    assert again["json"]["alias"] == key_2


def test_opsgenie_in_europe_is_closed_in_europe(posts: list[dict[str, Any]]) -> None:
    send(f"{OPSGENIE}?region=eu", stored("resolved"))
    [closed] = posts
    assert closed["url"].startswith("https://api.eu.opsgenie.com/v2/alerts/watcher-")


def test_an_opsgenie_alias_the_user_set_is_kept(posts: list[dict[str, Any]]) -> None:
    send(f"{OPSGENIE}?alias=mine", stored("firing"))
    assert posts[0]["json"]["alias"] == "mine"


@pytest.mark.parametrize(
    ("url", "reason", "expected"),
    [
        ("json://host/", "firing", None),
        (PAGERDUTY, "event", "dedup={key}&action=trigger"),
        (f"{PAGERDUTY}?action=map", "event", "action=map&dedup={key}"),
        (PAGERDUTY, "firing", "dedup={key}&action=map"),
        (f"{PAGERDUTY}?dedup=x", "firing", "action=map"),
        (f"{PAGERDUTY}?dedup=x&action=trigger", "firing", None),
        (OPSGENIE, "repeat", "alias={key}&action=new"),
        (OPSGENIE, "event", "alias={key}&action=new"),
        (f"{OPSGENIE}?alias=mine&action=new", "event", None),
    ],
)
def test_which_urls_get_the_key(url: str, reason: Reason, expected: str | None) -> None:
    alert = stored(reason)
    keyed = keyed_url(url, [alert])
    if expected is None:
        assert keyed is None
        return
    key = message_key([alert])
    assert keyed is not None and keyed.endswith(expected.format(key=key))


def test_the_key_is_per_rule_subject_and_episode() -> None:
    keys = {
        episode_key(stored("firing", 1, "A").alert),
        episode_key(stored("firing", 2, "A").alert),
        episode_key(stored("firing", 1, "B").alert),
    }
    assert len(keys) == 3
    assert episode_key(stored("resolved", 1, "A").alert) in keys
