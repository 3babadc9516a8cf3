"""Which channels an alert goes to: its rule's ``notify``, else ``routes`` by its severity, else
``default_channels`` (``watcher.config.rules.channels_of``; the rule loader refuses a rule that
would end up with none). Resolved once per rule when rules load (``Routes``), not per alert."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from watcher.config.rules import RoutedRule, Routing, channels_of
from watcher.core.events import AlertMessage


class Routes:
    """Each rule's channels, resolved when rules load (or reload)."""

    def __init__(self, rules: Iterable[RoutedRule], routing: Routing) -> None:
        self._routing = routing
        self._by_rule: Mapping[str, tuple[str, ...]] = {
            rule.name: channels_of(rule, routing) for rule in rules
        }

    def channels_for(self, alert: AlertMessage) -> tuple[str, ...]:
        """The alert's own channels (worded from its rule's ``notify``), else its rule's; an
        alert of a rule not loaded (a built-in) goes by its severity."""
        if alert.channels:
            return alert.channels
        known = self._by_rule.get(alert.rule)
        if known is not None:
            return known
        by_severity: Sequence[str] = self._routing.routes.get(alert.severity) or ()
        return tuple(by_severity) or tuple(self._routing.default_channels)
