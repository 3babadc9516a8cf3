"""The commit path's stages (watcher.alerting.pipeline), on values: word -> route -> silence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from watcher.alerting import pipeline
from watcher.alerting.formatting import PLAIN, Presentation
from watcher.alerting.pipeline import Routes, is_silenced
from watcher.core.events import AlertMessage, Severity, Silence, inventory_key


@dataclass(frozen=True)
class Rule:
    name: str
    severity: Severity = "warning"
    notify: tuple[str, ...] | None = None
    kind: str = "new_transactions"
    title: str | None = None  # the default wording (messages.PresentedRule)
    body: str | None = None


@dataclass(frozen=True)
class Routing:
    default_channels: Sequence[str] = ("ops",)
    routes: Mapping[Severity, Sequence[str]] = field(default_factory=dict)


def alert(rule: str, severity: Severity = "warning", subject: str = "addr1") -> AlertMessage:
    return AlertMessage(
        rule=rule,
        severity=severity,
        subject=subject,
        reason="event",
        dedup_key=f"{rule}|{subject}",
        title="",
        body="",
        channels=(),
    )


def fake_word(alert: AlertMessage, rule: Any, shown: Presentation) -> AlertMessage:
    return replace(
        alert,
        title=f"{alert.rule} by {rule.name if rule else None}",
        channels=tuple(rule.notify or ()) if rule else (),
    )


@pytest.mark.parametrize(
    ("rule", "routing", "channels"),
    [
        (Rule("a", notify=("pager",)), Routing(routes={"warning": ["chat"]}), ("pager",)),
        (Rule("a"), Routing(routes={"warning": ["chat"]}), ("chat",)),
        (Rule("a", severity="critical"), Routing(routes={"warning": ["chat"]}), ("ops",)),
    ],
)
def test_an_alert_goes_where_its_rule_goes(
    rule: Rule, routing: Routing, channels: tuple[str, ...]
) -> None:
    stages = [pipeline.word(fake_word, [rule], PLAIN), pipeline.route(Routes([rule], routing))]
    [out] = pipeline.run([alert("a", rule.severity)], stages)
    assert (out.title, out.channels) == ("a by a", channels)


def test_an_alert_of_no_loaded_rule_goes_by_its_severity() -> None:
    routes = Routes([], Routing(routes={"critical": ["pager"]}))
    assert routes.channels_for(alert("x", "critical")) == ("pager",)
    assert routes.channels_for(alert("x", "info")) == ("ops",)


def inventory(rule: str) -> AlertMessage:
    return replace(
        alert(rule, "info", subject="Mint1,Mint2"),
        dedup_key=inventory_key(rule, "Mint1,Mint2", 0),
    )


@pytest.mark.parametrize(
    ("rule", "channels"),
    [
        # Routed by severity: the inventory is information, routed as info, not as critical.
        (Rule("powers", "critical"), ("chat",)),
        # The rule's own channels: the inventory goes there (the URLs that page are left out
        # where the URLs are known: tests/delivery/test_notify.py).
        (Rule("powers", "critical", notify=("pager", "chat")), ("pager", "chat")),
    ],
)
def test_an_inventory_is_routed_as_information(rule: Rule, channels: tuple[str, ...]) -> None:
    routing = Routing(routes={"critical": ["pager"], "info": ["chat"]})
    stages = [pipeline.word(fake_word, [rule], PLAIN), pipeline.route(Routes([rule], routing))]
    [out, change] = pipeline.run([inventory("powers"), alert("powers", "critical")], stages)
    assert out.is_inventory and not change.is_inventory
    assert out.channels == channels
    assert change.channels == (rule.notify or ("pager",))


def test_an_inventory_without_an_info_route_goes_to_the_default_channels() -> None:
    routes = Routes([Rule("powers", "critical")], Routing(routes={"critical": ["pager"]}))
    assert routes.channels_for(inventory("powers")) == ("ops",)


def test_silence_marks_what_it_mutes_and_reads_silences_only_when_alerts_reach_it() -> None:
    reads: list[int] = []
    muted = Silence(
        id=1,
        rule="a",
        subject="addr1",
        starts_at=0,
        ends_at=100,
        comment="",
        created_by=None,
        created_at=0,
    )

    def active() -> list[Silence]:
        reads.append(1)
        return [muted]

    stage = pipeline.silence(active, now=50)
    out = pipeline.run([alert("a"), alert("a", subject="addr2"), alert("b")], [stage])
    assert [is_silenced(a) for a in out] == [True, False, False]
    assert pipeline.run([], [stage]) == [] and len(reads) == 1  # no alerts: nothing read
