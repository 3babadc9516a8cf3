"""How fast one URL's messages follow each other: each service's pace, set on our own Apprise
instances, and ten e-mails to a real SMTP server back to back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import apprise
import pytest
from apprise.plugins.email import NotifyEmail

from watcher.core.events import AlertMessage
from watcher.delivery.apprise_adapter import new_client, pace_of
from watcher.state.interface import StepToCommit
from watcher.state.store import SqliteStore
from watcher.testing.receivers import SmtpReceiver

from support.sending import alert_history, make_sender
from support.values import FakeClock


def only_service(url: str) -> apprise.plugins.NotifyBase:
    client = new_client(url)
    assert client is not None
    [service] = list(client)
    return service


@pytest.mark.parametrize(
    ("url", "pace"),
    [
        ("mailto://127.0.0.1:2525?from=w@example.com&to=ops@example.com", 0.0),
        ("mailtos://user:secret@smtp.example.com?to=ops@example.com", 0.0),
        ("json://127.0.0.1:8080/", 0.0),
        ("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ", 1.0),
        ("https://hooks.slack.com/services/T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ", 1.0),
        ("tgram://123456789:abcdefg_hijklmnop/-1001234567890", 1.0),
        ("discord://4174216298/JHMHI8qBe7bk2ZwO5U711o3dV_js", 0.0),
        ("ntfy://ntfy.example.com/alerts", 0.0),
        ("pagerduty://myroutingkey@myapikey", 0.5),
        # Not in the table: Apprise's own pace (5.5 s, its guess for services that name
        # none) cut to the longest default; a shorter one of Apprise's is kept.
        ("pover://u2b1ohv6ugizdqtbe9kvyfz83dwt2d@a5tkq7qbf8czk3c7mfaiw8w5x1n9n9", 1.0),
        ("mmost://mattermost.example.com/3ccdd113474722377935511fc85d3dd4", 0.02),
    ],
)
def test_each_service_is_paced_by_what_it_documents(url: str, pace: float) -> None:
    service = only_service(url)
    assert pace_of(service) == pace
    assert service.request_rate_per_sec == pace  # what Apprise's throttle() reads


def test_the_pace_is_set_on_our_instance_not_on_apprise_s_class() -> None:
    url = "mailto://127.0.0.1:2525?from=w@example.com&to=ops@example.com"
    assert only_service(url).request_rate_per_sec == 0.0
    # Apprise's class keeps its own value: Apprise objects not made by the sender (a heartbeat
    # check's, a user's plugin's) are not changed by ours.
    assert NotifyEmail.request_rate_per_sec == 5.5
    theirs = apprise.Apprise()
    assert theirs.add(url)
    assert [service.request_rate_per_sec for service in theirs] == [5.5]


async def until(predicate: Callable[[], bool], within: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        assert loop.time() < deadline, f"{what}: not within {within}s"
        await asyncio.sleep(0.02)


def alert(n: int) -> AlertMessage:
    return AlertMessage(
        rule="delinquent",
        severity="critical",
        subject=f"validator{n}",
        reason="firing",
        dedup_key=f"delinquent|validator{n}|1",
        title=f"[critical] delinquent: validator{n}",
        body=f"validator{n} stopped voting",
        channels=("mail",),
    )


async def test_ten_alerts_reach_a_real_smtp_server_back_to_back(
    tmp_store: SqliteStore, smtp_receiver: SmtpReceiver
) -> None:
    """Apprise's 5.5 s between two e-mails to one URL made ten alerts take 50 s; an SMTP
    server needs no pause. Deadline 5 s: with that pause only the first would be in."""
    clock = FakeClock()
    sender = make_sender(tmp_store, {"mail": [smtp_receiver.url()]}, clock)
    alerts = [alert(n) for n in range(10)]
    tmp_store.commit_step(
        StepToCommit.of("votes", "cluster", {}, alerts, sender.destinations, clock())
    )

    loop = asyncio.get_running_loop()
    started = loop.time()
    await sender.dispatch()
    try:
        await until(lambda: len(smtp_receiver.messages) == 10, 5.0, "ten e-mails")
        elapsed = loop.time() - started
    finally:
        await sender.drain(1.0)
    assert elapsed < 3.0
    assert [m["Subject"] for m in smtp_receiver.messages] == [a.title for a in alerts]
    await until(
        lambda: {r.status for r in alert_history(tmp_store)} == {"sent"}, 2.0, "all marked sent"
    )
