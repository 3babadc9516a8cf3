"""The path of one observation of one target: the page to read first.

A sweep (``watcher.service.rounds``) hands each target it polls to ``TargetPipeline.poll``,
which takes it down this path, each line a call into one module:

    observe   source.observe through the RPC client      watcher.kinds.<kind>, watcher.ledger.rpc
              (a state kind under quorum: one answer per  watcher.ledger.quorum (observe_from)
              endpoint asked)
    judge     source.doubt, then plausibility.judge:      watcher.ledger.plausibility
              a doubtful answer is held back until the
              same picture comes back (a failed call is
              never evidence: no step, no commit)
    step      source.step: pure, values in, values out    watcher.kinds.<kind>,
              (new state, episodes, alerts as facts)      watcher.alerting.lifecycle
    agree     under quorum, the endpoints' steps compared watcher.ledger.quorum (agree,
              (a disagreement is the built-in              majority), watcher.alerting.builtin
              rpc_disagreement's, and not evidence)
    pace      a backing-off target's next cadence, kept   watcher.service.cadences
              in its new state under ``_cadence``
    commit    word -> route -> silence the alerts, then   watcher.alerting.pipeline,
              state + alerts + outbox in one transaction  watcher.state (Store.commit_step)
    notify    wake the sender                             watcher.delivery.outbox_sender

Which layer writes which key of a target's state document is said beside ``TargetState``
(``watcher.core.events``).

The pipeline is given everything it uses when it is made (``watcher.app.Daemon`` wires it):
the store, the RPC reader, the quorum, the cadence book, the configuration in force (one
reference, swapped whole by a reload: ``watcher.service.configuration``), the round health and
the few metric hooks, the sender's destinations and the clock. It keeps two things of its own:
the highest slot accepted answers have shown (bounding any other answer's), and the
rpc_disagreement episodes, read once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import structlog

from watcher.alerting import builtin, pipeline, silences
from watcher.alerting.health import RoundHealth
from watcher.alerting.messages import PresentedRule
from watcher.config.rule_models import StateRule
from watcher.core.clock import Clock
from watcher.core.errors import DoubtfulAnswer, RpcError
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.core.outbox_rows import Destination
from watcher.core.tally import count_alerts, count_disagreement
from watcher.kinds import word
from watcher.kinds.base import LedgerReader, Source
from watcher.ledger import plausibility
from watcher.ledger.plausibility import Doubt, SlotTip
from watcher.ledger.quorum import Quorum, agree, majority, observe_from
from watcher.ledger.rpc_methods import PinnedReader
from watcher.service.cadences import CadenceBook, activity, paced_state, stored_cadence
from watcher.service.configuration import Configured
from watcher.service.observed_values import ObservedValues
from watcher.state.alerts import same_state
from watcher.state.interface import Store

log = structlog.get_logger("watcher.app")

Answers = list[tuple[str, Any]]  # each answer with the endpoint that gave it (its public URL)


class PollMetrics(Protocol):
    """The metric hooks a poll feeds (``watcher.service.metrics.Metrics``)."""

    @property
    def observed(self) -> ObservedValues: ...

    def polled(self, source: str, ok: bool) -> None: ...

    def polled_for(self, rules: Iterable[str]) -> None: ...

    def disagreed(self, source: str) -> None: ...


class Destinations(Protocol):
    """Where an alert goes: every URL of its channels (``watcher.delivery.outbox_sender``)."""

    def destinations(self, alert: AlertMessage) -> Sequence[Destination]: ...


class TargetPipeline:
    """One observation of a target, from its answer to its outbox rows."""

    def __init__(
        self,
        *,
        store: Store,
        ledger: LedgerReader,
        endpoint: str,
        endpoints: Callable[[], Sequence[PinnedReader]] | None,
        quorum: Quorum,
        cadences: CadenceBook,
        config: Configured,
        health: RoundHealth,
        last_errors: dict[str, str],
        metrics: PollMetrics,
        sender: Destinations,
        wake_sender: Callable[[], None],
        clock: Clock,
    ) -> None:
        """``endpoint``: the RPC URL answers are said to come from (its key masked);
        ``endpoints``: one reader pinned to each endpoint, healthiest first (None: one
        endpoint only, no quorum); ``last_errors``: source -> its last failed poll's error
        (the round's log line says it); ``wake_sender``: there is work in the outbox."""
        self.store, self.ledger, self.endpoint, self.endpoints = store, ledger, endpoint, endpoints
        self.quorum, self.cadences, self.config = quorum, cadences, config
        self.health, self.last_errors, self.metrics = health, last_errors, metrics
        self.sender, self.wake_sender, self.clock = sender, wake_sender, clock
        # The highest slot accepted answers have shown: bounds the slots of any other answer.
        self.tip: SlotTip | None = None
        # The rpc_disagreement episodes, read once: every poll under quorum looks at them.
        self._disagreements: TargetState | None = None
        self._disagreements_read = False

    async def poll(
        self,
        source: Source,
        target: str,
        interval: float = 0.0,
        max_interval: float | None = None,
    ) -> bool:
        """One observation of ``target`` by the job sweeping ``source`` every ``interval`` s;
        whether it succeeded (an answer taken as evidence). With ``max_interval`` the target
        backs off while quiet: its cadence after this poll goes with its new state."""
        config = self.config.current
        watching = config.ruleset.rules_for(source.name, target)
        rules: list[PresentedRule] = [*watching, *config.builtins.rules_for(source.name)]
        state = await self.store.load_state(source.name, target)
        self.metrics.polled_for(rule.name for rule in watching)
        try:
            answers = await self._observe(source, target, state)
        except RpcError as exc:
            # A failed call is never evidence: no step, no commit, the cursor stays put.
            # Logged once per round (the round's summary and RoundHealth), not per poll.
            self.health.failed(source.name, target, exc, interval=interval, quiet=True)
            self.last_errors[source.name] = f"{type(exc).__name__}: {exc}"  # redacted
            self.metrics.polled(source.name, ok=False)
            return False
        observation, now = answers[0][1], self.clock()
        doubt = source.doubt(state, observation, now, self.tip)
        if doubt is not None and not await self._confirmed(
            source, target, state, doubt, now, interval
        ):
            return False
        self.health.succeeded(source.name, target, interval=interval)
        self.metrics.polled(source.name, ok=True)
        outcome = source.step(rules, target, state, observation, now)
        if answers[1:]:
            decided = await self._agreed(source, target, rules, state, answers, outcome, now)
            if decided is None:
                # Answered, so not a failed poll (the round, the heartbeat and /healthz go on),
                # but not evidence either: nothing of the target is committed, its cursor stays.
                return True
            outcome, observation = decided
        if max_interval is not None:
            outcome = self._paced(source, target, state, outcome, now, interval, max_interval)
        await self.commit(source.name, target, outcome, rules, now, previous=state)
        # Evidence now: what it shows on /metrics, by the rules in force (a reload may have
        # come while it was polled).
        self.metrics.observed.accepted(
            source.name, target, observation, self.config.current.ruleset.rules_for
        )
        slot = source.tip(observation)
        if slot is not None:
            self.tip = SlotTip(slot, now) if self.tip is None else self.tip.after(slot, now)
        return True

    # -- observe -------------------------------------------------------------------------------

    async def _observe(self, source: Source, target: str, state: TargetState | None) -> Answers:
        """One observation, with the endpoint that gave it; a state kind's target under quorum:
        one from each of ``quorum`` endpoints (``watcher.ledger.quorum``)."""
        if (
            self.quorum.needed > 1
            and self.endpoints is not None
            and any(
                isinstance(rule, StateRule)
                for rule in self.config.current.ruleset.rules_for(source.name, target)
            )
        ):
            observe = lambda reader: source.observe(reader, target, state)  # noqa: E731
            answers = await observe_from(self.endpoints(), self.quorum.needed, observe)
            return [(reader.public_url, answer) for reader, answer in answers]
        return [(self.endpoint, await source.observe(self.ledger, target, state))]

    async def _observe_more(
        self, source: Source, target: str, state: TargetState | None, answers: Answers
    ) -> Answers:
        """One more observation, from an endpoint not asked yet (the next healthiest that
        answers), for a majority; none when every endpoint was asked or none of the rest
        answers (then the endpoints asked disagree, as with two)."""
        if self.endpoints is None:
            return []
        asked = {endpoint for endpoint, _ in answers}
        rest = [reader for reader in self.endpoints() if reader.public_url not in asked]
        if not rest:
            return []
        observe = lambda reader: source.observe(reader, target, state)  # noqa: E731
        try:
            more = await observe_from(rest, 1, observe)
        except RpcError:
            return []
        return [(reader.public_url, answer) for reader, answer in more]

    # -- judge ---------------------------------------------------------------------------------

    async def _confirmed(
        self,
        source: Source,
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
        self.last_errors[source.name] = f"{type(error).__name__}: {error}"
        await self.store.commit_step(source.name, target, verdict.state, [], self.destinations, now)
        return False

    # -- agree ---------------------------------------------------------------------------------

    async def _agreed(
        self,
        source: Source,
        target: str,
        rules: Sequence[PresentedRule],
        state: TargetState | None,
        answers: Answers,
        outcome: StepOutcome,
        now: float,
    ) -> tuple[StepOutcome, Any] | None:
        """Under quorum: the step to commit and its observation, when ``quorum`` endpoints
        agree: every one asked (``outcome``, the first's), or, when they do not and more
        endpoints are configured, a majority once one more is asked (``watcher.ledger.quorum``);
        None: no agreement, not evidence. A disagreement is counted (metric, round tally) and
        kept by the built-in rpc_disagreement (naming the endpoints outvoted), whose episode for
        this target an agreement resolves."""
        answers = list(answers)
        outcomes = [outcome]
        outcomes += [source.step(rules, target, state, other, now) for _, other in answers[1:]]
        if not agree(outcomes):
            for endpoint, extra in await self._observe_more(source, target, state, answers):
                answers.append((endpoint, extra))
                outcomes.append(source.step(rules, target, state, extra, now))
        endpoints = [endpoint for endpoint, _ in answers]
        found = self.quorum.compare(source.name, target, endpoints, outcomes)
        if not self._disagreements_read:
            self._disagreements = await self.store.load_state(
                builtin.SOURCE, builtin.DISAGREEMENT_TARGET
            )
            self._disagreements_read = True
        builtins = self.config.current.builtins
        step = builtins.disagreement_step(self._disagreements, source.name, target, found, now)
        if step is not None:
            disagreement = [builtins.rpc_disagreement]
            await self.commit(builtin.SOURCE, builtin.DISAGREEMENT_TARGET, step, disagreement, now)
            self._disagreements = step.state  # once committed (or staged): a failed write raises
        decided = (0,) if found is None else majority(outcomes, self.quorum.needed)
        if found is not None:
            self.metrics.disagreed(source.name)
            count_disagreement()
        if decided is None:
            return None
        first = decided[0]
        return outcomes[first], answers[first][1]

    # -- pace ----------------------------------------------------------------------------------

    def _paced(
        self,
        source: Source,
        target: str,
        state: TargetState | None,
        outcome: StepOutcome,
        now: float,
        every: float,
        max_every: float,
    ) -> StepOutcome:
        """The step's outcome with the target's cadence after this poll (activity: what the
        source counts as such changed) kept in its new state (``watcher.service.cadences``)."""
        events = activity(state, outcome.state, getattr(source, "activity_keys", ()))
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

    # -- commit and notify -----------------------------------------------------------------------

    async def commit(
        self,
        source: str,
        target: str,
        outcome: StepOutcome,
        rules: Sequence[PresentedRule],
        now: float,
        *,
        previous: TargetState | None = None,
    ) -> None:
        """The commit path (``watcher.alerting.pipeline``): word -> route -> silence the step's
        alerts, then store them with its state in one transaction and wake the sender.
        A quiet step that left the state as it was (``previous``) writes nothing: most polls of
        a large address list see nothing new, and a sweep then costs no write at all. One that
        changed it is staged and written with the others (``Store.flush_states``)."""
        if not outcome.alerts:
            if previous is not None and same_state(outcome.state, previous):
                return
            if self.store.stage_state(source, target, outcome.state, now):
                await self.store.flush_states()
            return
        # Read now, after the observation: a silence added before the change it mutes is seen.
        active = await self.store.active_silences(now)
        config = self.config.current
        stages = (
            pipeline.word(word, rules, config.presentation),
            pipeline.route(config.routes),
            pipeline.silence(lambda: active, now),
        )
        alerts = pipeline.run(outcome.alerts, stages)
        await self.store.commit_step(source, target, outcome.state, alerts, self.destinations, now)
        if alerts:
            count_alerts(len(alerts))
            self.wake_sender()

    def destinations(self, alert: AlertMessage) -> Sequence[Destination]:
        """Every URL the alert goes to; none for a silenced one (recorded in the history as
        "silenced", sent nowhere)."""
        if silences.is_silenced(alert):
            return []
        return self.sender.destinations(alert)
