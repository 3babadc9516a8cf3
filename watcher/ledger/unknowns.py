"""Fields the node sent out of their range and the models took as unknown
(``watcher.ledger.models.Unknowable``): each is logged once (a warning), never the answer refused.

"Once" is per method, target, entry and field, in a bounded memory: an odd entry stays in an
address's history and comes back in later answers, and repeating it each poll would drown the
log.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import structlog

from watcher.core.redact import REDACTOR
from watcher.ledger.models import UnknownField

log = structlog.get_logger("watcher.ledger")

REMEMBERED = 10_000  # odd fields remembered as said; the oldest is forgotten first
_VALUE_CHARS = 80


def target_of(params: list[Any] | None) -> str | None:
    """The address a call asks about (its first parameter, when a string)."""
    first = params[0] if params else None
    return first if isinstance(first, str) else None


class UnknownFieldLog:
    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._said: OrderedDict[tuple[str, str | None, str | None, str], None] = OrderedDict()
        self._remembered = remembered

    def report(self, method: str, target: str | None, fields: Iterable[UnknownField]) -> None:
        for unknown in fields:
            key = (method, target, unknown.entry, unknown.field)
            if key in self._said:
                self._said.move_to_end(key)
                continue
            self._said[key] = None
            if len(self._said) > self._remembered:
                self._said.popitem(last=False)
            shown = repr(unknown.value)
            if len(shown) > _VALUE_CHARS:
                shown = shown[: _VALUE_CHARS - 1] + "…"
            log.warning(
                "entry left out: its identity is unreadable"
                if unknown.left_out
                else "field out of its range taken as unknown",
                method=method,
                target=target,
                entry=unknown.entry,
                field=unknown.field,
                value=REDACTOR.redact(shown),
            )

    def clear(self) -> None:
        self._said.clear()


# Process-wide, like the logger it filters: a field is said once per process, whichever reader
# (client, pinned endpoint) or kind's check met it, and a reload does not say it again.
UNKNOWN_FIELDS_LOG = UnknownFieldLog()
