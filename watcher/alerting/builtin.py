"""Built-in alerts, the daemon's own ``rpc_unhealthy``, ``rpc_disagreement`` and
``cluster_delinquent_stake``, and the health they page on: of the RPC endpoint as the pollers see
it (``RoundHealth``: rounds that failed, cluster-wide) and of the state database as every task
sees it (``StateHealth``: for the log, the supervisor and ``/healthz``). The ``health`` settings
tune them all.

The built-in alerts need no rule file. Each is a ``BuiltinRule``, a value shaped like a
state-kind rule, so that its episodes go through ``watcher.alerting.lifecycle`` and its alerts
through the same route, presentation, silences and store path as any rule's: exactly once, and a
firing episode survives a restart without being announced again.

- ``rpc_unhealthy`` (subject ``rpc``): fires once the endpoint has failed every call of
  ``health.unhealthy_after`` rounds in a row (how rounds are counted, and why dependent alerts
  need no special holding: below), naming the endpoint (its key masked) and the last error;
  resolves on the next round in which a call succeeds, saying how long the outage lasted. Its
  episode is stored as the state of target ``(builtin, rpc)``.
- ``rpc_disagreement`` (subject ``<source>:<target>``, e.g. ``votes:cluster``; only with
  ``quorum`` above 1): the endpoints asked for one poll of a target answered, but their steps
  disagreed (``watcher.ledger.quorum``), on every poll for ``health.disagreement_for`` (its
  ``for``); names the endpoints (keys masked), the source and target and what each endpoint's
  step decided, and, when a majority of three or more decided, the endpoints it outvoted.
  Resolves on the first poll of that target on which they agree. A poll of another target, or
  a failed poll, changes nothing. Its episodes, one per target, are stored
  as the state of target ``(builtin, disagreement)``.
- ``cluster_delinquent_stake`` (subject ``cluster``): evaluated by the ``votes`` source, which
  sees the whole vote-account set (so only while some ``delinquent_validators`` rule exists);
  it is handed to that source's step as one more rule (``Builtins.rules_for``).

Channels (decision): ``health.channels`` when set. Otherwise ``rpc_unhealthy`` and
``rpc_disagreement`` go to ``fallback_channels``, else ``default_channels``, else every channel
any rule delivers to (the endpoints concern every rule); ``cluster_delinquent_stake`` goes to the
channels of the ``delinquent_validators`` rules whose alerts it folds.

Rounds (``RoundHealth``): a *round* is one sweep of one job over its targets. A round *failed*
when every call of it failed; a round in which at least one call succeeded means the endpoint
*answered*. Counting is cluster-wide: each job (a source at one interval: ``JobKey``) keeps its
streak of failed rounds, and any answered round, of any job, resets every streak (the endpoint
works). The streak that decides is the longest one (``RoundVerdict.failed_rounds``). Taking the
longest streak of one job, rather than the sum over jobs, keeps "N rounds" a measure of time: one
bad second in which the four sources fail together is one failed round of each, not four failed
rounds. Two jobs of one source (two sweep intervals) run side by side: each call and each round
is counted for its own job, so neither can close the other's round. A poll under ``quorum``
whose endpoints answered but disagree counts as answered: the endpoint works; the disagreement
is told apart (``rpc_disagreement``).

Dependent alerts while the endpoint is unhealthy (decision): a failed call is never evidence, so
no rule steps on one: nothing fires or resolves from a failed poll, and a validator rule cannot
report "missing" because getVoteAccounts failed. A call that does succeed during an unhealthy
episode is real evidence, and its step runs as usual: holding it back would only delay a true
alert, and the round it belongs to resolves ``rpc_unhealthy`` anyway (the endpoint answered).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from watcher.alerting.lifecycle import Episode, step_episodes
from watcher.config.rule_models import (
    CLUSTER_DELINQUENT_STAKE,
    RPC_DISAGREEMENT,
    RPC_UNHEALTHY,
    RuleBase,
    channels_of,
)
from watcher.config.settings import Settings
from watcher.core.clock import human_duration, iso
from watcher.core.errors import RpcError, StateError
from watcher.core.events import Severity, StepOutcome, TargetState
from watcher.ledger.quorum import Disagreement

SOURCE = "builtin"  # the store's source of the built-in episodes
RPC_TARGET = "rpc"  # ... and target of the rpc_unhealthy episode
RPC_SUBJECT = "rpc"
DISAGREEMENT_TARGET = "disagreement"  # ... and of the rpc_disagreement episodes

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class BuiltinRule:
    """A built-in alert, with what ``watcher.alerting.lifecycle`` and ``watcher.alerting.messages``
    read of a rule.

    ``threshold``: failed rounds for rpc_unhealthy, percent of activated stake for
    cluster_delinquent_stake (unused by rpc_disagreement, whose ``for_`` is its threshold)."""

    name: str
    severity: Severity
    notify: tuple[str, ...]
    threshold: float
    title: str | None = None
    body: str | None = None
    for_: float = 0.0
    keep_firing_for: float = 0.0
    repeat: float | None = None

    @property
    def kind(self) -> str:
        return self.name


@dataclass(frozen=True)
class Builtins:
    """The built-in alerts of one daemon, built once from the settings and the rules."""

    endpoint: str  # the RPC URL with its key masked
    rpc_unhealthy: BuiltinRule
    rpc_disagreement: BuiltinRule
    cluster_delinquent_stake: BuiltinRule | None  # None: turned off

    @classmethod
    def from_settings(
        cls, settings: Settings, rules: Sequence[RuleBase], endpoint: str
    ) -> Builtins:
        health = settings.health
        every_rule = _union(channels_of(rule, settings) for rule in rules)
        rpc_channels = (
            health.channels or settings.fallback_channels or settings.default_channels or every_rule
        )
        delinquency = [rule for rule in rules if rule.kind == "delinquent_validators"]
        stake_channels = health.channels or _union(
            channels_of(rule, settings) for rule in delinquency
        )
        stake_pct = health.cluster_delinquent_stake_pct
        return cls(
            endpoint=endpoint,
            rpc_unhealthy=BuiltinRule(
                RPC_UNHEALTHY, health.severity, rpc_channels, health.unhealthy_after
            ),
            rpc_disagreement=BuiltinRule(
                RPC_DISAGREEMENT, health.severity, rpc_channels, 0.0, for_=health.disagreement_for
            ),
            cluster_delinquent_stake=None
            if stake_pct is None
            else BuiltinRule(CLUSTER_DELINQUENT_STAKE, health.severity, stake_channels, stake_pct),
        )

    def rules(self) -> list[BuiltinRule]:
        """Every built-in rule that is on."""
        on = [self.rpc_unhealthy, self.rpc_disagreement, self.cluster_delinquent_stake]
        return [rule for rule in on if rule is not None]

    def rules_for(self, source: str) -> list[BuiltinRule]:
        """The built-in rules a source's step evaluates besides the user's."""
        if source == "votes" and self.cluster_delinquent_stake is not None:
            return [self.cluster_delinquent_stake]
        return []

    def rpc_step(
        self, state: TargetState | None, verdict: RoundVerdict, now: float
    ) -> StepOutcome | None:
        return step_rpc_health(self.rpc_unhealthy, state, verdict, self.endpoint, now)

    def disagreement_step(
        self,
        state: TargetState | None,
        source: str,
        target: str,
        found: Disagreement | None,
        now: float,
    ) -> StepOutcome | None:
        """One poll of ``target`` under quorum -> its rpc_disagreement episode after it and what to
        say, or None when there is nothing to record (the endpoints agree and no episode is open).
        ``found``: what they disagree on; None: they agree."""
        rule = self.rpc_disagreement
        subject = disagreement_subject(source, target)
        if found is None and _episode(state, rule.name, subject).status == "inactive":
            return None
        facts: dict[str, Any] = {"built_in": True, "source": source, "target": target}
        if found is not None:
            facts |= {
                "endpoints": list(found.endpoints),
                "outvoted": list(found.outvoted),
                "differences": found.differences,
                "disagreement_for": human_duration(rule.for_),
            }
        return step_episodes(
            [rule], state, now, lambda _rule: {subject: (found is not None, facts)}
        )


def _union(groups: Iterable[Sequence[str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for group in groups for name in group))


# -- rpc_unhealthy: pure -------------------------------------------------------------------


def rpc_condition(verdict: RoundVerdict, unhealthy_after: int) -> bool | None:
    """Is the endpoint unhealthy after this round? A round in which a call succeeded: no. A
    failed round: yes from ``unhealthy_after`` failed rounds in a row on, before that unknown
    (a short streak is not evidence either way: it must not resolve an outage that survived a
    restart, whose count starts again from zero)."""
    if verdict.answered:
        return False
    return True if verdict.failed_rounds >= unhealthy_after else None


def step_rpc_health(
    rule: BuiltinRule,
    state: TargetState | None,
    verdict: RoundVerdict,
    endpoint: str,
    now: float,
) -> StepOutcome | None:
    """One finished round -> the rpc_unhealthy episode after it and what to say, or None when
    there is nothing to record (the usual case: the endpoint answers and no episode is open)."""
    active = rpc_condition(verdict, int(rule.threshold))
    episode = _episode(state, rule.name, RPC_SUBJECT)
    firing = episode.status == "firing"
    if active is None or (not active and not firing):
        return None
    # The outage started at the first failed round, kept across restarts by the episode.
    started = [now if verdict.failing_since is None else verdict.failing_since]
    if firing:
        started.append(float(episode.active_details.get("failing_since_ts", now)))
    since = min(started)
    facts: dict[str, Any] = {"built_in": True, "endpoint": endpoint}
    if active:
        facts |= {
            "failed_rounds": verdict.failed_rounds,
            "unhealthy_after": int(rule.threshold),
            "failing_since_ts": since,
            "failing_since": iso(since),
            "last_error": verdict.last_error,
        }
    else:
        facts |= {"down_for_seconds": now - since, "down_for": human_duration(now - since)}
    return step_episodes([rule], state, now, lambda _rule: {RPC_SUBJECT: (active, facts)})


# -- rpc_disagreement: pure (its step: Builtins.disagreement_step) --------------------------


def disagreement_subject(source: str, target: str) -> str:
    return f"{source}:{target}"


def _episode(state: TargetState | None, rule: str, subject: str) -> Episode:
    stored = (state or {}).get("episodes", {}).get(rule, {}).get(subject)
    return Episode.from_json(stored) if stored is not None else Episode()


# -- the health counted: the endpoint's rounds, the database's failing stretches -----------


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

    def succeeded(self, source: str, *, interval: float = 0.0, count: int = 1) -> None:
        """``count`` polls of ``source`` answered."""
        self._ok_this_round[source, interval] += count

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
