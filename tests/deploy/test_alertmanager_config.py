"""deploy/alertmanager/alertmanager.yml, the example Alertmanager configuration: ``amtool`` checks
it and routes by it as its comments say, and a REAL Alertmanager running it (its receivers
pointed at local listeners, its group timings cut to a second) pages each event of watcher's
once and never "resolves" it, and pages a state and resolves it. docs/operations.md shows its
routes and receivers as shipped.

The alerts are watcher's own payloads (``watcher.delivery.alertmanager.post``); the PagerDuty
receivers post Events API v2 bodies (``event_action``, ``dedup_key``) to the local listeners."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.core.events import AlertMessage, Reason
from watcher.delivery import alertmanager as channel
from watcher.delivery.notifier import StoredAlert, event_id
from watcher.testing.alertmanager import AMTOOL, Alertmanager, binary
from watcher.testing.receivers import JsonReceiver, wait_until

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
EVENT_RECEIVERS = {"pager-events", "chat-events"}


def shipped() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SHIPPED.read_text())
    return loaded


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    found = binary(AMTOOL)
    if found is None:
        pytest.fail("amtool is not installed: run deploy/ensure-monitoring, as `make test` does")
    return subprocess.run([found, *args], capture_output=True, text=True, timeout=60, check=False)


def test_amtool_checks_the_shipped_config() -> None:
    done = amtool("check-config", str(SHIPPED))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["type=event", "severity=critical", "event_id=0123456789abcdef"], "pager-events"),
        (["type=event", "severity=warning"], "chat-events"),
        (["type=event", "severity=info"], "chat-events"),
        (["type=state", "severity=critical"], "pager-states"),
        (["type=state", "severity=warning"], "chat-states"),
        # Prometheus's alerts (deploy/prometheus/watcher-rules.yml) carry no type.
        (["alertname=WatcherDown", "severity=critical"], "pager-states"),
        (["alertname=WatcherStalled", "severity=warning"], "chat-states"),
    ],
)
def test_amtool_routes_events_and_states_apart(labels: list[str], receiver: str) -> None:
    done = amtool("config", "routes", "test", f"--config.file={SHIPPED}", *labels)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == receiver


def test_events_are_never_resolved_and_states_are() -> None:
    for entry in shipped()["receivers"]:
        configs = [c for key, cs in entry.items() if key.endswith("_configs") for c in cs]
        assert configs, entry["name"]
        for config in configs:
            assert config["send_resolved"] is (entry["name"] not in EVENT_RECEIVERS), entry


TIMINGS = ("group_wait", "group_interval", "repeat_interval")


def without_timings(route: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in route.items() if k not in TIMINGS and k != "routes"}
    if "routes" in route:
        kept["routes"] = [without_timings(child) for child in route["routes"]]
    return kept


def test_the_operations_guide_shows_the_shipped_routes_and_receivers() -> None:
    guide = (REPO / "docs" / "operations.md").read_text()
    section = guide[guide.index("## Paging through Alertmanager") :]
    block = section[section.index("```yaml\n") + len("```yaml\n") : section.index("```\n\n")]
    shown = yaml.safe_load(block)
    assert without_timings(shown["route"]) == without_timings(shipped()["route"])
    assert shown["receivers"] == shipped()["receivers"]


def runnable(urls: dict[str, str]) -> dict[str, Any]:
    """The shipped config with each receiver's URL one of ``urls`` (by receiver) and its
    group timings one second: what is tested is its routes and receivers, as shipped."""
    settings = copy.deepcopy(shipped())
    for entry in settings["receivers"]:
        for key in ("pagerduty_configs", "webhook_configs"):
            for config in entry.get(key, []):
                config["url"] = urls[entry["name"]]

    def quick(route: dict[str, Any]) -> None:
        for timing in ("group_wait", "group_interval"):
            if timing in route or route is settings["route"]:
                route[timing] = "1s"
        for child in route.get("routes", []):
            quick(child)

    quick(settings["route"])
    return settings


def alert(key: str, reason: Reason, subject: str = "Mint111") -> AlertMessage:
    return AlertMessage(
        rule="mint-powers",
        severity="critical",
        subject=subject,
        reason=reason,
        dedup_key=key,
        title=f"[CRITICAL] mint-powers: {key}",
        body="the body",
        channels=("am",),
        facts={"kind": "token_authorities"},
    )


@pytest.fixture
def receivers() -> Iterator[dict[str, JsonReceiver]]:
    names = [entry["name"] for entry in shipped()["receivers"]]
    started = {name: JsonReceiver().start() for name in names}
    try:
        yield started
    finally:
        for receiver in started.values():
            receiver.close()


def actions(receiver: JsonReceiver) -> list[tuple[str, str]]:
    return [(body["event_action"], body["dedup_key"]) for body in receiver.received]


def active(am: Alertmanager, **labels: str) -> list[dict[str, Any]]:
    return [
        held
        for held in am.alerts()
        if held["status"]["state"] == "active"
        and all(held["labels"].get(k) == v for k, v in labels.items())
    ]


@pytest.mark.timeout(120)
def test_a_real_alertmanager_pages_each_event_once_and_resolves_only_states(
    receivers: dict[str, JsonReceiver],
) -> None:
    urls = {name: f"http://127.0.0.1:{r.port}/" for name, r in receivers.items()}
    pager_events, pager_states = receivers["pager-events"], receivers["pager-states"]
    with Alertmanager(settings=runnable(urls)) as am:

        def shown() -> str:
            return f"\n{am.output()[-2000:]}"

        # Two changes of one mint, posted as watcher posts them, their ends 3 s ahead (as if
        # posted 297 s ago: an event's alert ends EVENT_TTL after its post).
        freeze = alert("mint-powers|Mint111|7|freeze", "event")
        mint = alert("mint-powers|Mint111|8|mint", "event")
        then = time.time() - channel.EVENT_TTL + 3
        events = [StoredAlert(freeze, then), StoredAlert(mint, then)]
        assert channel.post(am.url, events, then).accepted
        state = alert("delinquent|Vote111|1|firing", "firing", subject="Vote111")
        assert channel.post(am.url, [StoredAlert(state, time.time())], time.time()).accepted

        pages = pager_events.wait_for(2, 30)
        # Each its own incident: PagerDuty's dedup key is Alertmanager's group's.
        assert [a for a, _ in actions(pager_events)] == ["trigger", "trigger"]
        assert len({key for _, key in actions(pager_events)}) == 2
        paged_ids = {
            line.strip()
            for body in pages
            for line in body["payload"]["custom_details"]["firing"].splitlines()
            if "event_id" in line
        }
        assert paged_ids == {f"- event_id = {event_id(freeze)}", f"- event_id = {event_id(mint)}"}
        [(opened, key)] = wait_until(lambda: actions(pager_states), 30, "the state paged" + shown())
        assert opened == "trigger"

        # The events end. After a full group cycle past their end (an alert posted after it,
        # then notified), nothing has said they resolved.
        wait_until(lambda: not active(am, type="event"), 30, "the events ended" + shown())
        later = alert("delinquent|Vote222|1|firing", "firing", subject="Vote222")
        assert channel.post(am.url, [StoredAlert(later, time.time())], time.time()).accepted
        wait_until(lambda: len(actions(pager_states)) >= 2, 30, "a later page" + shown())
        resolved = dataclasses.replace(state, reason="resolved")
        assert channel.post(am.url, [StoredAlert(resolved, time.time())], time.time()).accepted
        wait_until(
            lambda: ("resolve", key) in actions(pager_states), 30, "the state resolved" + shown()
        )
        assert [a for a, _ in actions(pager_events)] == ["trigger", "trigger"]
        assert receivers["chat-events"].received == receivers["chat-states"].received == []
