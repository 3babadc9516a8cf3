"""The daemon's process life: start the sweeps, the sender loop and the watchdog, tell systemd
it is ready, watch over them, and stop cleanly.

``Runtime.run`` is the supervisor: a long-lived task that died (the sender loop, a delivery
worker) or a database that stays down ends the run with one clear line and ``DaemonFailed``
(exit 1, so that systemd restarts it); a stop request ends it cleanly: no new work, in-flight
work finishes within a grace period, unsent rows wait for the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import structlog

from watcher.alerting.builtin import StateHealth
from watcher.core.clock import Clock
from watcher.core.errors import DaemonFailed, RetryPauses, StateError
from watcher.delivery.outbox_sender import Sender
from watcher.delivery.url_worker import DB_RETRY_MAX
from watcher.kinds.ruleset import Job, RuleSet
from watcher.service.heartbeat import Heartbeat
from watcher.service.http import HttpEndpoint
from watcher.service.leasing import LeaseKeeper
from watcher.service.loop_lag import LoopLagProbe
from watcher.service.pruning import Pruner
from watcher.service.scheduler import Scheduler
from watcher.service.sdnotify import SystemdNotifier
from watcher.service.watch_starts import WatchStarts
from watcher.state.interface import Store

log = structlog.get_logger(__name__)

# How long a clean stop waits for in-flight polls and sends before it abandons them. Abandoning
# is safe: nothing is committed until a step is complete, and unsent rows wait for the next start.
STOP_GRACE_SECONDS = 5.0
# The sender's idle wait (``idle_seconds``): until its next due delivery, but never longer than
# this, for what no wake announces (rows another instance committed while this one was not
# listening, a claim another instance let expire, a clock step).
SENDER_LONGEST_IDLE_SECONDS = 10.0
# ...and this long when something is due already that the last claim did not take (another
# instance holds its URL, or more than one claim's batch): claimed again soon, but no busy loop.
SENDER_IDLE_SECONDS = 0.5
# How often the supervisor looks at the tasks and the database's health.
SUPERVISE_SECONDS = 1.0


def idle_seconds(next_due: float | None, now: float) -> float:
    """How long the idle sender waits for a wake (``more_due``) before it claims again, at
    ``now``: until ``next_due`` (``Sender.next_due``), at most ``SENDER_LONGEST_IDLE_SECONDS``;
    ``SENDER_IDLE_SECONDS`` when that moment has passed already."""
    if next_due is None:
        return SENDER_LONGEST_IDLE_SECONDS
    if next_due <= now:
        return SENDER_IDLE_SECONDS
    return min(next_due - now, SENDER_LONGEST_IDLE_SECONDS)


async def wait_or_time_out(wake: asyncio.Event, seconds: float) -> None:
    """Returns once ``wake`` is set or after ``seconds``, whichever comes first."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), seconds)


# How the sender loop waits for a wake or its time: ``wait_or_time_out``, or on another clock.
IdleWait = Callable[[asyncio.Event, float], Awaitable[None]]


async def deliver_until_stopped(
    sender: Sender,
    stopping: asyncio.Event,
    state_health: StateHealth,
    clock: Clock,
    wait: IdleWait = wait_or_time_out,
) -> None:
    """Start a worker for each URL with due deliveries (``Sender.dispatch``) until ``stopping``
    is set: at once when woken (``more_due``: new rows committed here or announced by another
    instance, a worker finished), else when the next delivery falls due (``idle_seconds``). A
    failed claim (database locked, disk full) is retried with backoff: the sender never stops
    on its own."""
    # Not retried at once, whatever wakes the sender meanwhile; made at the first failure of a
    # stretch, dropped once a claim works.
    pauses: RetryPauses | None = None
    while not stopping.is_set():
        try:
            await sender.dispatch()
            next_due = await sender.next_due()
            pauses = None
        except StateError as exc:
            state_health.failed(exc.during("claim deliveries"), clock())
            pauses = pauses or RetryPauses(SENDER_IDLE_SECONDS * 2, DB_RETRY_MAX)
            await pauses.sleep()
            continue
        await wait(sender.more_due, idle_seconds(next_due, clock()))
        sender.more_due.clear()


def describe_jobs(jobs: Sequence[Job]) -> list[str]:
    return [f"{j.source}/{j.interval:g}s x{len(j.targets)}" for j in jobs]


@dataclass(frozen=True)
class HttpParts:
    """/metrics and /healthz (``endpoint``), with the probe of the event loop's lag whose
    histogram (watcher_event_loop_lag_seconds) /metrics shows: one is there with the other."""

    endpoint: HttpEndpoint
    loop_lag: LoopLagProbe


@dataclass(frozen=True)
class Parts:
    """The parts whose tasks the runtime starts, watches over and stops."""

    scheduler: Scheduler  # the sweeps
    sender: Sender  # the sender loop and its URLs' workers
    pruner: Pruner  # the retention passes
    leases: LeaseKeeper  # the shards held (several instances on one database)
    notifier: SystemdNotifier  # READY, STOPPING and the watchdog
    http: HttpParts | None  # /metrics and /healthz
    heartbeat: Heartbeat | None
    watch_starts: WatchStarts  # when each history-reading target's watch began


