"""The daemon's process life: start the sweeps, the sender loop and the watchdog, tell systemd
it is ready, watch over them, and stop cleanly.

``run`` is the supervisor: a long-lived task that died (the sender loop, a delivery worker) or a
database that stays down ends the run with one clear line and ``DaemonFailed`` (exit 1, so that
systemd restarts it); a stop request ends it cleanly: no new work, in-flight work finishes
within a grace period, unsent rows wait for the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from watcher.core.errors import DaemonFailed, state_error
from watcher.delivery.courier import DB_RETRY_MAX
from watcher.service import pruning

if TYPE_CHECKING:
    from watcher.alerting.ruleset import Job
    from watcher.app import Daemon

log = structlog.get_logger(__name__)

# How long a clean stop waits for in-flight polls and sends before it abandons them. Abandoning
# is safe: nothing is committed until a step is complete, and unsent rows wait for the next start.
STOP_GRACE_SECONDS = 5.0
SENDER_IDLE_SECONDS = 0.5
# How often the supervisor looks at the tasks and the database's health.
SUPERVISE_SECONDS = 1.0


def describe_jobs(jobs: Sequence[Job]) -> list[str]:
    return [f"{j.source}/{j.interval:g}s x{len(j.targets)}" for j in jobs]


async def run(daemon: Daemon, stop: asyncio.Event) -> None:
    """Run until ``stop`` is set, then stop cleanly: no new work, in-flight work finishes."""
    scheduler = daemon.scheduler
    if daemon.http is not None:
        await daemon.http.start()  # first: a port in use stops the start with one line
    sender_task = asyncio.create_task(deliver_forever(daemon), name="sender")
    watchdog = asyncio.create_task(daemon.notifier.watchdog_forever(), name="watchdog")
    jobs = daemon.ruleset.jobs()
    scheduler.start(jobs)
    pruner = asyncio.create_task(pruning.prune_forever(daemon), name="pruner")
    log.info(
        "watcher started",
        rules=len(daemon.ruleset.rules),
        jobs=describe_jobs(jobs),
        rpc=getattr(daemon.rpc, "public_url", "custom"),
        state=str(daemon.settings.state_path),
        pending_deliveries=daemon.store.pending_count(),
    )
    daemon.notifier.ready(f"{len(daemon.ruleset.rules)} rules, {len(jobs)} sweeps")
    fatal: str | None = None
    try:
        stopped = asyncio.create_task(stop.wait(), name="stop signal")
        # The supervisor: a long-lived task that died, or a database that stays down,
        # ends the run with one clear line and a non-zero exit (systemd restarts it).
        while fatal is None and not stopped.done():
            await asyncio.wait({stopped, sender_task}, timeout=SUPERVISE_SECONDS)
            fatal = None if stopped.done() else fatal_reason(daemon, sender_task, pruner)
        stopped.cancel()
        if fatal is not None:
            log.error("watcher cannot go on; exiting for its supervisor", reason=fatal)
    finally:
        log.info("watcher stopping")
        daemon.notifier.stopping()
        watchdog.cancel()
        daemon.stopping.set()
        pruner.cancel()  # between two batches: each is a whole transaction
        await scheduler.stop(grace=STOP_GRACE_SECONDS)
        await daemon.sender.drain(timeout=STOP_GRACE_SECONDS)
        sender_task.cancel()
        await asyncio.wait({sender_task, pruner})  # their failure, if any, was reported above
        if daemon.http is not None:
            await daemon.http.close()
        if daemon.heartbeat is not None:
            await daemon.heartbeat.close()
        await daemon.close()
        log.info("watcher stopped")
    if fatal is not None:
        raise DaemonFailed(fatal)


def fatal_reason(
    daemon: Daemon, sender_task: asyncio.Task[None], pruner: asyncio.Task[None] | None = None
) -> str | None:
    """Why the daemon cannot go on, or None: a dead task, or the database failing."""
    if sender_task.done():
        error = None if sender_task.cancelled() else sender_task.exception()
        return f"the sender stopped: {error!r}" if error else "the sender stopped"
    if pruner is not None and pruner.done():
        error = None if pruner.cancelled() else pruner.exception()
        return f"the history pruning stopped: {error!r}" if error else "the pruning stopped"
    if daemon.sender.failure is not None:
        return f"a delivery worker failed: {daemon.sender.failure!r}"
    return daemon.state_health.fatal(daemon.clock())


async def deliver_forever(daemon: Daemon) -> None:
    """Start a worker for each URL with due deliveries (``Sender.dispatch``), whenever
    there is new work, a worker finished, or every half second. A failed claim (database
    locked, disk full) is retried with backoff: the sender never stops on its own."""
    failures = 0
    while not daemon.stopping.is_set():
        try:
            daemon.sender.dispatch()
            failures = 0
        except sqlite3.Error as exc:
            failures += 1
            daemon.state_health.failed(state_error(exc, "claim deliveries"), daemon.clock())
            # Not retried at once, whatever wakes the sender meanwhile.
            await asyncio.sleep(min(SENDER_IDLE_SECONDS * 2**failures, DB_RETRY_MAX))
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(daemon.outbox_has_work.wait(), SENDER_IDLE_SECONDS)
        daemon.outbox_has_work.clear()
