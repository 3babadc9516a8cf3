"""The daemon's retention pass (``watcher.state.retention``): at start-up, then every hour, one
bounded transaction at a time on the event loop, the polls and sends running between them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol

import structlog

from watcher.alerting import builtin
from watcher.config.current import Current
from watcher.config.settings import Settings
from watcher.core.clock import Clock
from watcher.core.durations import format_duration
from watcher.core.errors import StateError
from watcher.kinds.ruleset import RuleSet
from watcher.state.interface import RetentionStore
from watcher.state.retention import BATCH_ROWS, Pruned, WatchedTarget

log = structlog.get_logger(__name__)

PRUNE_EVERY_SECONDS = 3600.0


def watched_by(ruleset: RuleSet) -> WatchedTarget:
    """Whether a (source, target) is named by a rule of ``ruleset``; the daemon's own state
    (the built-in rpc_unhealthy episode) always is."""
    # The rule set's own lookup, not a set of every (source, target): a million addresses
    # would take a tuple and a set slot each (packed addresses: a str each as well).
    return lambda source, target: (
        source == builtin.SOURCE or bool(ruleset.rules_for(source, target))
    )


class InForce(Protocol):
    """What a pass reads of the configuration in force (``watcher.service.configuration``)."""

    @property
    def settings(self) -> Settings: ...  # retention

    @property
    def ruleset(self) -> RuleSet: ...  # what is watched still


class Pruner:
    """Deletes the history past retention. ``config`` gives the rules and the retention in
    force (a reload swaps them); ``stopping`` set: no new pass starts."""

    def __init__(
        self, store: RetentionStore, config: Current[InForce], stopping: asyncio.Event, clock: Clock
    ) -> None:
        self.store, self.config, self.stopping, self.clock = store, config, stopping, clock

    async def prune_once(self, limit: int = BATCH_ROWS) -> Pruned:
        """One pass over the whole history, yielding to the event loop after each batch."""
        total = Pruned()
        config = self.config.current
        ruleset, retention = config.ruleset, config.settings.retention
        batches = self.store.prune_batches(watched_by(ruleset), self.clock(), retention, limit)
        async for done in batches:
            total.add(done)
            await asyncio.sleep(0)
        return total

    async def prune_forever(self) -> None:
        """A pass at start-up and every hour; a failing pass (the database locked or full) is
        one warning, and the next pass tries again."""
        while not self.stopping.is_set():
            started = time.perf_counter()
            try:
                done = await self.prune_once()
            except StateError as exc:
                log.warning("history pruning failed", error=str(exc.during("prune history")))
            else:
                log.info(
                    "history pruned",
                    retention=format_duration(self.config.current.settings.retention),
                    alerts=done.alerts,
                    deliveries=done.deliveries,
                    targets=done.targets,
                    unwatched_targets=done.unwatched,
                    group_sends=done.group_sends,
                    silences=done.silences,
                    seconds=round(time.perf_counter() - started, 3),
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), PRUNE_EVERY_SECONDS)
