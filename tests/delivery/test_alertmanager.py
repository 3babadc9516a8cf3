"""The Alertmanager channel's pure parts (URLs, payloads, what stands), its posts' outcomes
against a mocked transport, and the re-posts' timing with an injected clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from watcher.core.events import AlertMessage, Grouping, Reason, Silence
from watcher.core.outbox_rows import DeliveryRow
from watcher.delivery import alertmanager, notifier
from watcher.delivery.alertmanager import Endpoint, Reposter, endpoint, payload, post, standing
from watcher.delivery.channels import Channels
from watcher.delivery.notifier import Outcome, StoredAlert
from watcher.delivery.notify_check import unreadable_urls

from support.sending import answering

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def alert(
    reason: Reason = "firing",
    *,
    rule: str = "delinquent",
    subject: str = "Vote111",
    runbook: str | None = None,
    firing_since: str | None = "2027-01-15T07:58:00Z",
    kind: str | None = "delinquent_validators",
) -> AlertMessage:
    facts: dict[str, Any] = {"rule": rule, "subject": subject, "reason": reason}
    if kind is not None:
        facts["kind"] = kind
    if runbook is not None:
        facts["runbook"] = runbook
    if firing_since is not None and reason != "event":
        facts["firing_since"] = firing_since
    return AlertMessage(
        rule=rule,
        severity="critical",
        subject=subject,
        reason=reason,
        dedup_key=f"{rule}|{subject}|1|{reason}",
        title=f"[CRITICAL] {rule}: {subject}",
        body="the body",
        channels=("am",),
        facts=facts,
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("alertmanager://127.0.0.1:9093", Endpoint("http://127.0.0.1:9093/api/v2/alerts")),
        ("alertmanager://am.example.com", Endpoint("http://am.example.com/api/v2/alerts")),
        (
            "alertmanagers://am.example.com/prefix/",
            Endpoint("https://am.example.com/prefix/api/v2/alerts"),
        ),
        (
            "ALERTMANAGERS://u%40x:p%3Ass@am.example.com:8443/a/b",
            Endpoint("https://am.example.com:8443/a/b/api/v2/alerts", ("u@x", "p:ss")),
        ),
        ("alertmanager://[::1]:9093", Endpoint("http://[::1]:9093/api/v2/alerts")),
        ("alertmanager://", None),
        ("alertmanager://host:notaport", None),
        ("alertmanager://host?x=1", None),
        ("json://host", None),
    ],
)
def test_an_alertmanager_url_names_its_api_and_credentials(
    url: str, expected: Endpoint | None
) -> None:
    found = endpoint(url)
    assert found == expected
    if found is not None and expected is not None:
        assert found.auth == expected.auth


def test_credentials_go_in_a_header_never_in_the_url_or_repr() -> None:
    found = endpoint("alertmanager://admin:s3cret-pw@am.example.com")
    assert found is not None
    assert "s3cret" not in found.url and "s3cret" not in repr(found)
    assert found.headers() == {"Authorization": "Basic YWRtaW46czNjcmV0LXB3"}


def test_watcher_check_accepts_the_scheme_and_refuses_a_broken_one() -> None:
    channels = {"am": ["alertmanager://127.0.0.1:9093", "alertmanager://h:x"]}
    assert list(unreadable_urls(channels)) == [("am", 1)]


@pytest.mark.parametrize(
    ("reason", "created_at", "now", "starts", "ends"),
    [
        # Firing: since the episode fired; ends 4 minutes after the post.
        ("firing", T0, T0, "2027-01-15T07:58:00.000Z", "2027-01-15T08:04:00.000Z"),
        ("firing", T0, T0 + 600, "2027-01-15T07:58:00.000Z", "2027-01-15T08:14:00.000Z"),
        # A reminder is the same alert.
        ("repeat", T0, T0 + 60, "2027-01-15T07:58:00.000Z", "2027-01-15T08:05:00.000Z"),
        # Resolved: ends the moment it resolved, whenever it is posted.
        ("resolved", T0, T0 + 300, "2027-01-15T07:58:00.000Z", "2027-01-15T08:00:00.000Z"),
        # An event ends by itself, 5 minutes after its post.
        ("event", T0, T0, "2027-01-15T08:00:00.000Z", "2027-01-15T08:05:00.000Z"),
        ("event", T0, T0 + 120.5, "2027-01-15T08:00:00.000Z", "2027-01-15T08:07:00.500Z"),
    ],
)
def test_the_payload_follows_prometheus_sender(
    reason: Reason, created_at: float, now: float, starts: str, ends: str
) -> None:
    posted = payload(StoredAlert(alert(reason), created_at), now)
    assert posted["startsAt"] == starts
    assert posted["endsAt"] == ends


def test_labels_are_the_identity_and_annotations_the_words() -> None:
    for reason in ("firing", "repeat", "resolved"):
        posted = payload(StoredAlert(alert(reason, runbook="https://wiki/x"), T0), T0)
        assert posted["labels"] == {
            "alertname": "delinquent",
            "kind": "delinquent_validators",
            "severity": "critical",
            "subject": "Vote111",
            "type": "state",
        }
        assert posted["annotations"] == {
            "summary": "[CRITICAL] delinquent: Vote111",
            "description": "the body",
            "runbook_url": "https://wiki/x",
        }
    assert "runbook_url" not in payload(StoredAlert(alert(), T0), T0)["annotations"]


def event(key: str, subject: str = "Mint111") -> AlertMessage:
    return AlertMessage(
        "mint-powers", "critical", subject, "event", key, "t", "b", (), {"kind": "powers"}
    )


def test_two_events_on_one_subject_are_two_alerts() -> None:
    # Two changes of one mint seconds apart: each its own fingerprint in Alertmanager.
    first = payload(StoredAlert(event("mint-powers|Mint111|7|freeze_authority"), T0), T0)
    second = payload(StoredAlert(event("mint-powers|Mint111|8|mint_authority"), T0), T0)
    assert first["labels"]["type"] == second["labels"]["type"] == "event"
    assert first["labels"]["event_id"] != second["labels"]["event_id"]
    assert {k: v for k, v in first["labels"].items() if k != "event_id"} == {
        "alertname": "mint-powers",
        "kind": "powers",
        "severity": "critical",
        "subject": "Mint111",
        "type": "event",
    }


def test_an_event_id_is_short_and_the_same_on_every_post() -> None:
    long_key = "tx|Addr111|" + "5" * 88 + "|event"
    ids = {
        payload(StoredAlert(event(long_key), T0), now)["labels"]["event_id"]
        for now in (T0, T0 + 60, T0 + 3600)
    }
    [only] = ids
    assert len(only) == 16 and int(only, 16) >= 0
    assert only == notifier.event_id(event(long_key))


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (alert(kind=None), "builtin"),
        (alert(kind="balance"), "balance"),
        (
            AlertMessage(
                "tx",
                "info",
                "Addr",
                "event",
                "k",
                "t",
                "b",
                (),
                {},
                Grouping(kind="transactions"),
            ),
            "transactions",
        ),
    ],
)
def test_the_kind_label(message: AlertMessage, kind: str) -> None:
    assert payload(StoredAlert(message, T0), T0)["labels"]["kind"] == kind


def test_a_firing_without_its_start_in_the_facts_starts_when_queued() -> None:
    posted = payload(StoredAlert(alert(firing_since=None), T0), T0)
    assert posted["startsAt"] == "2027-01-15T08:00:00.000Z"


def row(alert_id: int, message: AlertMessage, url_id: str = "u1") -> DeliveryRow:
    return DeliveryRow(alert_id, alert_id, "am", url_id, "sent", 1, T0, T0, message)


def test_what_stands_is_the_newest_alert_per_url_and_subject() -> None:
    old_resolution = row(1, alert("resolved", subject="A"))
    firing_again = row(2, alert("firing", subject="A"))
    reminder = row(3, alert("repeat", subject="B"))
    resolved_b = row(4, alert("resolved", subject="B"))
    other_url = row(5, alert("resolved", subject="A"), url_id="u2")
    kept = standing([old_resolution, firing_again, reminder, resolved_b, other_url])
    assert [r.alert_id for r in kept] == [2, 4, 5]


# -- posting ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "accepted", "final"),
    [
        (200, True, False),
        (400, False, True),
        (401, False, True),
        (429, False, False),
        (500, False, False),
        (503, False, False),
    ],
)
def test_a_post_is_accepted_retried_or_final(status: int, accepted: bool, final: bool) -> None:
    seen: list[httpx.Request] = []
    url = "alertmanager://ops:hunter22@am.example.com:9093/am"
    outcome = post(url, [StoredAlert(alert(), T0)], T0, client=answering(status, seen))
    assert (outcome.accepted, outcome.final) == (accepted, final)
    assert str(seen[0].url) == "http://am.example.com:9093/am/api/v2/alerts"
    assert seen[0].headers["authorization"].startswith("Basic ")
    assert json.loads(seen[0].content)[0]["labels"]["alertname"] == "delinquent"
    assert "hunter22" not in (outcome.refused or "") and "am.example" not in (outcome.refused or "")


def test_an_unreachable_alertmanager_is_retried_and_its_error_names_no_secret() -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}", request=request)

    client = httpx.Client(transport=httpx.MockTransport(fail))
    url = "alertmanager://ops:hunter22@am.example.com:9093"
    outcome = post(url, [StoredAlert(alert(), T0)], T0, client=client)
    assert not outcome.accepted and not outcome.final
    assert outcome.refused == "Alertmanager unreachable (ConnectError)"


# -- the re-posts -------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


async def test_standing_alerts_are_posted_again_every_minute_to_their_urls() -> None:
    clock = Clock()
    asked: list[tuple[list[str], float]] = []
    posts: list[tuple[str, list[str], float]] = []
    rows = [row(1, alert("firing", subject="A")), row(2, alert("resolved", subject="B"))]

    async def standing_alerts(url_ids: Sequence[str], since: float) -> list[DeliveryRow]:
        asked.append((list(url_ids), since))
        return rows

    async def record(url: str, alerts: Sequence[StoredAlert], now: float) -> Outcome:
        posts.append((url, [a.alert.subject for a in alerts], now))
        return Outcome()

    urls = {"u1": "alertmanager://127.0.0.1:9093", "u2": "json://127.0.0.1:1/"}
    reposter = Reposter(
        standing_alerts, lambda _s, _t: True, lambda: urls, clock, post_in_thread=record
    )
    assert reposter.maybe_start() is None  # the first posts are the outbox's
    clock.now += 59.9
    assert reposter.maybe_start() is None
    clock.now += 0.1
    task = reposter.maybe_start()
    assert task is not None
    assert reposter.maybe_start() is None  # one round at a time
    assert await task == 2
    assert asked == [(["u1"], clock.now - 900.0)]  # resolutions of the last 15 minutes
    assert posts == [("alertmanager://127.0.0.1:9093", ["A", "B"], clock.now)]
    clock.now += 30
    assert reposter.maybe_start() is None
    clock.now += 30
    task = reposter.maybe_start()
    assert task is not None and await task == 2


async def test_only_the_alerts_of_shards_held_are_posted_again() -> None:
    posts: list[list[str]] = []

    async def standing_alerts(url_ids: Sequence[str], since: float) -> list[DeliveryRow]:
        return [row(1, alert(subject="mine")), row(2, alert(subject="theirs"))]

    async def record(url: str, alerts: Sequence[StoredAlert], now: float) -> Outcome:
        posts.append([a.alert.subject for a in alerts])
        return Outcome()

    def holds(source: str, target: str) -> bool:
        assert source == alertmanager.REPOST_SOURCE
        return target == "delinquent|mine"

    urls = {"u1": "alertmanager://127.0.0.1:9093"}
    reposter = Reposter(standing_alerts, holds, lambda: urls, Clock(), post_in_thread=record)
    assert await reposter.round() == 1
    assert posts == [["mine"]]


async def test_no_alertmanager_url_no_round() -> None:
    clock = Clock()

    async def standing_alerts(url_ids: Sequence[str], since: float) -> list[DeliveryRow]:
        raise AssertionError("not asked")

    reposter = Reposter(standing_alerts, lambda _s, _t: True, lambda: {"u": "json://x/"}, clock)
    reposter.maybe_start()
    clock.now += 120
    assert reposter.maybe_start() is None
    await asyncio.sleep(0)


def test_the_sender_asks_for_rounds_only_when_its_channels_hold_an_alertmanager() -> None:
    # Outbox_sender skips the re-post rounds at each wake when this is False.
    assert Channels.of({"ops": ["json://x/", "alertmanager://127.0.0.1:9093"]}).has_alertmanager
    assert Channels.of({"ops": ["json://x/"], "chat": ["alertmanagers://h:9093"]}).has_alertmanager
    assert not Channels.of({"ops": ["json://x/", "mailto://a@b.c"]}).has_alertmanager


def silence(rule: str = "delinquent", subject: str | None = None) -> Silence:
    return Silence(1, rule, subject, T0 - 60, T0 + 3600, "maintenance", "alice", T0 - 60)


@pytest.mark.parametrize(
    ("silences", "posted"),
    [
        ([], ["A", "B", "C"]),
        ([silence(subject="A")], ["B", "C"]),
        ([silence()], ["C"]),  # every subject; C's resolution still ends it there
        ([silence(rule="other")], ["A", "B", "C"]),
    ],
)
async def test_a_silenced_firing_alert_is_not_posted_again(
    silences: list[Silence], posted: list[str]
) -> None:
    posts: list[str] = []
    asked: list[float] = []

    async def standing_alerts(url_ids: Sequence[str], since: float) -> list[DeliveryRow]:
        return [
            row(1, alert("firing", subject="A")),
            row(2, alert("repeat", subject="B")),
            row(3, alert("resolved", subject="C")),
        ]

    async def active_silences(now: float) -> list[Silence]:
        asked.append(now)
        return silences

    async def record(url: str, alerts: Sequence[StoredAlert], now: float) -> Outcome:
        posts.extend(a.alert.subject for a in alerts)
        return Outcome()

    urls = {"u1": "alertmanager://127.0.0.1:9093"}
    reposter = Reposter(
        standing_alerts,
        lambda _s, _t: True,
        lambda: urls,
        Clock(),
        active_silences=active_silences,
        post_in_thread=record,
    )
    assert await reposter.round() == len(posted)
    assert posts == posted
    assert asked == [T0]  # read at each round: a silence that ended lets its alert back


def test_a_firing_alert_ends_four_repost_intervals_after_its_post() -> None:
    stored = StoredAlert(alert(), T0)
    assert payload(stored, T0)["endsAt"] == "2027-01-15T08:04:00.000Z"  # 4 x 1 minute
    assert payload(stored, T0 + 1, firing_ttl=4.0)["endsAt"] == "2027-01-15T08:00:05.000Z"
