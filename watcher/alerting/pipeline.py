"""The commit path of a step's alerts: stages of one shape (alerts in, alerts out), run in order
like Alertmanager's notify pipeline.

    word     the default wording or the rule's templates, labels, explorer links: once
    route    the channels of the alert's rule, resolved when the rules loaded (``Routes``)
    silence  what an active silence mutes is kept (in the history) and marked: sent nowhere

What comes out is stored with the step's state, in one transaction. Each stage is a small
function of values; only ``silence`` reads something (the active silences, through the
callable it is given).

Routing: an alert goes to its rule's ``notify``, else ``routes`` by its severity, else
``default_channels`` (``watcher.config.rule_models.channels_of``; the rule loader refuses a rule
that would end up with none), resolved once per rule when rules load, not per alert. An inventory
(``AlertMessage.is_inventory``: what exists at a rule's first poll, ``info`` whatever the rule's
severity) is information, not an incident: a rule routed by severity sends it by its own, to
``routes.info`` (else ``default_channels``), not to the route of the rule's severity, the
pager's. Of the channels it goes to, the URLs that page (Alertmanager, PagerDuty, Opsgenie) are
left out where the URLs are known (``watcher.delivery.channels``).

Silences: an operator's "I know, stop telling me" for one rule (optionally one subject) for a
while, as in Alertmanager. A silenced alert is still recorded in the history (status
``silenced``, with the silence that muted it in its facts), but gets no delivery. Silences live
in the state database (``Store.add_silence``) and are managed with ``watcher silence
add|list|expire``; the active ones are read before each commit, so a silence added while the
daemon runs takes effect on the next poll.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

import structlog

from watcher.alerting.formatting import Presentation
from watcher.alerting.messages import PresentedRule
from watcher.config.rule_models import RoutedRule, Routing, channels_of
from watcher.core.events import SILENCE_FACT, AlertMessage, Silence

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
        return mark_silenced(alerts, active(), now)

    return silence_all


# -- route --------------------------------------------------------------------------------------


class Routes:
    """Each rule's channels, resolved when rules load (or reload)."""

    def __init__(self, rules: Iterable[RoutedRule], routing: Routing) -> None:
        self._routing = routing
        self._by_rule: Mapping[str, tuple[str, ...]] = {
            rule.name: channels_of(rule, routing) for rule in rules
        }

    def channels_for(self, alert: AlertMessage) -> tuple[str, ...]:
        """The alert's own channels (worded from its rule's ``notify``), else its rule's; an
        alert of a rule not loaded (a built-in), or an inventory, goes by its severity."""
        if alert.channels:
            return alert.channels
        known = self._by_rule.get(alert.rule)
        if known is not None and not alert.is_inventory:
            return known
        by_severity: Sequence[str] = self._routing.routes.get(alert.severity) or ()
        return tuple(by_severity) or tuple(self._routing.default_channels)


# -- silence ------------------------------------------------------------------------------------


def silenced_by(silences: Iterable[Silence], alert: AlertMessage, now: float) -> Silence | None:
    """The first silence active at ``now`` that mutes ``alert``, else ``None``."""
    for silence in silences:
        if silence.matches(alert) and silence.is_active(now):
            return silence
    return None


def is_silenced(alert: AlertMessage) -> bool:
    """Whether ``mark_silenced`` marked this alert (it then gets no delivery)."""
    return SILENCE_FACT in alert.facts


def mark_silenced(
    alerts: Iterable[AlertMessage], silences: Iterable[Silence], now: float
) -> list[AlertMessage]:
    """The alerts, each muted one carrying its silence in its facts (kept in the history)."""
    active = [silence for silence in silences if silence.is_active(now)]
    marked = []
    for alert in alerts:
        silence = silenced_by(active, alert, now)
        if silence is not None:
            alert = replace(alert, facts={**alert.facts, SILENCE_FACT: silence.as_fact()})
        marked.append(alert)
    return marked
