"""PagerDuty and Opsgenie close what they open: what Apprise's plugins (and watcher's own
Opsgenie close) would send, captured at the ``requests`` level (the services cannot run here).

One episode's firing and resolution carry one key (PagerDuty: ``dedup_key``, trigger then
resolve; Opsgenie: the alias, created then closed by alias); the next episode gets a new key;
a new notifier (a restarted watcher, another instance) keeps the key, since it comes from the
stored alert."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
import requests

from watcher.core.events import AlertMessage, Reason
from watcher.delivery import paging
from watcher.delivery.apprise_notifier import AppriseNotifier
from watcher.delivery.notifier import Message, StoredAlert, Tone

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


def send(url: str, alert: StoredAlert, notifier: AppriseNotifier | None = None) -> None:
    tone: Tone = "resolved" if alert.alert.reason == "resolved" else "critical"
    message = Message(alert.alert.title, alert.alert.body, tone, "n-1", [alert])
    outcome = (notifier or AppriseNotifier()).send(url, message)
    assert outcome.accepted, outcome.refused


def test_pagerduty_resolves_the_incident_its_firing_opened(posts: list[dict[str, Any]]) -> None:
    send(PAGERDUTY, stored("firing"))
    send(PAGERDUTY, stored("repeat"))
    send(PAGERDUTY, stored("resolved"), AppriseNotifier())  # after a restart
    send(PAGERDUTY, stored("firing", episode=2))
    events = [(p["json"]["event_action"], p["json"]["dedup_key"]) for p in posts]
    key_1 = paging.episode_key(stored("firing").alert)
    key_2 = paging.episode_key(stored("firing", episode=2).alert)
    assert events == [
        ("trigger", key_1),
        ("trigger", key_1),
        ("resolve", key_1),
        ("trigger", key_2),
    ]
    assert key_1 != key_2


def test_pagerduty_keeps_an_action_the_user_set(posts: list[dict[str, Any]]) -> None:
    send(f"{PAGERDUTY}?action=trigger", stored("resolved"))
    [event] = posts
    assert event["json"]["event_action"] == "trigger"
    assert event["json"]["dedup_key"] == paging.episode_key(stored("resolved").alert)


def test_opsgenie_closes_by_the_alias_its_firing_carried(posts: list[dict[str, Any]]) -> None:
    send(OPSGENIE, stored("firing"))
    send(OPSGENIE, stored("resolved"), AppriseNotifier())  # another process: closed all the same
    send(OPSGENIE, stored("firing", episode=2))
    key_1 = paging.episode_key(stored("firing").alert)
    key_2 = paging.episode_key(stored("firing", episode=2).alert)
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
        (PAGERDUTY, "event", None),
        (PAGERDUTY, "firing", "dedup={key}&action=map"),
        (f"{PAGERDUTY}?dedup=x", "firing", "action=map"),
        (f"{PAGERDUTY}?dedup=x&action=trigger", "firing", None),
        (OPSGENIE, "repeat", "alias={key}"),
    ],
)
def test_which_urls_get_the_key(url: str, reason: Reason, expected: str | None) -> None:
    alert = stored(reason)
    keyed = paging.keyed_url(url, [alert])
    if expected is None:
        assert keyed is None
        return
    key = paging.episode_key(alert.alert)
    assert keyed is not None and keyed.endswith(expected.format(key=key))


def test_the_key_is_per_rule_subject_and_episode() -> None:
    keys = {
        paging.episode_key(stored("firing", 1, "A").alert),
        paging.episode_key(stored("firing", 2, "A").alert),
        paging.episode_key(stored("firing", 1, "B").alert),
    }
    assert len(keys) == 3
    assert paging.episode_key(stored("resolved", 1, "A").alert) in keys
