"""Where a rule's alerts go: its ``notify``, else the route of its severity, else the default
channels (``channels_of``; ``watcher.alerting.pipeline`` applies it to alerts, the rule loader
refuses a rule it would leave with no channel)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from watcher.core.events import Severity


class Routing(Protocol):
    """Where a rule without ``notify`` goes (watcher.config.settings.Settings provides it)."""

    @property
    def default_channels(self) -> Sequence[str]: ...

    @property
    def routes(self) -> Mapping[Severity, Sequence[str]]: ...


class RoutedRule(Protocol):
    """What routing needs of a rule (a loaded rule, a built-in's)."""

    @property
    def name(self) -> str: ...

    @property
    def severity(self) -> Severity: ...

    @property
    def notify(self) -> tuple[str, ...] | None: ...


def channels_of(rule: RoutedRule, routing: Routing) -> tuple[str, ...]:
    """A rule's channels: its ``notify``, else the route of its severity, else the defaults.
    (Same order as watcher.alerting.pipeline, which applies it to alerts.)"""
    if rule.notify is not None:
        return rule.notify
    routed = routing.routes.get(rule.severity)
    if routed:
        return tuple(routed)
    return tuple(routing.default_channels)
