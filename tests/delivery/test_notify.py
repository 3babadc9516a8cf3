from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import apprise
import apprise.decorators
import pytest
import structlog
import structlog.testing

from watcher.core.events import AlertMessage, inventory_key
from watcher.core.outbox_rows import DeliveryRow, Destination, url_id
from watcher.delivery.apprise_adapter import REJECTED_URL, fit_for_url, secret_fragments
from watcher.delivery.notifier import ACCEPTED, Message, Outcome, refused
from watcher.delivery.outbox_sender import Sender
from watcher.delivery.url_worker import NOT_CONFIGURED
from watcher.state.interface import StepToCommit
from watcher.state.store import SqliteStore
from watcher.testing.receivers import JsonReceiver, SmtpReceiver

from support.sending import GivenUp, delivery_settings, make_sender, titles
from support.sending import alert_history as history
from support.values import FakeClock

DEAD_AFTER_A_MINUTE = delivery_settings(deadline=60.0)


def alert(key: str, *, channels: Sequence[str] = ("ops",), **changes: Any) -> AlertMessage:
    values: dict[str, Any] = {
        "rule": "treasury",
        "severity": "warning",
        "subject": "addr1",
        "reason": "event",
        "dedup_key": key,
        "title": f"[warning] treasury: {key}",
        "body": f"signature {key} on addr1",
        "channels": tuple(channels),
    }
    values.update(changes)
    return AlertMessage(**values)


def enqueue(
    store: SqliteStore, sender: Sender, clock: FakeClock, *alerts: AlertMessage
) -> list[int]:
    return store.commit_step(
        StepToCommit.of("signatures", "addr1", {}, alerts, sender.destinations, clock())
    )


def deliveries(store: SqliteStore) -> list[tuple[str, str, int]]:
    """(alert title, delivery status, attempts) for every delivery, oldest alert first."""
    return [
        (record.alert.title, d.status, d.attempts)
        for record in reversed(store.history(limit=1000))
        for d in record.deliveries
    ]


# -- delivery ---------------------------------------------------------------------------


