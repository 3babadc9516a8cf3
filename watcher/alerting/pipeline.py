"""The commit path of a step's alerts: stages of one shape (alerts in, alerts out), run in order
like Alertmanager's notify pipeline.

    word     the default wording or the rule's templates, labels, explorer links: once
    route    the channels of the alert's rule, resolved when the rules loaded
    silence  what an active silence mutes is kept (in the history) and marked: sent nowhere

The daemon stores what comes out with the step's state, in one transaction, then wakes the
sender (``watcher.service.committing.Committer.commit``). Each stage is a small function of
values; only ``silence`` reads something (the active silences, through the callable it is
given).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

import structlog

from watcher.alerting import silences
from watcher.alerting.formatting import Presentation
from watcher.alerting.messages import PresentedRule
from watcher.alerting.routing import Routes
from watcher.core.events import AlertMessage, Silence

log = structlog.get_logger(__name__)

Stage = Callable[[list[AlertMessage]], list[AlertMessage]]
Word = Callable[[AlertMessage, PresentedRule | None, Presentation], AlertMessage]


def run(alerts: Iterable[AlertMessage], stages: Sequence[Stage]) -> list[AlertMessage]:
    """The alerts through every stage, in order."""
    flowing = list(alerts)
    for stage in stages:
        if not flowing:
            break
        flowing = stage(flowing)
    return flowing


def word(word_one: Word, rules: Sequence[PresentedRule], shown: Presentation) -> Stage:
    """Word each alert with the rule that made it; a template that failed is logged (the alert
    goes out in the default wording, saying so)."""
    by_name = {rule.name: rule for rule in rules}

    def word_all(alerts: list[AlertMessage]) -> list[AlertMessage]:
        worded = [word_one(alert, by_name.get(alert.rule), shown) for alert in alerts]
        for alert in worded:
            if alert.wording_problems:
                log.warning(
                    "alert worded with the default wording",
                    rule=alert.rule,
                    subject=alert.subject,
                    problems=list(alert.wording_problems),
                )
        return worded

    return word_all


def route(routes: Routes) -> Stage:
    def route_all(alerts: list[AlertMessage]) -> list[AlertMessage]:
        return [dataclasses.replace(alert, channels=routes.channels_for(alert)) for alert in alerts]

    return route_all


def silence(active: Callable[[], Iterable[Silence]], now: float) -> Stage:
    """``active`` is read when alerts reach this stage, after the observation: a silence added
    before the change it mutes is seen."""

    def silence_all(alerts: list[AlertMessage]) -> list[AlertMessage]:
        return silences.mark_silenced(alerts, active(), now)

    return silence_all
