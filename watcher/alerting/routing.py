"""Which channels an alert goes to: the rule's ``notify``, else ``routes`` by severity, else
``default_channels``. (The rule loader refuses a rule that would end up with none.)"""

from __future__ import annotations

from watcher.alerting.events import AlertMessage
from watcher.config.settings import Settings


def channels_for(alert: AlertMessage, settings: Settings) -> list[str]:
    if alert.channels:
        return list(alert.channels)
    by_severity = settings.routes.get(alert.severity)
    if by_severity:
        return list(by_severity)
    return list(settings.default_channels)
