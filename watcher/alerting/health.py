"""Health of the RPC endpoint as seen by the pollers: rounds that failed, cluster-wide; and of
the state database as seen by every task (``StateHealth``).

A *round* is one sweep of one job over its targets. A round *failed* when every call of it
failed; a round in which at least one call succeeded means the endpoint *answered*.

Counting is cluster-wide: each job (a source at one interval: ``Job``) keeps its streak of
failed rounds, and any answered round, of any job, resets every streak (the endpoint works). The
streak that decides is the longest one (``RoundVerdict.failed_rounds``). Taking the longest streak
of one job, rather than the sum over jobs, keeps "N rounds" a measure of time: one bad second in
which the four sources fail together is one failed round of each, not four failed rounds. Two
jobs of one source (two sweep intervals) run side by side: each call and each round is counted
for its own job, so neither can close the other's round.

A poll under ``quorum`` whose endpoints answered but disagree counts as answered: the endpoint
works; the disagreement is told apart (``watcher.ledger.quorum``, the built-in
``rpc_disagreement``).

This feeds the built-in ``rpc_unhealthy`` alert (``watcher.alerting.builtin``), which fires once the
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

from watcher.core.errors import RpcError, StateError

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RoundVerdict:
    """What one finished round says about the endpoint."""

    answered: bool  # at least one call of the round succeeded
    failed_rounds: int  # longest streak of failed rounds of any job since the endpoint answered
    failing_since: float | None  # end of the first failed round of the streak (None: answered)
    last_error: str | None  # class and message of the last failure (redacted by RpcError)


# A job: its source and its sweep interval (seconds).
JobKey = tuple[str, float]


@dataclass
class RoundHealth:
    """Counts failed rounds per job. No clock of its own: ``round_done`` is told the time.

    ``interval`` names the job of ``source`` a call or round belongs to (a source swept at one
    interval only can leave it out)."""

    consecutive_failed_rounds: Counter[JobKey] = field(default_factory=Counter)
    failing_since: float | None = None
    last_error: str | None = None
    _failed_this_round: Counter[JobKey] = field(default_factory=Counter)
    _ok_this_round: Counter[JobKey] = field(default_factory=Counter)

    @property
    def failed_rounds(self) -> int:
        """The longest current streak of failed rounds (0 while the endpoint answers)."""
        return max(self.consecutive_failed_rounds.values(), default=0)

    def failed(
        self,
        source: str,
        target: str,
        error: RpcError,
        *,
        interval: float = 0.0,
        quiet: bool = False,
    ) -> None:
        """One failed poll; ``quiet``: already said (logged at debug level only)."""
        self._failed_this_round[source, interval] += 1
        self.last_error = f"{type(error).__name__}: {error}"
        (log.debug if quiet else log.warning)(
            "poll failed; nothing concluded from it",
            source=source,
            target=target,
            error=type(error).__name__,
            detail=str(error),
            transient=error.transient,
        )

    def succeeded(self, source: str, target: str, *, interval: float = 0.0) -> None:
        self._ok_this_round[source, interval] += 1

    def round_done(self, source: str, now: float, *, interval: float = 0.0) -> RoundVerdict | None:
        """Close the round of the job; None when it made no call (nothing to say)."""
        job = (source, interval)
        failed, ok = self._failed_this_round.pop(job, 0), self._ok_this_round.pop(job, 0)
        if ok:
            if self.failed_rounds:
                log.info("endpoint answering again", source=source)
            self.consecutive_failed_rounds.clear()
            self.failing_since = None
            return RoundVerdict(True, 0, None, self.last_error)
        if not failed:
            return None
        self.consecutive_failed_rounds[job] += 1
        if self.failing_since is None:
            self.failing_since = now
        log.warning(
            "round failed",
            source=source,
            consecutive=self.consecutive_failed_rounds[job],
            longest=self.failed_rounds,
        )
        return RoundVerdict(False, self.failed_rounds, self.failing_since, self.last_error)


# Retries of database work are at most 30 s apart: a stretch with no failure for twice that
# has no evidence that the database still fails.
STILL_FAILING_SECONDS = 60.0


@dataclass
class StateHealth:
    """Health of the state database as every long-lived task sees it: the current stretch of
    failed operations (any success ends it), for the log, the supervisor and ``/healthz``.

    One warning at the start of a failing stretch and one "recovered" line at its end: a
    locked or full database never floods the log. No clock of its own: callers pass ``now``.
    """

    down_for_limit: float = 300.0  # a stretch of transient failures this long is fatal
    consecutive_failures: int = 0
    failing_since: float | None = None
    last_failed_at: float | None = None
    last_error: str | None = None
    permanent: StateError | None = None  # the first permanent error seen: fatal

    def failed(self, error: StateError, now: float) -> None:
        self.consecutive_failures += 1
        self.last_error = str(error)
        self.last_failed_at = now
        if not error.transient and self.permanent is None:
            self.permanent = error
        if self.failing_since is None:
            self.failing_since = now
            log.warning(
                "state database failing; retrying with backoff",
                operation=error.operation,
                error=error.message,
                transient=error.transient,
            )

    def succeeded(self, now: float) -> None:
        if self.failing_since is None:
            return
        log.info(
            "state database recovered",
            failures=self.consecutive_failures,
            after=round(now - self.failing_since, 1),
            last_error=self.last_error,
        )
        self.consecutive_failures = 0
        self.failing_since = None

    @property
    def healthy(self) -> bool:
        return self.failing_since is None

    def fatal(self, now: float) -> str | None:
        """Why the daemon cannot go on (a permanent error, or failing too long), else None."""
        if self.permanent is not None:
            return f"the state database failed permanently: {self.permanent}"
        if (
            self.failing_since is not None
            and self.last_failed_at is not None
            and now - self.failing_since >= self.down_for_limit
            # Still failing now: not one old failure followed by quiet (e.g. an RPC outage
            # during which nothing is written, so nothing can show the database works).
            and now - self.last_failed_at <= STILL_FAILING_SECONDS
        ):
            return (
                f"the state database has been failing for {now - self.failing_since:.0f}s "
                f"({self.consecutive_failures} failures in a row); last error: {self.last_error}"
            )
        return None
