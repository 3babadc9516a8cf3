"""The path of one observation of one target: the page to read first.

A sweep (``watcher.service.rounds``) hands each target it polls to ``TargetPipeline.poll``,
which takes it down this path, each line a call into one module:

    observe   source.observe through the RPC client      watcher.kinds.<kind>, watcher.ledger.rpc,
              (a state kind under quorum: one answer per  watcher.service.agreement,
              endpoint asked, their steps compared; the   watcher.ledger.quorum
              one agreed on is taken)
    judge     source.doubt, then plausibility.judge:      watcher.ledger.plausibility
              a doubtful answer is held back until the
              same picture comes back (a failed call is
              never evidence: no step, no commit)
    agree     under quorum, the built-in rpc_disagreement watcher.alerting.builtin
              stepped and committed; with no agreement,
              not evidence: nothing else is committed
    step      source.step: pure, values in, values out    watcher.kinds.<kind>,
              (new state, episodes, alerts as facts)      watcher.alerting.lifecycle
    pace      a backing-off target's next cadence, kept   watcher.budget.cadences
              in its new state under ``_cadence``
    commit    word -> route -> silence the alerts, then   watcher.service.committing,
              state + alerts + outbox in one transaction  watcher.alerting.pipeline,
                                                          watcher.state (Store.commit_step)
    notify    wake the sender                             watcher.delivery.outbox_sender

A poll whose first call its sweep made with its batch's (``watcher.service.sweeps.FirstCalls``)
may end before the path: when its source reads that answer as nothing new (``quiet``), it is
counted as a success, and nothing else is done (most polls of a large address list).

Which layer writes which key of a target's state document is said beside ``TargetState``
(``watcher.core.events``).

The pipeline is given everything it uses when it is made (``watcher.app.Daemon`` wires it):
the store, the observer (one endpoint, or a quorum: ``Observer``), the cadence book, the commit
path (``Committer``), the configuration in force (one reference, swapped whole by a reload:
``watcher.service.configuration``), the round health, the last errors and the metric hooks.
It keeps two things of its own: the highest slot accepted answers have shown, which bounds any
other answer's, and the rpc_disagreement episodes as last committed. What failed polls leave
behind (``LastErrors``, ``PollFaults``: the sweeper's) is at the end of the module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, Protocol, cast

import structlog

from watcher.alerting import builtin
from watcher.alerting.builtin import RoundHealth
from watcher.alerting.messages import PresentedRule
from watcher.budget.cadences import CadenceBook, activity, paced_state, stored_cadence
from watcher.core.errors import DoubtfulAnswer, RpcError
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.core.tally import count_disagreement
from watcher.kinds.base import FirstCall, Source
from watcher.ledger import plausibility
from watcher.ledger.plausibility import Doubt, SlotTip
from watcher.ledger.quorum import Disagreement
from watcher.service.agreement import Observer
from watcher.service.committing import Committer
from watcher.service.configuration import Configured
from watcher.service.metrics import ObservedValues
from watcher.service.sweeps import Primed
from watcher.state.interface import TargetStateStore

log = structlog.get_logger("watcher.app")


class PollMetrics(Protocol):
    """The metric hooks a poll feeds (``watcher.service.metrics.Metrics``)."""

    @property
    def observed(self) -> ObservedValues: ...

    def polled(self, source: str, ok: bool, count: int = 1) -> None: ...

    def polled_for(self, rules: Iterable[PresentedRule], count: int = 1) -> None: ...

    def suppressed(self, alerts: Iterable[AlertMessage]) -> None: ...

    def disagreed(self, source: str) -> None: ...


class TargetPipeline:
    """One observation of a target, from its answer to its outbox rows."""

    def __init__(
        self,
        *,
        store: TargetStateStore,
        observer: Observer,
        cadences: CadenceBook,
        committer: Committer,
        config: Configured,
        health: RoundHealth,
        last_errors: LastErrors,
        metrics: PollMetrics,
    ) -> None:
        """``observer``: how a target is observed (one endpoint, or a quorum of them);
        ``last_errors``: where a failed poll's error is noted (the round's log line says it)."""
        self.store, self.observer, self.cadences, self.committer = (
            store,
            observer,
            cadences,
            committer,
        )
        self.config, self.health, self.last_errors = config, health, last_errors
        self.metrics = metrics
        # The highest slot accepted answers have shown: bounds the slots of any other answer.
        self.tip: SlotTip | None = None
        # The rpc_disagreement episodes, read once: every poll under quorum steps them.
        self._disagreements: TargetState | None = None
        self._disagreements_read = False

    async def poll(
        self,
        source: Source[Any],
        target: str,
        interval: float = 0.0,
        max_interval: float | None = None,
        primed: Primed | None = None,
    ) -> bool:
        """One observation of ``target`` by the job sweeping ``source`` every ``interval`` s;
        whether it succeeded (an answer taken as evidence). With ``max_interval`` the target
        backs off while quiet: its cadence after this poll goes with its new state.
        ``primed``: the target's state as its sweep read it and a reader holding the answer
        to its first call, made with its batch's (``watcher.service.sweeps.FirstCalls``)."""
        config = self.config.current
        watching = config.ruleset.rules_for(source.name, target)
        rules: list[PresentedRule] = [*watching, *config.builtins.rules_for(source.name)]
        if primed is None:
            state, ledger = await self.store.load_state(source.name, target), None
        else:
            state, ledger = primed.state, primed.ledger()
        self.metrics.polled_for(watching)
        try:
            observed = await self.observer.observe(source, target, state, rules, ledger)
        except RpcError as exc:
            # A failed call is never evidence: no step, no commit, the cursor stays put.
            # Logged once per round (the round's summary and RoundHealth), not per poll.
            self.health.failed(source.name, target, exc, interval=interval, quiet=True)
            self.last_errors.failed(source.name, f"{type(exc).__name__}: {exc}")  # redacted
            self.metrics.polled(source.name, ok=False)
            return False
        observation, now = observed.observation, observed.now
        doubt = source.doubt(state, observation, now, self.tip)
        if doubt is not None and not await self._confirmed(
            source, target, state, doubt, now, interval
        ):
            return False
        self.health.succeeded(source.name, interval=interval)
        self.metrics.polled(source.name, ok=True)
        if observed.quorum:
            await self._commit_disagreement(source.name, target, observed.disagreement, now)
            if not observed.agreed:
                # Answered, so not a failed poll (the round, the heartbeat and /healthz go on),
                # but not evidence either: nothing of the target is committed, its cursor stays.
                return True
        outcome = source.step(rules, target, state, observation, now)
        if max_interval is not None:
            outcome = self._paced(source, target, state, outcome, now, interval, max_interval)
        await self.committer.commit(source.name, target, outcome, rules, now, previous=state)
        if outcome.alerts:
            self.metrics.suppressed(outcome.alerts)
        # Evidence now: what it shows on /metrics, by the rules in force (a reload may have
        # come while it was polled).
        self.metrics.observed.accepted(
            source.name, target, observation, self.config.current.ruleset.rules_for
        )
        slot = source.tip(observation)
        if slot is not None:
            self.tip = SlotTip(slot, now) if self.tip is None else self.tip.after(slot, now)
        return True

    def quiet(
        self,
        source: Source[Any],
        polls: Sequence[tuple[str, Primed | None]],
        interval: float,
        max_interval: float | None,
    ) -> list[bool]:
        """For each poll of a batch (its target, and what its batch primed it with), whether
        its first answer shows it quiet (its source's ``FirstCall.quiet_at_rest``, of the
        state's rest or the one its last quiet poll left: ``FirstCall.quiet``). Those are counted
        as ``poll`` counts a success that found nothing, and are not run (no observation, step
        or commit: they would change nothing). The others are to be ``poll``-ed. A target that
        backs off (``max_interval``) is always polled: even a quiet poll moves its cadence."""
        if max_interval is not None:
            return [False] * len(polls)
        config = self.config.current
        name, watching_of = source.name, config.ruleset.watching
        builtins = tuple(config.builtins.rules_for(name))
        # A primed answer is a ``FirstCall`` source's (``watcher.service.sweeps.FirstCalls``).
        quiet_at_rest = cast(FirstCall, source).quiet_at_rest
        found: list[bool] = []
        # Counted once for the batch: the targets of one rule share its tuple of rules.
        quiet_for: dict[int, int] = {}
        rules_of: dict[int, tuple[PresentedRule, ...]] = {}
        for target, primed in polls:
            if primed is None or primed.call is None:
                found.append(False)
                continue
            watching = watching_of(name, target)
            rules = watching + builtins if builtins else watching
            # The state's rest, or the one its last quiet poll left (``watcher.service.rests``).
            done = primed.rest is not None and quiet_at_rest(
                rules, target, primed.rest, primed.answer
            )
            found.append(done)
            if done:
                key = id(watching)
                if key in quiet_for:
                    quiet_for[key] += 1
                else:
                    quiet_for[key], rules_of[key] = 1, watching
        total = sum(quiet_for.values())
        if total:
            for key, count in quiet_for.items():
                self.metrics.polled_for(rules_of[key], count)
            self.health.succeeded(name, interval=interval, count=total)
            self.metrics.polled(name, ok=True, count=total)
        return found

    # -- agree ---------------------------------------------------------------------------------

    async def _commit_disagreement(
        self, source: str, target: str, found: Disagreement | None, now: float
    ) -> None:
        """A poll under quorum: its rpc_disagreement episode stepped and committed (opened,
        kept or resolved), and ``found`` (the endpoints disagree) counted."""
        if not self._disagreements_read:
            self._disagreements = await self.store.load_state(
                builtin.SOURCE, builtin.DISAGREEMENT_TARGET
            )
            self._disagreements_read = True
        builtins = self.config.current.builtins
        step = builtins.disagreement_step(self._disagreements, source, target, found, now)
        if step is not None:
            disagreement = [builtins.rpc_disagreement]
            await self.committer.commit(
                builtin.SOURCE, builtin.DISAGREEMENT_TARGET, step, disagreement, now
            )
            self._disagreements = step.state  # once committed (or staged): a failed write raises
        if found is not None:
            self.metrics.disagreed(source)
            count_disagreement()

    # -- judge ---------------------------------------------------------------------------------

    async def _confirmed(
        self,
        source: Source[Any],
        target: str,
        state: TargetState | None,
        doubt: Doubt,
        now: float,
        interval: float,
    ) -> bool:
        """A doubtful answer (``watcher.ledger.plausibility``): taken once the same picture has
        been seen ``CONFIRM_POLLS`` polls in a row; until then a failed call that advances
        nothing but the streak (warned once per stretch)."""
        verdict = plausibility.judge(state, doubt)
        if verdict.accept:
            log.warning(
                "doubtful answer confirmed; taken as evidence",
                source=source.name,
                target=target,
                reason=doubt.reason,
                polls=verdict.seen,
            )
            return True
        error = DoubtfulAnswer(f"not evidence: {doubt.reason}", method=source.name)
        self.health.failed(
            source.name, target, error, interval=interval, quiet=not verdict.new_stretch
        )
        self.metrics.polled(source.name, ok=False)
        self.last_errors.failed(source.name, f"{type(error).__name__}: {error}")
        await self.committer.commit_state(source.name, target, verdict.state, now)
        return False

    # -- pace ----------------------------------------------------------------------------------

    def _paced(
        self,
        source: Source[Any],
        target: str,
        state: TargetState | None,
        outcome: StepOutcome,
        now: float,
        every: float,
        max_every: float,
    ) -> StepOutcome:
        """The step's outcome with the target's cadence after this poll (activity: what the
        source counts as such changed) kept in its new state (``watcher.budget.cadences``)."""
        events = activity(state, outcome.state, source.facts.activity_keys)
        stored = stored_cadence(state)
        cadence = self.cadences.after_poll(
            source.name,
            target,
            stored,
            now=now,
            events=events,
            every=every,
            max_every=max_every,
        )
        return replace(outcome, state=paced_state(state, outcome.state, cadence, events, stored))


# -- what failed polls leave behind ---------------------------------------------------------
# ``LastErrors``: each source's last failed poll's error, for its round's log line (the pipeline
# records the polls that failed: an RPC error, an answer not taken as evidence; the sweeper those
# that raised). ``PollFaults``: polls that raised, a failure that belongs to its target, not to
# the sweep. A kind's ``doubt`` or ``step`` may raise on one target (a state written by an older
# version, an answer shape nobody foresaw). That poll fails and the sweep goes on with the
# others: the round's flush, its record, rpc health and the heartbeat still happen. Each
# target's stretch of such failures is logged once, as an error with the traceback, and its end
# once; the polls in between only count (``/metrics``: ``watcher_poll_errors_total``).
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
