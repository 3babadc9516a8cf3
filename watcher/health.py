"""Health of the RPC endpoint as seen by the pollers: rounds that failed, cluster-wide.

A *round* is one sweep of one job over its targets. A round *failed* when every call of it
failed; a round in which at least one call succeeded means the endpoint *answered*.

Counting is cluster-wide: each source keeps its streak of failed rounds, and any answered round,
of any source, resets every streak (the endpoint works). The streak that decides is the longest
one (``RoundVerdict.failed_rounds``). Taking the longest streak of one source, rather than the sum
over sources, keeps "N rounds" a measure of time: one bad second in which the four sources fail
together is one failed round of each, not four failed rounds.

This feeds the built-in ``rpc_unhealthy`` alert (``watcher.builtin``), which fires once the
longest streak reaches ``health.unhealthy_after`` and resolves on the next answered round.

Dependent alerts while the endpoint is unhealthy (decision): a failed call is never evidence, so
no rule steps on one: nothing fires or resolves from a failed poll, and a validator rule cannot
report "missing" because getVoteAccounts failed. A call that does succeed during an unhealthy
episode is real evidence, and its step runs as usual: holding it back would only delay a true
alert, and the round it belongs to resolves ``rpc_unhealthy`` anyway (the endpoint answered).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import structlog

from watcher.errors import RpcError

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RoundVerdict:
    """What one finished round says about the endpoint."""

    answered: bool  # at least one call of the round succeeded
    failed_rounds: int  # longest streak of failed rounds of any source since it last answered
    failing_since: float | None  # end of the first failed round of the streak (None: answered)
    last_error: str | None  # class and message of the last failure (redacted by RpcError)


@dataclass
class RoundHealth:
    """Counts failed rounds. No clock of its own: ``round_done`` is told the time."""

    consecutive_failed_rounds: Counter[str] = field(default_factory=Counter)
    failing_since: float | None = None
    last_error: str | None = None
    _failed_this_round: Counter[str] = field(default_factory=Counter)
    _ok_this_round: Counter[str] = field(default_factory=Counter)

    @property
    def failed_rounds(self) -> int:
        """The longest current streak of failed rounds (0 while the endpoint answers)."""
        return max(self.consecutive_failed_rounds.values(), default=0)

    def failed(self, source: str, target: str, error: RpcError, *, quiet: bool = False) -> None:
        """One failed poll; ``quiet``: already said (logged at debug level only)."""
        self._failed_this_round[source] += 1
        self.last_error = f"{type(error).__name__}: {error}"
        (log.debug if quiet else log.warning)(
            "poll failed; nothing concluded from it",
            source=source,
            target=target,
            error=type(error).__name__,
            detail=str(error),
            transient=error.transient,
        )

    def succeeded(self, source: str, target: str) -> None:
        self._ok_this_round[source] += 1

    def round_done(self, source: str, now: float) -> RoundVerdict | None:
        """Close the round of ``source``; None when it made no call (nothing to say)."""
        failed, ok = self._failed_this_round.pop(source, 0), self._ok_this_round.pop(source, 0)
        if ok:
            if self.failed_rounds:
                log.info("endpoint answering again", source=source)
            self.consecutive_failed_rounds.clear()
            self.failing_since = None
            return RoundVerdict(True, 0, None, self.last_error)
        if not failed:
            return None
        self.consecutive_failed_rounds[source] += 1
        if self.failing_since is None:
            self.failing_since = now
        log.warning(
            "round failed",
            source=source,
            consecutive=self.consecutive_failed_rounds[source],
            longest=self.failed_rounds,
        )
        return RoundVerdict(False, self.failed_rounds, self.failing_since, self.last_error)
