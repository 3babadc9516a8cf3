"""A rule's ``summary`` and ``runbook`` around every message of the rule.

``summary`` is the first line of the body (under the title), ``runbook`` its last line
(``Runbook: ...``). ``make_alert`` (``watcher.alerting.messages``) puts both in the alert's
facts; ``word_alert`` frames the body it words; a digest (``watcher.delivery.digest``) frames
the body it makes, from its newest alert's facts. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Facts = Mapping[str, Any]


def _lines(*parts: str | None) -> str:
    return "\n".join(part for part in parts if part is not None)


def runbook_line(facts: Facts) -> str | None:
    runbook = facts.get("runbook")
    return f"Runbook: {runbook}" if runbook else None


def framed(body: str, facts: Facts, notes: Sequence[str] = ()) -> str:
    """A body between its rule's ``summary`` (the first line, under the title) and
    ``runbook`` (the last line), with ``notes`` (``watcher.delivery.digest``) before it."""
    summary = facts.get("summary")
    runbook = runbook_line(facts)
    return _lines(
        *((str(summary), "") if summary else ()),
        body,
        *(("", *notes) if notes else ()),
        *(("", runbook) if runbook else ()),
    )


def with_notes(body: str, facts: Facts, notes: Sequence[str]) -> str:
    """A worded (``framed``) body with ``notes`` added, still before its runbook line."""
    if not notes:
        return body
    runbook = runbook_line(facts)
    if runbook and body.endswith("\n\n" + runbook):
        return _lines(body[: -len(runbook) - 2], "", *notes, "", runbook)
    return _lines(body, "", *notes)
