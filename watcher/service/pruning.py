"""The daemon's retention pass (``watcher.state.retention``): at start-up, then every hour, one
bounded transaction at a time on the event loop, the polls and sends running between them."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from typing import TYPE_CHECKING

import structlog

from watcher.alerting import builtin
from watcher.alerting.ruleset import RuleSet
from watcher.core.durations import format_duration
from watcher.core.errors import state_error
from watcher.state.retention import BATCH_ROWS, Pruned, WatchedTarget

if TYPE_CHECKING:
    from watcher.app import Daemon

log = structlog.get_logger(__name__)

PRUNE_EVERY_SECONDS = 3600.0


def watched_by(ruleset: RuleSet) -> WatchedTarget:
    """Whether a (source, target) is named by a rule of ``ruleset``; the daemon's own state
    (the built-in rpc_unhealthy episode) always is."""
    named = {(job.source, target) for job in ruleset.jobs() for target in job.targets}
    return lambda source, target: source == builtin.SOURCE or (source, target) in named


async def prune_once(daemon: Daemon, limit: int = BATCH_ROWS) -> Pruned:
    """One pass over the whole history, yielding to the event loop after each batch."""
    total = Pruned()
    watched = watched_by(daemon.ruleset)
    batches = daemon.store.prune_batches(watched, daemon.clock(), daemon.settings.retention, limit)
    for done in batches:
        total.add(done)
        await asyncio.sleep(0)
    return total


async def prune_forever(daemon: Daemon) -> None:
    """A pass at start-up and every hour; a failing pass (the database locked or full) is one
    warning, and the next pass tries again."""
    while not daemon.stopping.is_set():
        started = time.perf_counter()
        try:
            done = await prune_once(daemon)
        except sqlite3.Error as exc:
            log.warning("history pruning failed", error=str(state_error(exc, "prune history")))
        else:
            log.info(
                "history pruned",
                retention=format_duration(daemon.settings.retention),
                alerts=done.alerts,
                deliveries=done.deliveries,
                targets=done.targets,
                unwatched_targets=done.unwatched,
                group_sends=done.group_sends,
                silences=done.silences,
                seconds=round(time.perf_counter() - started, 3),
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(daemon.stopping.wait(), PRUNE_EVERY_SECONDS)
