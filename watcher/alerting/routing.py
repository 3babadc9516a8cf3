"""Which channels an alert goes to: its rule's ``notify``, else ``routes`` by its severity, else
``default_channels`` (``watcher.config.rules.channels_of``; the rule loader refuses a rule that
would end up with none). Resolved once per rule when rules load (``Routes``), not per alert.

An inventory (``AlertMessage.is_inventory``: what exists at a rule's first poll, ``info``
whatever the rule's severity) is information, not an incident: a rule routed by severity sends
it by its own, to ``routes.info`` (else ``default_channels``), not to the route of the rule's
severity, the pager's. Of the channels it goes to, the URLs that page (Alertmanager, PagerDuty,
Opsgenie) are left out where the URLs are known (``watcher.delivery.outbox_sender``)."""

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
        alert of a rule not loaded (a built-in), or an inventory, goes by its severity."""
        if alert.channels:
            return alert.channels
        known = self._by_rule.get(alert.rule)
        if known is not None and not alert.is_inventory:
            return known
        by_severity: Sequence[str] = self._routing.routes.get(alert.severity) or ()
        return tuple(by_severity) or tuple(self._routing.default_channels)
