"""The composition root: one daemon, one event loop.

``poll_target`` tells the whole story of one observation, each line a call into one module:

    observe (RPC) -> step (diff + rules + alerts, pure) -> commit (state + outbox, one
    SQLite transaction) -> wake the sender (Apprise)

The daemon builds the parts that run it and gives each what it uses: the scheduler runs one
sweep per (source, interval) over that source's targets (``watcher.service.rounds.Sweeper``, a
``poll_target`` for each); the runtime (``watcher.service.supervisor.Runtime``) runs the tasks
and their life, the sender among them so that a slow channel never delays polling; the reloader
(``watcher.service.reloading.Reloader``) swaps in what SIGHUP read, through ``use``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import structlog

from watcher.alerting import builtin, pipeline, silences
from watcher.alerting.health import RoundHealth, StateHealth
from watcher.alerting.messages import Presentation, PresentedRule
from watcher.alerting.routing import Routes
from watcher.config.rule_models import StateRule
from watcher.config.ruleset import Job, RuleSet
from watcher.config.settings import Settings
from watcher.core.clock import Clock, system_clock
from watcher.core.errors import DoubtfulAnswer, RpcError
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.core.outbox_rows import Destination
from watcher.core.tally import count_alerts, count_disagreement
from watcher.kinds import word
from watcher.kinds.base import LedgerReader, Source
from watcher.ledger import plausibility
from watcher.ledger.plausibility import Doubt, SlotTip
from watcher.ledger.quorum import Quorum, agree, majority, observe_from
from watcher.ledger.rpc import RpcClient
from watcher.service import sweeps
from watcher.service.cadences import (
    CadenceBook,
    activity,
    paced_state,
    projected_per_second,
    stored_cadence,
)
from watcher.service.heartbeat import Heartbeat
from watcher.service.http import HttpEndpoint
from watcher.service.leasing import LeaseKeeper
from watcher.service.metrics import HealthVerdict, Metrics, health_verdict
from watcher.service.poll_faults import PollFaults
from watcher.service.pruning import Pruner
from watcher.service.reloading import Reloader
from watcher.service.rounds import Sweeper
from watcher.service.scheduler import Scheduler
from watcher.service.sdnotify import SystemdNotifier
from watcher.service.supervisor import Runtime
from watcher.state.alerts import same_state
from watcher.state.interface import LeaseRound, Store
from watcher.state.shards import SHARDS
from watcher.wiring import delivery_sender, open_store, rpc_client

log = structlog.get_logger(__name__)

# A delivery pending this long (or twice delivery.max_backoff) makes /healthz answer 503.
OUTBOX_STUCK_SECONDS = 300.0


class Daemon:
    def __init__(
        self,
        settings: Settings,
        ruleset: RuleSet,
        *,
        clock: Clock = system_clock,
        ledger: LedgerReader | None = None,
        notifier: SystemdNotifier | None = None,
    ) -> None:
        self.clock = clock
        self.notifier = notifier or SystemdNotifier()
        self.store: Store = open_store(settings)
        self.state_health = StateHealth(down_for_limit=settings.health.database_down_for)
        self.outbox_has_work = asyncio.Event()  # wakes the sender loop
        self.stopping = asyncio.Event()  # set once the run ends: no new round, send or pass
        self.metrics = Metrics(
            clock, lambda: getattr(self.rpc, "stats", None), read_state=self.store.summary
        )
        self.rpc: LedgerReader = ledger or rpc_client(settings)
        if isinstance(self.rpc, RpcClient):
            self.rpc.on_request = self.metrics.rpc_request
        self.sender = delivery_sender(
            settings, self.store, clock, self.state_health, self.metrics, self.outbox_has_work.set
        )
        self.health = RoundHealth()
        self.quorum = Quorum(settings.quorum)  # watcher.ledger.quorum
        # The rpc_disagreement episodes, read once: every poll under quorum looks at them.
        self._disagreements: TargetState | None = None
        self._disagreements_read = False
        # The highest slot accepted answers have shown: bounds the slots of any other answer.
        self.tip: SlotTip | None = None
        # Each adaptive target's cadence: what a sweep polls (watcher.service.cadences).
        self.cadences = CadenceBook()
        self.metrics.cadences = lambda: (
            projected_per_second(self.jobs, self.cadences),
            self.cadences.intervals(),
        )
        self.metrics.kind_of = self._kind_of
        self.use(settings, ruleset)
        self.last_errors: dict[str, str] = {}  # source -> its last failed poll's error
        self.poll_faults = PollFaults()  # targets whose polls raise (watcher.service.poll_faults)
        beat = settings.heartbeat
        self.heartbeat = (
            None
            if beat is None
            else Heartbeat(
                beat.url.get_secret_value(),
                beat.every,
                clock,
                on_accepted=self.metrics.heartbeat_accepted,
            )
        )
        http = settings.http
        self.http = (
            None if http is None else HttpEndpoint(http.host, http.port, self.metrics, self.healthz)
        )
        # The parts, each given what it uses. What a reload changes (what ``use`` puts in force)
        # they ask for when they need it, so a reload reaches them without their knowing it.
        self.sweeper = Sweeper(
            poll=self.poll_target,
            commit=self.commit,
            builtins=lambda: self.builtins,
            store=self.store,
            health=self.health,
            state_health=self.state_health,
            metrics=self.metrics,
            poll_faults=self.poll_faults,
            cadences=self.cadences,
            budget=lambda: (self.settings.rpc.budget, self.jobs),
            last_errors=self.last_errors,
            heartbeat=self.heartbeat,
            width=sweeps.sweep_width(settings.rpc.max_concurrency, settings.rpc.batch_size),
            stopping=self.stopping,
            clock=clock,
        )
        rpc = self.rpc
        self.scheduler = Scheduler(
            self.sweeper.sweep,
            catch_up=self.sweeper.catch_up,
            clock=clock,
            stretch=lambda job: sweeps.stretch_for(rpc, job),
        )
        self.pruner = Pruner(
            self.store, lambda: (self.ruleset, self.settings.retention), self.stopping, clock
        )
        self.leases = LeaseKeeper(
            self.store,
            self.state_health,
            self.stopping,
            clock,
            renew_every=settings.lease_ttl / 3,
            on_round=self.lease_round,
        )
        self.runtime = Runtime(
            scheduler=self.scheduler,
            sender=self.sender,
            pruner=self.pruner,
            notifier=self.notifier,
            http=self.http,
            heartbeat=self.heartbeat,
            leases=self.leases,
            store=self.store,
            state_health=self.state_health,
            outbox_has_work=self.outbox_has_work,
            stopping=self.stopping,
            close=self.close,
            clock=clock,
            rpc_url=str(getattr(self.rpc, "public_url", "custom")),
            state=settings.state_url_masked or str(settings.state_path),
            loop_lagged=self.metrics.loop_lagged,
        )
        self.reloader = Reloader(
            settings=lambda: self.settings,
            use=self.use,
            sender=self.sender,
            scheduler=self.scheduler,
            notifier=self.notifier,
            observed=self.metrics.observed,
        )

    # -- one observation ---------------------------------------------------------------------

    async def poll_target(
        self,
        source: Source,
        target: str,
        interval: float = 0.0,
        max_interval: float | None = None,
    ) -> bool:
        """One observation of ``target`` by the job sweeping ``source`` every ``interval`` s;
        whether it succeeded (an answer taken as evidence). With ``max_interval`` the target
        backs off while quiet: its cadence after this poll goes with its new state."""
        builtins = self.builtins.rules_for(source.name)
        watching = self.ruleset.rules_for(source.name, target)
        rules: list[PresentedRule] = [*watching, *builtins]
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
        self.metrics.observed.accepted(source.name, target, observation, self.ruleset.rules_for)
        slot = source.tip(observation)
        if slot is not None:
            self.tip = SlotTip(slot, now) if self.tip is None else self.tip.after(slot, now)
        return True

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

    async def _observe(
        self, source: Source, target: str, state: TargetState | None
    ) -> list[tuple[str, Any]]:
        """One observation, with the endpoint that gave it (its public URL); a state kind's
        target under quorum: one from each of ``quorum`` endpoints (``watcher.ledger.quorum``)."""
        if (
            self.quorum.needed > 1
            and isinstance(self.rpc, RpcClient)
            and any(
                isinstance(rule, StateRule) for rule in self.ruleset.rules_for(source.name, target)
            )
        ):
            readers = self.rpc.readers()
            observe = lambda reader: source.observe(reader, target, state)  # noqa: E731
            answers = await observe_from(readers, self.quorum.needed, observe)
            return [(reader.public_url, answer) for reader, answer in answers]
        endpoint = str(getattr(self.rpc, "public_url", ""))
        return [(endpoint, await source.observe(self.rpc, target, state))]

    async def _agreed(
        self,
        source: Source,
        target: str,
        rules: Sequence[PresentedRule],
        state: TargetState | None,
        answers: Sequence[tuple[str, Any]],
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
        step = self.builtins.disagreement_step(self._disagreements, source.name, target, found, now)
        if step is not None:
            disagreement = [self.builtins.rpc_disagreement]
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

    async def _observe_more(
        self,
        source: Source,
        target: str,
        state: TargetState | None,
        answers: Sequence[tuple[str, Any]],
    ) -> list[tuple[str, Any]]:
        """One more observation, from an endpoint not asked yet (the next healthiest that
        answers), for a majority; none when every endpoint was asked or none of the rest
        answers (then the endpoints asked disagree, as with two)."""
        if not isinstance(self.rpc, RpcClient):
            return []
        asked = {endpoint for endpoint, _ in answers}
        rest = [reader for reader in self.rpc.readers() if reader.public_url not in asked]
        if not rest:
            return []
        observe = lambda reader: source.observe(reader, target, state)  # noqa: E731
        try:
            more = await observe_from(rest, 1, observe)
        except RpcError:
            return []
        return [(reader.public_url, answer) for reader, answer in more]

    async def _confirmed(
        self,
        source: Source,
        target: str,
        state: TargetState | None,
        doubt: Doubt,
        now: float,
        interval: float,
    ) -> bool:
        """A doubtful answer (``watcher.ledger.plausibility``): taken once the same picture has been
        seen ``CONFIRM_POLLS`` polls in a row; until then a failed call that advances nothing
        but the streak (warned once per stretch)."""
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
        await self.store.commit_step(
            source.name, target, verdict.state, [], self._destinations, now
        )
        return False

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
        stages = (
            pipeline.word(word, rules, self.presentation),
            pipeline.route(self.routes),
            pipeline.silence(lambda: active, now),
        )
        alerts = pipeline.run(outcome.alerts, stages)
        await self.store.commit_step(source, target, outcome.state, alerts, self._destinations, now)
        if alerts:
            count_alerts(len(alerts))
            self.outbox_has_work.set()

    async def sweep(self, job: Job) -> None:
        """One scheduled round of a source over its targets (``watcher.service.rounds``)."""
        await self.sweeper.sweep(job)

    def lease_round(self, done: LeaseRound) -> None:
        """After a lease round: its figures, and this instance's part of the provider's rate
        (``max_rps`` is the key's: each instance spends it by the shards it holds)."""
        self.metrics.lease_round(done)
        if isinstance(self.rpc, RpcClient):
            self.rpc.share_rate(max(done.held, 1) / SHARDS)
        if done.taken or done.released or done.lost:
            self.scheduler.catch_up()  # the shards taken are swept now, not at the next interval

    def _kind_of(self, rule: str) -> str:
        """The kind of the rule called ``rule``: a built-in's is its name; "" for a rule no
        longer in force (its alert still fires until it is resolved or pruned)."""
        try:
            return self.ruleset.rule(rule).kind
        except KeyError:
            return next((b.kind for b in self.builtins.rules() if b.name == rule), "")

    # -- delivery ----------------------------------------------------------------------------

    def _destinations(self, alert: AlertMessage) -> Sequence[Destination]:
        if silences.is_silenced(alert):
            return []  # recorded in the history as "silenced", sent nowhere
        return self.sender.destinations(alert)

    def healthz(self) -> HealthVerdict:
        """``/healthz``: polls succeed and the outbox drains (a delivery pending for longer than
        its backoff allows is stuck)."""
        state = self.metrics.state()
        stuck_after = max(OUTBOX_STUCK_SECONDS, 2 * self.settings.delivery.max_backoff)
        outbox = None if state is None else state[1]
        return health_verdict(self.health, self.state_health, outbox, self.clock(), stuck_after)

    # -- life cycle --------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then stop cleanly (``watcher.service.supervisor``)."""
        await self.runtime.run(stop, self.ruleset)

    async def reload(self, load: Callable[[], tuple[Settings, RuleSet]]) -> bool:
        """SIGHUP: the settings and rules read again (``watcher.service.reloading``)."""
        return await self.reloader.reload(load)

    def use(self, settings: Settings, ruleset: RuleSet) -> None:
        """Puts settings and rules in force: the built-in rules, the routes, the wording (the
        parts read them from here)."""
        self.settings, self.ruleset = settings, ruleset
        # For the budget's plan (a new list: planned again) and /metrics' projection.
        self.jobs = ruleset.jobs()
        endpoint = getattr(self.rpc, "public_url", settings.rpc_url_redacted)
        self.builtins = builtin.Builtins.from_settings(settings, ruleset.rules, endpoint)
        self.routes = Routes([*ruleset.rules, *self.builtins.rules()], settings)
        self.presentation = Presentation(settings.labels, settings.explorer_url)
        self.sender.presentation = self.presentation  # digests name keys the same way

    async def close(self) -> None:
        aclose = getattr(self.rpc, "aclose", None)
        if aclose is not None:
            await aclose()
        await self.store.close()