class Runtime:
    """The daemon's tasks and their life: the scheduler's sweeps, the sender loop, the pruning,
    the watchdog, the HTTP endpoint and the heartbeat (``parts``). The sender's ``more_due``
    wakes the sender loop; ``stopping`` is set once the run ends (no new round, send or pruning
    pass); ``close`` releases the daemon's connections and database last; ``startup_line``: what
    the start-up line names (masked), the RPC endpoints and where the state is kept;
    ``started`` is told once the store is open (the start's load, in the store)."""

    def __init__(
        self,
        *,
        parts: Parts,
        store: Store,
        state_health: StateHealth,
        stopping: asyncio.Event,
        close: Callable[[], Awaitable[None]],
        clock: Clock,
        startup_line: Mapping[str, str],
        started: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.parts, self.started = parts, started
        self.store, self.state_health = store, state_health
        self.stopping, self.close, self.clock = stopping, close, clock
        self.startup_line = startup_line

    async def run(self, stop: asyncio.Event, ruleset: RuleSet) -> None:
        """Run ``ruleset`` until ``stop`` is set, then stop cleanly: no new work, in-flight
        work finishes."""
        if self.parts.http is not None:
            await (
                self.parts.http.endpoint.start()
            )  # first: a port in use stops the start with one line
        try:
            await self.store.start()
        except StateError as exc:
            await self.close()
            raise DaemonFailed(str(exc.during("open the state database"))) from exc
        # /metrics' own tasks: the loop's lag, and the store's figures read while scraped.
        probes = (
            []
            if self.parts.http is None
            else [
                asyncio.create_task(self.parts.http.loop_lag.run(), name="loop lag"),
                asyncio.create_task(self.parts.http.endpoint.keep_reading(), name="store reading"),
            ]
        )
        # Shards before the first sweeps (several instances on one database; else nothing).
        await self.parts.leases.round()
        if self.started is not None:
            await self.started()
        lease_task = asyncio.create_task(self.parts.leases.keep_forever(), name="leases")
        # Deliveries other instances queue wake this sender at once (else its idle wait's end).
        listener = asyncio.create_task(
            self.store.watch_outbox(self.parts.sender.more_due.set), name="outbox notifications"
        )
        sender_task = asyncio.create_task(self.deliver_forever(), name="sender")
        watchdog = asyncio.create_task(self.parts.notifier.watchdog_forever(), name="watchdog")
        jobs = ruleset.jobs()
        try:
            # Before the first sweep: a target's first poll, however late, knows when its watch
            # began (a restart keeps the moment already kept).
            await self.parts.watch_starts.began(jobs)
        except StateError as exc:
            raise DaemonFailed(str(exc.during("record when the watches began"))) from exc
        self.parts.scheduler.start(jobs)
        pruner = asyncio.create_task(self.parts.pruner.prune_forever(), name="pruner")
        log.info(
            "watcher started",
            rules=len(ruleset.rules),
            jobs=describe_jobs(jobs),
            **self.startup_line,
            pending_deliveries=await self.store.pending_count(),
        )
        self.parts.notifier.ready(f"{len(ruleset.rules)} rules, {len(jobs)} sweeps")
        fatal: str | None = None
        try:
            stopped = asyncio.create_task(stop.wait(), name="stop signal")
            # The supervisor: a long-lived task that died, or a database that stays down,
            # ends the run with one clear line and a non-zero exit (systemd restarts it).
            while fatal is None and not stopped.done():
                await asyncio.wait({stopped, sender_task}, timeout=SUPERVISE_SECONDS)
                fatal = (
                    None
                    if stopped.done()
                    else self.fatal_reason(sender_task, pruner, lease_task, probes)
                )
            stopped.cancel()
            if fatal is not None:
                log.error("watcher cannot go on; exiting for its supervisor", reason=fatal)
        finally:
            log.info("watcher stopping")
            self.parts.notifier.stopping()
            watchdog.cancel()
            self.stopping.set()
            pruner.cancel()  # between two batches: each is a whole transaction
            await self.parts.scheduler.stop(grace=STOP_GRACE_SECONDS)
            await self.parts.sender.drain(timeout=STOP_GRACE_SECONDS)
            sender_task.cancel()
            lease_task.cancel()  # the store hands the shards back as it closes
            listener.cancel()
            for task in probes:
                task.cancel()
            # Their failure, if any, was reported above.
            await asyncio.wait({sender_task, pruner, lease_task, listener, *probes})
            if self.parts.http is not None:
                await self.parts.http.endpoint.close()
            if self.parts.heartbeat is not None:
                await self.parts.heartbeat.close()
            await self.close()
            log.info("watcher stopped")
        if fatal is not None:
            raise DaemonFailed(fatal)

    def fatal_reason(
        self,
        sender_task: asyncio.Task[None],
        pruner: asyncio.Task[None] | None = None,
        lease_task: asyncio.Task[None] | None = None,
        probes: Sequence[asyncio.Task[None]] = (),
    ) -> str | None:
        """Why the daemon cannot go on, or None: a dead task, or the database failing. A dead
        probe of /metrics (``probes``) would leave it showing old figures as if current."""
        if sender_task.done():
            error = None if sender_task.cancelled() else sender_task.exception()
            return f"the sender stopped: {error!r}" if error else "the sender stopped"
        if pruner is not None and pruner.done():
            error = None if pruner.cancelled() else pruner.exception()
            return f"the history pruning stopped: {error!r}" if error else "the pruning stopped"
        if lease_task is not None and lease_task.done() and not lease_task.cancelled():
            error = lease_task.exception()
            if error is not None:
                return f"the lease loop stopped: {error!r}"
        for probe in probes:
            if probe.done() and not probe.cancelled() and probe.exception() is not None:
                return f"{probe.get_name()} stopped: {probe.exception()!r}"
        if self.parts.sender.failure is not None:
            return f"a delivery worker failed: {self.parts.sender.failure!r}"
        return self.state_health.fatal(self.clock())

    async def deliver_forever(self) -> None:
        """The sender loop (``deliver_until_stopped``) until the run stops."""
        await deliver_until_stopped(self.parts.sender, self.stopping, self.state_health, self.clock)
