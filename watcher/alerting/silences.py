"""Silences: an operator's "I know, stop telling me" for one rule (optionally one subject) for
a while, as in Alertmanager.

A silenced alert is still recorded in the history (status ``silenced``, with the silence that
muted it in its facts), but gets no delivery. Silences live in the state database
(``Store.add_silence``) and are managed with ``watcher silence add|list|expire``; the daemon
reads the active ones before each commit, so a silence added while it runs takes effect on the
next poll.

Pure: the caller passes ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from watcher.core.events import SILENCE_FACT, AlertMessage, Silence


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