async def test_an_alert_is_delivered_once_and_marked_sent(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    clock = FakeClock()
    sender = make_sender(tmp_store, {"ops": [json_receiver.url]}, clock)
    enqueue(tmp_store, sender, clock, alert("k1"))

    assert await sender.send_due() == 1
    [post] = json_receiver.received
    assert post["title"] == "[warning] treasury: k1"
    assert post["message"] == "signature k1 on addr1"
    assert post["type"] == "warning"
    [record] = history(tmp_store)
    assert record.status == "sent"
    assert record.deliveries[0].sent_at == clock.now

    clock.advance(3600)
    assert await sender.send_due() == 0
    assert len(json_receiver.received) == 1
    assert tmp_store.pending_count() == 0


async def test_a_resolution_goes_out_with_the_success_type_whatever_its_severity(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    clock = FakeClock()
    sender = make_sender(tmp_store, {"ops": [json_receiver.url]}, clock)
    critical = {"severity": "critical", "subject": "v1"}
    enqueue(tmp_store, sender, clock, alert("fired", reason="firing", **critical))
    enqueue(tmp_store, sender, clock, alert("resolved", reason="resolved", **critical))
    assert await sender.send_due() == 2
    assert [(post["title"], post["type"]) for post in json_receiver.received] == [
        ("[warning] treasury: fired", "failure"),
        ("[warning] treasury: resolved", "success"),
    ]


async def test_a_refused_delivery_is_retried_after_backoff_and_delivered_once(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    clock = FakeClock()
    sender = make_sender(
        tmp_store, {"ops": [json_receiver.url]}, clock, delivery=delivery_settings(first_retry=2.0)
    )
    enqueue(tmp_store, sender, clock, alert("k1"))
    json_receiver.refuse(1)

    assert await sender.send_due() == 0
    assert len(json_receiver.refused) == 1
    [record] = history(tmp_store)
    [delivery] = record.deliveries
    assert (record.status, delivery.status, delivery.attempts) == ("queued", "pending", 1)
    assert "error=500" in (delivery.last_error or "")

    clock.advance(1.9)  # not due yet: nothing is posted
    assert await sender.send_due() == 0
    assert len(json_receiver.refused) + len(json_receiver.received) == 1

    clock.advance(0.1)  # the first retry, 2 s after the failure
    assert await sender.send_due() == 1
    assert titles(json_receiver.received) == ["[warning] treasury: k1"]
    assert deliveries(tmp_store) == [("[warning] treasury: k1", "sent", 2)]

    clock.advance(3600)
    assert await sender.send_due() == 0
    assert len(json_receiver.received) == 1


async def test_deliveries_to_one_url_keep_their_order_across_a_retry(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    clock = FakeClock()
    sender = make_sender(tmp_store, {"ops": [json_receiver.url]}, clock)
    enqueue(tmp_store, sender, clock, alert("k1"), alert("k2"), alert("k3"))
    json_receiver.refuse(1)

    assert await sender.send_due() == 0  # k1 refused: k2 and k3 wait behind it
    assert json_receiver.received == []
    assert [s for _, s, _ in deliveries(tmp_store)] == ["pending"] * 3

    clock.advance(2.0)
    assert await sender.send_due() == 3
    assert titles(json_receiver.received) == [f"[warning] treasury: k{i}" for i in (1, 2, 3)]


async def test_a_restarted_sender_resumes_pending_rows_and_never_resends_sent_ones(
    tmp_path: Path, json_receiver: JsonReceiver
) -> None:
    path = tmp_path / "state" / "watcher.db"
    clock = FakeClock()
    channels = {"ops": [json_receiver.url]}
    store = SqliteStore(path)
    sender = make_sender(store, channels, clock)
    enqueue(store, sender, clock, alert("k1"))
    assert await sender.send_due() == 1
    json_receiver.refuse(1)
    enqueue(store, sender, clock, alert("k2"))
    assert await sender.send_due() == 0
    # k3 was claimed by a process that died mid-send: at-least-once says send it again.
    enqueue(store, sender, clock, alert("k3", channels=("ops",)))
    store.claim_due(clock())
    store.close()

    clock.advance(10)
    store = SqliteStore(path)
    restarted = make_sender(store, channels, clock)
    assert await restarted.send_due() == 2
    assert titles(json_receiver.received) == [
        "[warning] treasury: k1",
        "[warning] treasury: k2",
        "[warning] treasury: k3",
    ]
    assert [r.status for r in history(store)] == ["sent", "sent", "sent"]
    store.close()


async def test_of_two_urls_the_one_that_accepted_is_never_sent_again(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    with JsonReceiver() as refusing:
        refusing.refuse_all(True)
        clock = FakeClock()
        sender = make_sender(tmp_store, {"ops": [refusing.url, json_receiver.url]}, clock)
        enqueue(tmp_store, sender, clock, alert("k1"))

        assert await sender.send_due() == 1
        for _ in range(4):
            clock.advance(300)
            await sender.send_due()
        assert len(json_receiver.received) == 1
        assert len(refusing.refused) == 5
        assert history(tmp_store)[0].status == "partial"

        refusing.refuse_all(False)
        clock.advance(300)
        assert await sender.send_due() == 1
        assert titles(refusing.received) == ["[warning] treasury: k1"]
        assert len(json_receiver.received) == 1
        assert history(tmp_store)[0].status == "sent"


async def test_a_delivery_failing_past_the_deadline_is_given_up_and_reported(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    json_receiver.refuse_all(True)
    clock = FakeClock()
    given_up: list[tuple[DeliveryRow, str]] = []
    sender = make_sender(
        tmp_store,
        {"ops": [json_receiver.url]},
        clock,
        delivery=DEAD_AFTER_A_MINUTE,
        metrics=GivenUp(given_up),
    )
    enqueue(tmp_store, sender, clock, alert("k1"))
    assert await sender.send_due() == 0
    clock.advance(59)
    assert await sender.send_due() == 0
    assert given_up == []
    clock.advance(1)
    assert await sender.send_due() == 0

    [record] = history(tmp_store)
    assert record.status == "dead"
    assert (record.deliveries[0].status, record.deliveries[0].attempts) == ("dead", 3)
    assert [(row.alert.title, "error=500" in error) for row, error in given_up] == [
        ("[warning] treasury: k1", True)
    ]
    clock.advance(3600)
    assert await sender.send_due() == 0
    assert len(json_receiver.refused) == 3
    assert tmp_store.pending_count() == 0


# -- dead letters ---------------------------------------------------------------------------


async def test_a_dead_letter_reaches_the_fallback_channel_exactly_once(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    with JsonReceiver() as refusing:
        refusing.refuse_all(True)
        clock = FakeClock()
        channels = {"ops": [refusing.url], "alerts": [json_receiver.url]}
        sender = make_sender(
            tmp_store, channels, clock, delivery=DEAD_AFTER_A_MINUTE, fallback_channels=("alerts",)
        )
        enqueue(tmp_store, sender, clock, alert("k1"))
        assert await sender.send_due() == 0
        clock.advance(60)
        assert await sender.send_due() == 0  # given up now; its dead letter waits 2 s
        clock.advance(2)
        assert await sender.send_due() == 1

        [letter] = json_receiver.received
        assert letter["title"] == "[WARNING] watcher: notification undeliverable"
        message = letter["message"]
        assert "A notification of rule treasury could not be delivered" in message
        assert "Notification: [warning] treasury: k1" in message
        assert f"Channel: ops (URL id {url_id(refusing.url)})" in message
        assert "error=500" in message
        assert refusing.url not in message and str(refusing.port) not in message
        for _ in range(3):
            clock.advance(3600)
            await sender.send_due()
        assert len(json_receiver.received) == 1
        assert [(r.alert.dedup_key, r.status) for r in history(tmp_store)] == [
            ("k1", "dead"),
            ("dead|1", "sent"),
        ]


async def test_deliveries_dying_together_make_one_dead_letter_digest(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    with JsonReceiver() as refusing:
        refusing.refuse_all(True)
        clock = FakeClock()
        channels = {"ops": [refusing.url], "alerts": [json_receiver.url]}
        sender = make_sender(
            tmp_store,
            channels,
            clock,
            delivery=DEAD_AFTER_A_MINUTE,
            fallback_channels=("ops", "alerts"),
        )
        enqueue(tmp_store, sender, clock, alert("k1"), alert("k2"), alert("k3", rule="whales"))
        await sender.send_due()
        clock.advance(60)
        await sender.send_due()
        clock.advance(2)
        assert await sender.send_due() == 3
        # Not to the URL that just failed, although it is in a fallback channel too.
        assert [post["title"] for post in refusing.refused if "watcher" in post["title"]] == []
        [digest] = json_receiver.received
        assert digest["title"] == "[WARNING] watcher: 3 undeliverable notifications (2 rules)"
        assert (
            f"- [warning] treasury: k2 (to ops, URL id {url_id(refusing.url)})"
            in (digest["message"])
        )


async def test_a_dead_letter_that_dies_too_is_not_reported_again(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    json_receiver.refuse_all(True)
    with JsonReceiver() as refusing:
        refusing.refuse_all(True)
        clock = FakeClock()
        channels = {"ops": [refusing.url], "alerts": [json_receiver.url]}
        sender = make_sender(
            tmp_store, channels, clock, delivery=DEAD_AFTER_A_MINUTE, fallback_channels=("alerts",)
        )
        enqueue(tmp_store, sender, clock, alert("k1"))
        with structlog.testing.capture_logs() as logs:
            for _ in range(20):
                clock.advance(30)
                await sender.send_due()
        assert [(r.alert.dedup_key, r.status) for r in history(tmp_store)] == [
            ("k1", "dead"),
            ("dead|1", "dead"),
        ]
        assert tmp_store.pending_count() == 0
        assert [e["event"] for e in logs if e["log_level"] == "error"] == [
            "delivery given up",
            "delivery given up",
            "dead letter not reported: it was one itself",
        ]


@pytest.mark.parametrize("fallback", [(), ("ops",)])
async def test_a_death_with_no_other_url_to_report_it_is_logged(
    tmp_store: SqliteStore, json_receiver: JsonReceiver, fallback: tuple[str, ...]
) -> None:
    json_receiver.refuse_all(True)
    clock = FakeClock()
    sender = make_sender(
        tmp_store,
        {"ops": [json_receiver.url]},
        clock,
        delivery=DEAD_AFTER_A_MINUTE,
        fallback_channels=fallback,
    )
    enqueue(tmp_store, sender, clock, alert("k1"))
    with structlog.testing.capture_logs() as logs:
        await sender.send_due()
        clock.advance(60)
        await sender.send_due()
    [unreported] = [e for e in logs if e["event"].startswith("dead letter not reported")]
    assert unreported["log_level"] == "error"
    assert unreported["title"] == "[warning] treasury: k1"
    assert unreported["url_id"] == url_id(json_receiver.url)
    assert json_receiver.url not in str(logs)
    assert [r.alert.dedup_key for r in history(tmp_store)] == ["k1"]


async def test_a_url_no_longer_configured_is_given_up_without_sending(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    clock = FakeClock()
    before = make_sender(tmp_store, {"ops": [json_receiver.url]}, clock)
    enqueue(tmp_store, before, clock, alert("k1"))
    after = make_sender(tmp_store, {"ops": []}, clock)
    assert await after.send_due() == 0
    assert json_receiver.paths == []
    [record] = history(tmp_store)
    assert (record.status, record.deliveries[0].last_error) == ("dead", NOT_CONFIGURED)


async def test_a_url_apprise_cannot_use_is_given_up(tmp_store: SqliteStore) -> None:
    clock = FakeClock()
    sender = make_sender(tmp_store, {"ops": ["nosuchscheme://x"]}, clock)
    enqueue(tmp_store, sender, clock, alert("k1"))
    assert await sender.send_due() == 0
    [record] = history(tmp_store)
    assert (record.status, record.deliveries[0].last_error) == ("dead", REJECTED_URL)


class ScriptedNotifier:
    """A notifier answering from a script (the seam the sender sends through)."""

    def __init__(self, *outcomes: Outcome) -> None:
        self.outcomes = list(outcomes)
        self.sent: list[tuple[str, str, str, str]] = []

    def send(self, url: str, message: Message) -> Outcome:
        self.sent.append((url, message.title, message.tone, message.notification))
        return self.outcomes.pop(0)


async def test_the_sender_goes_through_the_notifier_it_is_given(tmp_store: SqliteStore) -> None:
    clock = FakeClock()
    notifier = ScriptedNotifier(refused("HTTP 503"), ACCEPTED, refused("no such URL", final=True))
    sender = make_sender(
        tmp_store,
        {"ops": ["json://a.example/"]},
        clock,
        delivery=delivery_settings(first_retry=10.0),
        notifier=notifier,
    )
    enqueue(tmp_store, sender, clock, alert("k1"))
    assert await sender.send_due() == 0
    assert deliveries(tmp_store) == [("[warning] treasury: k1", "pending", 1)]
    clock.advance(10)
    assert await sender.send_due() == 1
    assert deliveries(tmp_store) == [("[warning] treasury: k1", "sent", 2)]
    [(url, title, severity, first_id), (_, _, _, second_id)] = notifier.sent
    assert (url, title, severity) == ("json://a.example/", "[warning] treasury: k1", "warning")
    assert first_id == second_id  # one message, one id on every attempt

    enqueue(tmp_store, sender, clock, alert("k2"))
    assert await sender.send_due() == 0  # a final refusal: given up at once
    [_, record] = history(tmp_store)
    assert (record.status, record.deliveries[0].last_error) == ("dead", "no such URL")


async def test_email_reaches_a_real_smtp_server_with_title_and_body(
    tmp_store: SqliteStore, smtp_receiver: SmtpReceiver
) -> None:
    clock = FakeClock()
    sender = make_sender(tmp_store, {"ops": [smtp_receiver.url(to="ops@example.com")]}, clock)
    sig = "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW"
    link = f"https://explorer.example/tx/{sig}"
    body = f"2 new signatures on addr_1:\n\n- {sig}  slot 5\n  {link}\n- sig2  slot 4"
    enqueue(tmp_store, sender, clock, alert("k1", body=body))

    assert await sender.send_due() == 1
    [message] = smtp_receiver.messages
    assert message["Subject"] == "[warning] treasury: k1"
    assert message["To"] == "ops@example.com"
    assert message["From"] == "watcher@example.com"
    # Email renders HTML: the body goes out as Markdown, made HTML by Apprise, each signature
    # shortened in a link that carries it in full; the plain alternative reads the same.
    assert message.get_content_type() == "multipart/alternative"
    html = message.get_body(("html",))
    plain = message.get_body(("plain",))
    assert html is not None and plain is not None
    assert html.get_content().replace("\r\n", "\n").strip() == (
        "<p>2 new signatures on addr_1:</p>\n<ul>\n"
        f'<li><a href="{link}">5VERv8NM…diSZkQUW</a>  slot 5</li>\n'
        "<li>sig2  slot 4</li>\n</ul>"
    )
    assert " ".join(plain.get_content().split()) == (
        "2 new signatures on addr_1: - 5VERv8NM…diSZkQUW slot 5 - sig2 slot 4"
    )
    assert history(tmp_store)[0].status == "sent"


async def test_console_scheme_prints_title_and_body(
    tmp_store: SqliteStore, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = FakeClock()
    sender = make_sender(tmp_store, {"demo": ["console://"]}, clock)
    enqueue(
        tmp_store,
        sender,
        clock,
        alert("k1", channels=("demo",), severity="critical", title="[CRITICAL] v down", body="b1"),
        alert("k2", channels=("demo",), severity="info", title="[INFO] resolved", body="b2"),
    )
    assert await sender.send_due() == 2
    out = capsys.readouterr().out
    assert "── [CRITICAL] v down\nb1\n" in out
    assert "── [INFO] resolved\nb2\n" in out
    assert out.index("v down") < out.index("resolved")


# -- secrets --------------------------------------------------------------------------------


async def test_no_url_secret_reaches_the_database_or_any_log(
    tmp_path: Path,
    json_receiver: JsonReceiver,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    sqlite_file_bytes: Callable[[Path], bytes],
) -> None:
    secrets = ("SECRETPW1", "SECRETTOKEN42")
    url = f"json://watcher:SECRETPW1@127.0.0.1:{json_receiver.port}/?-token=SECRETTOKEN42"
    clock = FakeClock()
    store = SqliteStore(tmp_path / "watcher.db")
    sender = make_sender(store, {"ops": [url]}, clock)
    # Even with the libraries' debug logging turned on by someone, secrets stay out.
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="apprise")
    caplog.set_level(logging.DEBUG, logger="urllib3")
    enqueue(store, sender, clock, alert("k1"))
    json_receiver.refuse(1)
    assert await sender.send_due() == 0
    clock.advance(10)
    assert await sender.send_due() == 1

    assert json_receiver.paths == ["/?token=SECRETTOKEN42"] * 2  # the secret was really used
    stored = sqlite_file_bytes(tmp_path / "watcher.db")
    assert url_id(url).encode() in stored
    assert any("apprise" in r.name for r in caplog.records)  # the libraries did log
    output = capsys.readouterr()
    for secret in secrets:
        assert secret.encode() not in stored
        assert secret not in caplog.text
        assert secret not in output.out + output.err
    store.close()


def test_secret_fragments_of_common_urls() -> None:
    assert {"SECRETPW1", "SECRETTOKEN42"} <= secret_fragments(
        "json://watcher:SECRETPW1@127.0.0.1:8080/?-token=SECRETTOKEN42"
    )
    assert {"123456789", "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", "-1001234567"} <= (
        secret_fragments("tgram://123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/-1001234567")
    )
    assert {"T1JJ3T3L2", "A1BRTD4JD", "TIiajkdnlazkcOXrIdevi7FQ"} <= secret_fragments(
        "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#ops"
    )
    # Host names, ports and short words stay readable in logs.
    fragments = secret_fragments("mailto://bob:hunter22@smtp.example.com:587?to=ops@example.com")
    assert "hunter22" in fragments
    assert not {"smtp.example.com", "587", "bob", "to"} & fragments


# -- shutdown ---------------------------------------------------------------------------------

_slow_entered = threading.Event()
_slow_release = threading.Event()
_slow_sent: list[str] = []


def _slow_notify(body: str, title: str, *args: Any, **kwargs: Any) -> bool:
    _slow_entered.set()
    _slow_release.wait(10)
    _slow_sent.append(title)
    return True


apprise.decorators.notify(on="watcherslowtest")(_slow_notify)  # type: ignore[no-untyped-call]


async def _until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_drain_finishes_the_send_in_flight_and_starts_no_other(
    tmp_store: SqliteStore,
) -> None:
    _slow_entered.clear()
    _slow_release.clear()
    _slow_sent.clear()
    clock = FakeClock()
    sender = make_sender(tmp_store, {"ops": ["watcherslowtest://"]}, clock)
    enqueue(tmp_store, sender, clock, alert("k1"), alert("k2"))

    sending = asyncio.create_task(sender.send_due())
    await _until(_slow_entered.is_set)
    draining = asyncio.create_task(sender.drain(timeout=10))
    await asyncio.sleep(0)  # let drain() mark the stop before the send completes
    _slow_release.set()
    await draining
    assert await sending == 1

    assert _slow_sent == ["[warning] treasury: k1"]
    assert deliveries(tmp_store) == [
        ("[warning] treasury: k1", "sent", 1),
        ("[warning] treasury: k2", "pending", 0),
    ]
    assert await sender.send_due() == 0  # stopped: nothing new starts
    assert tmp_store.due_deliveries(clock())[0].alert.title == "[warning] treasury: k2"


# -- pieces -----------------------------------------------------------------------------------


def test_destinations_are_every_url_of_every_named_channel(tmp_store: SqliteStore) -> None:
    sender = make_sender(
        tmp_store,
        {"ops": ["json://a.example/", "json://b.example/"], "oncall": ["console://"]},
        FakeClock(),
    )
    assert sender.destinations(alert("k", channels=("oncall", "ops", "unknown"))) == [
        Destination("oncall", "console://"),
        Destination("ops", "json://a.example/"),
        Destination("ops", "json://b.example/"),
    ]


def test_an_inventory_goes_to_every_url_that_does_not_page(tmp_store: SqliteStore) -> None:
    pager = [
        "alertmanager://127.0.0.1:9093",
        "alertmanagers://am.example.com",
        "pagerduty://integr4tionKey0123@ap1Key0123456789",
        "opsgenie://0psg3nieApiKey0123456789/@ops-team",
        "json://hooks.example/",
    ]
    sender = make_sender(
        tmp_store, {"pager": pager, "ops": ["mailto://u:p@x.example"]}, FakeClock()
    )
    listed = alert("k", channels=("pager", "ops"), dedup_key=inventory_key("mints", "Mint1", 0))
    assert sender.destinations(listed) == [
        Destination("pager", "json://hooks.example/"),
        Destination("ops", "mailto://u:p@x.example"),
    ]
    # A change of the same rule pages as its rule says.
    assert len(sender.destinations(alert("k", channels=("pager", "ops")))) == 6


@pytest.mark.parametrize(
    ("url", "body_length", "fits_in"),
    [
        ("tgram://123456789:token/-100", 10_000, 4096),
        ("discord://id/token", 10_000, 2000),
        ("json://127.0.0.1/", 10_000, None),
        ("tgram://123456789:token/-100", 4000, None),
    ],
)
def test_fit_for_url_truncates_visibly_where_a_service_has_a_limit(
    url: str, body_length: int, fits_in: int | None
) -> None:
    body = "x" * body_length
    title, fitted = fit_for_url(url, "title", body)
    assert title == "title"
    if fits_in is None:
        assert fitted == body
    else:
        assert len(title) + 1 + len(fitted) <= fits_in
        assert len(title) + 1 + len(fitted) > fits_in - 20
        assert fitted.endswith("(truncated)")
