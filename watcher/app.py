"""The composition root: one daemon, one event loop. It builds the parts and wires them; the
work is theirs.

The path of one observation of one target (observe -> judge -> agree -> step -> commit ->
notify) is ``watcher.service.target_pipeline``: read it first. The scheduler runs one sweep per
(source, interval) over that source's targets (``watcher.service.rounds.Sweeper``, the
pipeline's ``poll`` for each); the runtime (``watcher.service.supervisor.Runtime``) runs the
tasks and their life, the sender among them so that a slow channel never delays polling; the
reloader (``watcher.service.reloading.Reloader``) puts what SIGHUP read in force as one new
snapshot of the configuration (``watcher.service.configuration``), which the parts read.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from functools import partial

from watcher.alerting.builtin import RoundHealth, StateHealth
from watcher.alerting.formatting import Presentation
from watcher.budget.admission import Admission
from watcher.budget.cadences import CadenceBook
from watcher.budget.cadences import at_scrape as cadences_at_scrape
from watcher.config.settings import Settings
from watcher.core.allocator import hand_back_freed
from watcher.core.clock import Clock, system_clock
from watcher.core.errors import StateError
from watcher.core.redact import split_rpc_url
from watcher.delivery.channels import Channels
from watcher.delivery.outbox_sender import Sender, SendSettings
from watcher.kinds.base import LedgerReader
from watcher.kinds.ruleset import Job, RuleSet
from watcher.ledger.quorum import Quorum
from watcher.ledger.rpc import EndpointSpec, RpcClient, RpcSettings, RpcStats
from watcher.service import sweeps
from watcher.service.agreement import Observer
from watcher.service.committing import Committer
from watcher.service.configuration import Configuration, Configured
from watcher.service.heartbeat import Heartbeat
from watcher.service.http import HttpEndpoint
from watcher.service.leasing import LeaseKeeper
from watcher.service.loop_lag import LoopLagProbe
from watcher.service.metrics import HealthVerdict, Metrics, health_verdict
from watcher.service.pruning import Pruner
from watcher.service.reloading import Reloader
from watcher.service.rounds import Fanout, RoundReports, RpcHealth, Sweeper
from watcher.service.scheduler import Scheduler
from watcher.service.scrape_time import ScrapeReads
from watcher.service.sdnotify import SystemdNotifier
from watcher.service.supervisor import HttpParts, Parts, Runtime
from watcher.service.target_pipeline import LastErrors, PollFaults, TargetPipeline
from watcher.service.watch_starts import WatchStarts
from watcher.state.interface import LeaseRound, Store
from watcher.state.records import config_round
from watcher.state.shards import SHARDS
from watcher.state.store import AsyncSqliteStore

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
        # Each adaptive target's cadence: what a sweep polls (watcher.budget.cadences).
        self.cadences = CadenceBook()
        # Each part built after what it uses: the RPC endpoints' name (as the client will show
        # it), the configuration whose built-in alerts name it, the metrics, the client that
        # tells them of each request. A caller's own reader (``ledger``, which it owns and
        # closes: a rule test's) has no name and no client of ours.
        self.endpoint = public_endpoint(settings) if ledger is None else None
        # The settings and rules in force: one snapshot, swapped whole by a reload (``use``).
        self.config = Configured(Configuration.of(settings, ruleset, self.endpoint))
        rpc_stats = RpcStats()  # the client's counters, which the metrics read
        # What /metrics shows is read when scraped: the client's counters (when it is ours),
        # the cadences, a rule's kind in the snapshot in force.
        reads = ScrapeReads(
            rpc_stats if ledger is None else None,
            read_state=self.store.summary,
            read_awaiting=self.store.awaiting_first_poll,
            cadences=partial(cadences_at_scrape, self.config, self.cadences),
            kind_of=self.config.kind_of,
            read_silences=self.store.active_silences,
        )
        self.metrics = Metrics(
            clock,
            reads,
            heartbeat=settings.heartbeat is not None,
            shared_state=settings.state_url is not None,
        )
        self.client: RpcClient | None = None
        if ledger is None:
            self.client = ledger = rpc_client(settings, self.metrics.rpc_request, rpc_stats)
        self.rpc: LedgerReader = ledger  # what the parts read through, the narrow reader
        self.sender = delivery_sender(
            settings,
            self.store,
            clock,
            self.state_health,
            self.metrics,
            self.outbox_has_work,
            # Its digests name keys as the alerts do: the presentation in force.
            presentation=self.config.current.presentation,
        )
        self.health = RoundHealth()
        self.quorum = Quorum(settings.quorum)  # watcher.ledger.quorum
        self.last_errors = LastErrors()  # each source's last failed poll's error
        self.poll_faults = PollFaults()  # targets whose polls raise
        # One observation of one target, from its answer to its outbox rows.
        self.committer = Committer(
            store=self.store,
            config=self.config,
            sender=self.sender,
        )
        self.pipeline = TargetPipeline(
            store=self.store,
            observer=Observer(
                ledger=self.rpc,
                quorum=self.quorum,
                endpoints=None if self.client is None else self.client.readers,
                config=self.config,
                clock=clock,
            ),
            cadences=self.cadences,
            committer=self.committer,
            config=self.config,
            health=self.health,
            last_errors=self.last_errors,
            metrics=self.metrics,
        )
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
            None
            if http is None
            else HttpParts(
                HttpEndpoint(http.host, http.port, self.metrics, self.healthz),
                LoopLagProbe(http.loop_lag_every, self.metrics.loop_lagged),
            )
        )
        # The parts, each given what it uses. What a reload changes they read from the snapshot
        # in force (``config.current``) when they need it, so a reload reaches them without
        # their knowing it.
        self.sweeper = Sweeper(
            polls=self.pipeline,
            store=self.store,
            admission=Admission(
                config=self.config, cadences=self.cadences, shards=self.store, metrics=self.metrics
            ),
            reports=RoundReports(
                health=self.health,
                state_health=self.state_health,
                metrics=self.metrics,
                poll_faults=self.poll_faults,
                last_errors=self.last_errors,
                heartbeat=self.heartbeat,
            ),
            rpc_health=RpcHealth(
                config=self.config, store=self.store, commit=self.committer.commit
            ),
            fanout=Fanout(
                sweeps.sweep_width(settings.rpc.max_concurrency, settings.rpc.batch_size),
                # One endpoint's answer per poll: under quorum, polls ask several.
                None
                if self.client is None or self.quorum.needed > 1
                else sweeps.FirstCalls(self.client, self.store),
                sweeps.sweep_width(
                    settings.rpc.max_concurrency, settings.rpc.batch_size, quiet=True
                ),
            ),
            stopping=self.stopping,
            clock=clock,
        )
        client = self.client
        self.scheduler = Scheduler(
            self.sweeper.sweep,
            catch_up=self.sweeper.catch_up,
            clock=clock,
            stretch=(lambda job: None) if client is None else partial(sweeps.stretch_for, client),
        )
        self.pruner = Pruner(self.store, self.config, self.stopping, clock)
        self.leases = LeaseKeeper(
            self.store,
            self.state_health,
            self.stopping,
            clock,
            renew_every=settings.lease_ttl / 3,
            on_round=self.lease_round,
        )
        self.watch_starts = WatchStarts(self.store, clock, self.pipeline)
        self.runtime = Runtime(
            parts=Parts(
                scheduler=self.scheduler,
                sender=self.sender,
                pruner=self.pruner,
                leases=self.leases,
                notifier=self.notifier,
                http=self.http,
                heartbeat=self.heartbeat,
                watch_starts=self.watch_starts,
            ),
            store=self.store,
            state_health=self.state_health,
            stopping=self.stopping,
            close=self.close,
            clock=clock,
            startup_line={
                "rpc": self.endpoint or "custom",
                "state": settings.state_url_masked or str(settings.state_path),
            },
            started=partial(self.record_load, True),
        )
        self.reload_refused = False  # the last reload was refused: /healthz says so
        self.reloader = Reloader(
            config=self.config,
            endpoint=self.endpoint,
            sender=self.sender,
            scheduler=self.scheduler,
            notifier=self.notifier,
            watch_starts=self.watch_starts,
            observed=self.metrics.observed,
        )

    # -- one observation ---------------------------------------------------------------------

    async def sweep(self, job: Job) -> None:
        """One scheduled round of a source over its targets (``watcher.service.rounds``)."""
        await self.sweeper.sweep(job)

    def lease_round(self, done: LeaseRound) -> None:
        """After a lease round: its figures, and this instance's part of the provider's rate
        (``max_rps`` is the key's: each instance spends it by the shards it holds)."""
        self.metrics.lease_round(done)
        if self.client is not None:
            self.client.share_rate(max(done.held, 1) / SHARDS)
        if done.taken or done.released or done.lost:
            self.scheduler.catch_up()  # the shards taken are swept now, not at the next interval

    # -- delivery ----------------------------------------------------------------------------

    def healthz(self) -> HealthVerdict:
        """``/healthz``: polls succeed and the outbox drains (a delivery pending for longer than
        its backoff allows is stuck)."""
        state = self.metrics.state()
        stuck_after = max(OUTBOX_STUCK_SECONDS, 2 * self.settings.delivery.max_backoff)
        outbox = None if state is None else state[1]
        return health_verdict(
            self.health,
            self.state_health,
            outbox,
            self.clock(),
            stuck_after,
            reload_refused=self.reload_refused,
        )

    # -- life cycle --------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then stop cleanly (``watcher.service.supervisor``)."""
        await self.runtime.run(stop, self.ruleset)

    async def reload(self, load: Callable[[], tuple[Settings, RuleSet]]) -> bool:
        """SIGHUP: the settings and rules read again (``watcher.service.reloading``)."""
        ok = await self.reloader.reload(load)
        self.metrics.reloaded(ok)
        self.reload_refused = not ok
        await self.record_load(ok)
        return ok

    async def record_load(self, ok: bool) -> None:
        """The start's load or a reload, put in force (``ok``) or refused, in the store: what
        ``watcher status --health`` reads (a start clears a refusal before it)."""
        try:
            await self.store.record_round(config_round(ok, self.clock()))
        except StateError as exc:
            self.state_health.failed(exc.during("record the reload"), self.clock())

    def use(self, settings: Settings, ruleset: RuleSet) -> None:
        """Puts settings and rules in force: one new snapshot of the configuration, which the
        parts read (``watcher.service.configuration``)."""
        self.reloader.put_in_force(Configuration.of(settings, ruleset, self.endpoint))

    @property
    def settings(self) -> Settings:
        """The settings in force."""
        return self.config.current.settings

    @property
    def ruleset(self) -> RuleSet:
        """The rules in force."""
        return self.config.current.ruleset

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        await self.store.close()


# The factories that turn settings into parts: the one place that knows both the settings and
# every part, so that the parts themselves never import what wires them.
def settle_collector() -> None:
    """The garbage collector set for a long-lived daemon, once its parts are built."""
    # What exists by now lives as long as the process (modules, the parts, Apprise's plugins,
    # the models' validators): kept out of the cyclic collector's full passes, which would walk
    # it again and again, about once a second under a large sweep, each time holding the loop
    # and the GIL (a scrape's thread) 60 to 100 ms. Objects made later are collected as ever.
    gc.collect()
    gc.freeze()
    # A poll makes a few short-lived containers (futures, coroutines, tuples) that reference
    # counting frees; at the default threshold (700) the young collections they set off were 6%
    # of a sweep's CPU. Ten thousand allocations between them costs a few MB at most.
    gc.set_threshold(10_000, 50, 100)
    hand_back_freed()  # what reading the rules made and dropped (a list of a million: MBs)


def open_store(settings: Settings) -> Store:
    """The engine the settings name, built without I/O on PostgreSQL (``Store.start`` connects);
    the SQLite file is opened (created or upgraded) at once."""
    if settings.state_url is not None:
        # Imported only here: psycopg and its pool are a seventh of a start's imports, and
        # most installations run on SQLite.
        from watcher.state.pg_store import PostgresStore

        return PostgresStore(
            settings.state_url.get_secret_value(),
            instance=settings.instance_name,
            lease_ttl=settings.lease_ttl,
        )
    return AsyncSqliteStore.open(settings.state_path)


def public_endpoint(settings: Settings) -> str:
    """The name of the endpoints the built-in alerts and the logs show, known before the client
    is built: ``RpcClient.public_url`` of the client ``rpc_client`` builds (each endpoint's URL
    masked by the ledger's own ``split_rpc_url``, joined as the client joins them)."""
    return ", ".join(split_rpc_url(e.url.get_secret_value()).public_url for e in settings.endpoints)


def rpc_client(
    settings: Settings, on_request: Callable[[str, float], None], stats: RpcStats
) -> RpcClient:
    """The client the settings describe: every endpoint, each with its ``max_rps``;
    ``on_request`` is told each HTTP request's method and seconds; ``stats``: the counters it
    keeps (the metrics read them when scraped)."""
    endpoints = [EndpointSpec(e.url.get_secret_value(), e.max_rps) for e in settings.endpoints]
    rpc = RpcSettings(
        commitment=settings.commitment,
        timeout=settings.rpc.timeout,
        max_attempts=settings.rpc.max_attempts,
        max_concurrency=settings.rpc.max_concurrency,
        max_rps=settings.rpc.max_rps,
        batch_size=settings.rpc.batch_size,
    )
    return RpcClient(endpoints, rpc, stats=stats, on_request=on_request)


def delivery_sender(
    settings: Settings,
    store: Store,
    clock: Clock,
    state_health: StateHealth,
    metrics: Metrics,
    more_due: asyncio.Event,
    presentation: Presentation,
) -> Sender:
    """The sender the settings describe, counting its outcomes in ``metrics``; ``more_due`` is
    set when a worker finishes (its URL may have more due); ``presentation``: how its digests
    show keys (as the alerts name them)."""
    return Sender(
        store,
        Channels.of(settings.channels, settings.fallback_channels, presentation),
        clock=clock,
        settings=SendSettings(delivery=settings.delivery),
        metrics=metrics,
        state_health=state_health,
        more_due=more_due,
    )
