"""The ``webhook://`` channel's pure parts (URLs, Alertmanager's fingerprint, the body of one
alert and of a digest) and its posts' outcomes against a mocked transport."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from watcher.core.events import AlertMessage, Grouping, Reason, inventory_key
from watcher.delivery import webhook
from watcher.delivery.notifier import ByScheme, Message, Outcome, StoredAlert
from watcher.delivery.notify_check import unreadable_urls
from watcher.delivery.webhook import Endpoint, body, endpoint, fingerprint, post

from support.sending import answering

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
SIG = "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW"


def alert(
    reason: Reason = "firing",
    *,
    subject: str = "Vote111",
    facts: dict[str, Any] | None = None,
    body_text: str = "the body",
    grouping: Grouping | None = None,
    dedup_key: str | None = None,
) -> AlertMessage:
    return AlertMessage(
        rule="treasury",
        severity="critical",
        subject=subject,
        reason=reason,
        dedup_key=dedup_key or f"treasury|{subject}|1|{reason}",
        title=f"[CRITICAL] treasury: {subject}",
        body=body_text,
        channels=("hook",),
        facts={"kind": "new_transactions", "subject": subject, **(facts or {})},
        grouping=grouping,
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("webhook://127.0.0.1:8080/hook", Endpoint("http://127.0.0.1:8080/hook")),
        ("webhook://hooks.example.com", Endpoint("http://hooks.example.com/")),
        ("webhooks://h.example.com/a/b?team=ops", Endpoint("https://h.example.com/a/b?team=ops")),
        ("webhook://[::1]:9000/x", Endpoint("http://[::1]:9000/x")),
        ("webhook://ops:p%40ss@h.example/x", Endpoint("http://h.example/x", ("ops", "p@ss"))),
        ("webhook://", None),
        ("webhook://h:99999/", None),
        ("json://h/", None),
    ],
)  # fmt: skip
def test_a_webhook_url_names_where_it_posts(url: str, expected: Endpoint | None) -> None:
    assert endpoint(url) == expected


def test_credentials_go_in_a_header_never_in_the_url_or_repr() -> None:
    where = endpoint("webhook://ops:hunter22@h.example.com/x")
    assert where is not None
    assert "hunter22" not in where.url and "hunter22" not in repr(where)
    assert where.headers() == {"Authorization": "Basic b3BzOmh1bnRlcjIy"}


def test_watcher_check_accepts_the_scheme_and_refuses_a_broken_one() -> None:
    channels = {"a": ["webhook://127.0.0.1:8080/x", "webhooks://h:notaport/", "webhook://h/#f"]}
    assert list(unreadable_urls(channels)) == [("a", 1), ("a", 2)]


def test_the_fingerprint_is_alertmanagers() -> None:
    # As a real Alertmanager 0.25 named this label set (checked against it end to end too).
    labels = {"alertname": "my-validator", "kind": "delinquent_validators"}
    labels |= {"severity": "critical", "subject": "Vote1ü"}
    assert fingerprint(labels) == "8e4da5a670f38e0a"
    assert fingerprint(dict(reversed(labels.items()))) == "8e4da5a670f38e0a"


@pytest.mark.parametrize(
    ("message", "reason", "status"),
    [
        (alert("firing"), "firing", "firing"),
        (alert("repeat"), "firing", "firing"),
        (alert("resolved"), "resolved", "resolved"),
        (alert("event"), "event", "firing"),
        (
            alert(
                "event",
                facts={"what": "inventory", "count": 3},
                dedup_key=inventory_key("treasury", "Vote111", 1),
            ),
            "inventory",
            "firing",
        ),
    ],
)
def test_each_alert_says_its_reason(message: AlertMessage, reason: str, status: str) -> None:
    posted = body(Message("t", "b", "critical", "n1", [StoredAlert(message, T0)]), T0 + 5)
    [shown] = posted["alerts"]
    [mine] = posted["watcher"]["alerts"]
    assert (mine["reason"], mine["repeat"]) == (reason, message.reason == "repeat")
    assert (shown["status"], posted["status"]) == (status, status)
    if status == "firing":
        assert shown["endsAt"] == "0001-01-01T00:00:00Z"
    else:
        assert shown["endsAt"] == "2027-01-15T08:00:00.000Z"  # when it resolved


def test_one_alert_in_full() -> None:
    text = f"Signature {SIG}\n  https://explorer.solana.com/tx/{SIG}\nRunbook: https://rb.example/t"
    message = alert("firing", body_text=text, facts={"runbook": "https://rb.example/t"})
    posted = body(Message("the title", text, "critical", "n1", [StoredAlert(message, T0)]), T0)
    labels = {
        "alertname": "treasury",
        "kind": "new_transactions",
        "severity": "critical",
        "subject": "Vote111",
        "type": "state",
    }
    assert posted == {
        "version": "4",
        "groupKey": '{}:{alertname="treasury", subject="Vote111"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "watcher",
        "groupLabels": {"alertname": "treasury", "subject": "Vote111"},
        "commonLabels": labels,
        "commonAnnotations": {
            "summary": "[CRITICAL] treasury: Vote111",
            "description": text,
            "runbook_url": "https://rb.example/t",
        },
        "externalURL": "",
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": {
                    "summary": "[CRITICAL] treasury: Vote111",
                    "description": text,
                    "runbook_url": "https://rb.example/t",
                },
                "startsAt": "2027-01-15T08:00:00.000Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": f"https://explorer.solana.com/tx/{SIG}",
                "fingerprint": fingerprint(labels),
            }
        ],
        "watcher": {
            "version": 1,
            "id": "n1",
            "title": "the title",
            "text": text,
            "alerts": [
                {
                    "id": "treasury|Vote111|1|firing",
                    "fingerprint": fingerprint(labels),
                    "rule": "treasury",
                    "kind": "new_transactions",
                    "severity": "critical",
                    "subject": "Vote111",
                    "reason": "firing",
                    "repeat": False,
                    "title": "[CRITICAL] treasury: Vote111",
                    "text": text,
                    "facts": message.facts,
                    "links": [f"https://explorer.solana.com/tx/{SIG}", "https://rb.example/t"],
                    "queued_at": "2027-01-15T08:00:00.000Z",
                }
            ],
        },
    }
    json.dumps(posted)  # JSON as it is


def test_a_digest_is_one_post_of_all_its_alerts() -> None:
    grouping = Grouping("tx", 0.0, 0.0)
    alerts = [
        StoredAlert(alert("event", subject=s, grouping=grouping), T0) for s in ("A", "B", "C")
    ]
    posted = body(Message("3 new transactions", "…", "critical", "n2", alerts), T0)
    assert [a["labels"]["subject"] for a in posted["alerts"]] == ["A", "B", "C"]
    assert [a["subject"] for a in posted["watcher"]["alerts"]] == ["A", "B", "C"]
    assert posted["groupLabels"] == {"alertname": "treasury"}
    assert "subject" not in posted["commonLabels"]
    assert posted["watcher"]["title"] == "3 new transactions"


def test_a_message_without_alerts_is_one_short_info_alert() -> None:
    posted = body(Message("watcher test notification", "hello", "info", ""), T0)
    [mine] = posted["watcher"]["alerts"]
    assert (mine["rule"], mine["severity"], mine["reason"]) == ("watcher_test", "info", "event")
    assert mine["text"] == "hello"


@pytest.mark.parametrize(
    ("status", "accepted", "final"),
    [
        (200, True, False),
        (204, True, False),
        (400, False, True),
        (401, False, True),
        (408, False, False),
        (429, False, False),
        (500, False, False),
    ],
)
def test_a_post_is_accepted_retried_or_final(status: int, accepted: bool, final: bool) -> None:
    seen: list[httpx.Request] = []
    url = "webhook://ops:hunter22@hooks.example.com:8080/in?team=ops"
    message = Message("t", "b", "critical", "n1", [StoredAlert(alert(), T0)])
    outcome = post(url, message, T0, client=answering(status, seen))
    assert (outcome.accepted, outcome.final) == (accepted, final)
    assert str(seen[0].url) == "http://hooks.example.com:8080/in?team=ops"
    assert seen[0].headers["authorization"] == "Basic b3BzOmh1bnRlcjIy"
    assert seen[0].headers["x-watcher-id"] == "n1"
    assert json.loads(seen[0].content)["watcher"]["alerts"][0]["rule"] == "treasury"
    assert "hunter22" not in (outcome.refused or "") and "hooks.example" not in (
        outcome.refused or ""
    )


def test_an_unreachable_webhook_is_retried_and_its_error_names_no_secret() -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}", request=request)

    client = httpx.Client(transport=httpx.MockTransport(fail))
    message = Message("t", "b", "critical", "n1", [StoredAlert(alert(), T0)])
    outcome = post("webhook://ops:hunter22@h.example.com/x", message, T0, client=client)
    assert not outcome.accepted and not outcome.final
    assert outcome.refused == "the webhook is unreachable (ConnectError)"


class Recording:
    def __init__(self) -> None:
        self.urls: list[str] = []

    def send(self, url: str, message: Message) -> Outcome:
        self.urls.append(url)
        return Outcome()


def test_webhook_urls_are_sent_here_every_other_further_on() -> None:
    mine, other = Recording(), Recording()
    notifier = ByScheme(dict.fromkeys(webhook.SCHEMES, mine), other)
    message = Message("t", "b", "info", "n")
    for url in ("webhook://h/x", "WEBHOOKS://h/x", "json://h/x", "alertmanager://h"):
        notifier.send(url, message)
    assert (mine.urls, other.urls) == (
        ["webhook://h/x", "WEBHOOKS://h/x"],
        ["json://h/x", "alertmanager://h"],
    )
    assert webhook.is_webhook("webhooks://h") and not webhook.is_webhook("json://h")
