"""What failed polls leave behind: each source's last error, and the targets whose polls raise.

``LastErrors``: each source's last failed poll's error, for its round's log line (the pipeline
records the polls that failed: an RPC error, an answer not taken as evidence; the sweeper those
that raised). ``PollFaults``: polls that raised, a failure that belongs to its target, not to
the sweep. A kind's ``doubt`` or ``step`` may raise on one target (a state written by an older
version, an answer shape nobody foresaw). That poll fails and the sweep goes on with the others:
the round's flush, its record, rpc health and the heartbeat still happen. Each target's stretch
of such failures is logged once, as an error with the traceback, and its end once; the polls in
between only count (``/metrics``: ``watcher_poll_errors_total``).
"""

from __future__ import annotations

import structlog

log = structlog.get_logger("watcher.app")


class PollFaults:
    """The targets whose last poll raised, with the error's one-line form."""

    def __init__(self) -> None:
        self._failing: dict[tuple[str, str], str] = {}

    def failed(self, source: str, target: str, error: Exception) -> str:
        """Records a poll that raised; logs it when it starts a stretch. Its one-line form."""
        detail = f"{type(error).__name__}: {error}"
        key = (source, target)
        if key in self._failing:
            log.debug("poll raised again", source=source, target=target, error=detail)
        else:
            log.error(
                "poll raised; this target is skipped until it polls cleanly, the others go on",
                source=source,
                target=target,
                error=detail,
                exc_info=error,
            )
        self._failing[key] = detail
        return detail

    def succeeded(self, source: str, target: str) -> None:
        # Every poll of every target passes here: an empty dict costs one truth test.
        if self._failing and self._failing.pop((source, target), None) is not None:
            log.info("poll of target works again", source=source, target=target)

    def __len__(self) -> int:
        return len(self._failing)


class LastErrors:
    """Source -> the one-line form of its last failed poll's error (already redacted)."""

    def __init__(self) -> None:
        self._last: dict[str, str] = {}

    def failed(self, source: str, detail: str) -> None:
        """A poll of ``source`` failed with ``detail``: it is the one its round names."""
        self._last[source] = detail

    def last(self, source: str) -> str | None:
        """``source``'s last failed poll's error; None while none failed."""
        return self._last.get(source)
