"""Dead letters: which given-up deliveries are reported to the fallback channels, and the log
lines that say what became of each (the letters' text is ``watcher.delivery.digest``'s)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import DeliveryRow, Destination
from watcher.delivery import digest

log = structlog.get_logger("watcher.delivery.outbox_sender")


def letters(
    rows: Sequence[DeliveryRow],
    error: str,
    fallback_channels: Sequence[str],
    now: float,
    elsewhere: Callable[[AlertMessage], Sequence[Destination]],
) -> dict[int, AlertMessage]:
    """The dead letter of each row (by delivery id) that has somewhere to go: never one for a
    dead letter itself, nor one with no URL but the failed one (``elsewhere``)."""
    reports: dict[int, AlertMessage] = {}
    for row in rows:
        if digest.is_dead_letter(row):
            continue
        letter = digest.dead_letter(row, error, channels=fallback_channels, now=now)
        if elsewhere(letter):
            reports[row.id] = letter
    return reports


def log_given_up(row: DeliveryRow, error: str, *, reported: bool) -> None:
    log.error(
        "delivery given up",
        alert_id=row.alert_id,
        rule=row.alert.rule,
        channel=row.channel,
        url_id=row.url_id,
        attempts=row.attempts + 1,
        error=error,
        dead_letter="queued" if reported else "not reported",
    )
    if not reported:
        log.error(
            "dead letter not reported: it was one itself"
            if digest.is_dead_letter(row)
            else "dead letter not reported: no fallback_channels URL but the failed one",
            alert_id=row.alert_id,
            rule=row.alert.rule,
            title=row.alert.title,
            channel=row.channel,
            url_id=row.url_id,
        )
