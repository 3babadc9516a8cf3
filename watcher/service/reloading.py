"""SIGHUP (`systemctl reload`): read the settings and rules again and swap them in at once.

When a file is broken, every ``FILE:LINE`` problem is logged and the old rules keep running;
the daemon then tells ``/metrics``, ``/healthz`` and the store (``watcher status --health``) until
a reload succeeds (``watcher.app.Daemon.reload``).
State (cursors, snapshots, episodes, silences, the outbox) lives in the database and is
untouched either way. Settings that hold the daemon's connections and database are kept until
a restart, and the log says which.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

import structlog

from watcher.config.settings import Settings
from watcher.core.allocator import hand_back_freed
from watcher.core.errors import ConfigError, StateError
from watcher.delivery.channels import Channels
from watcher.delivery.outbox_sender import Sender
from watcher.kinds.ruleset import RuleSet
from watcher.service.configuration import Configuration, Configured
from watcher.service.metrics import ObservedValues
from watcher.service.scheduler import Scheduler
from watcher.service.sdnotify import SystemdNotifier
from watcher.service.supervisor import describe_jobs
from watcher.service.watch_starts import WatchStarts

log = structlog.get_logger(__name__)

# Settings a running daemon keeps until it restarts: its connections and its database.
RESTART_SETTINGS: Final = (
    "rpc_url",
    "rpc_urls",
    "quorum",
    "commitment",
    "state_path",
    "state_url",
    "instance",
    "lease_ttl",
    "rpc",
    "log_level",
    "log_format",
)


class Reloader:
    """Swaps in what a reload changes: the channels (``sender``), the configuration in force
    (one new snapshot in ``config``, which every part reads), the sweeps (``scheduler``).
    ``endpoint``: the RPC URL the built-in alerts name (None: the settings')."""

    def __init__(
        self,
        *,
        config: Configured,
        endpoint: str | None,
        sender: Sender,
        scheduler: Scheduler,
        notifier: SystemdNotifier,
        watch_starts: WatchStarts,
        observed: ObservedValues | None = None,
    ) -> None:
        self.config, self.endpoint = config, endpoint
        self.watch_starts = watch_starts
        self.sender, self.scheduler, self.notifier = sender, scheduler, notifier
        self.observed = observed

    def put_in_force(self, configuration: Configuration) -> None:
        """``configuration`` in force: the parts read it from ``config``; the sender is given its
        channels and presentation (its digests name keys as the alerts do)."""
        settings = configuration.settings
        self.sender.use(
            Channels.of(settings.channels, settings.fallback_channels, configuration.presentation)
        )
        self.config.swap(configuration)

    async def reload(self, load: Callable[[], tuple[Settings, RuleSet]]) -> bool:
        """Whether the new settings and rules are in force."""
        self.notifier.reloading()
        try:
            configuration = await asyncio.to_thread(_loaded, load, self.endpoint)
        except ConfigError as exc:
            for problem in exc.problems:
                log.error("reload refused, the previous rules keep running", problem=str(problem))
            self.notifier.ready("reload refused: see the log")
            return False
        except Exception as exc:  # unreadable in a way the checks did not foresee: keep running
            log.error("reload failed, the previous rules keep running", error=repr(exc))
            self.notifier.ready("reload failed: see the log")
            return False
        settings, ruleset = configuration.settings, configuration.ruleset
        old = self.config.current.settings
        later = [key for key in RESTART_SETTINGS if getattr(settings, key) != getattr(old, key)]
        if later:
            log.warning("reloaded; these settings apply after a restart", settings=later)
        try:
            # Before the new rules run: the targets they add are watched from now on.
            await self.watch_starts.began(configuration.jobs, previous=self.config.current.jobs)
        except StateError as exc:
            log.error("reload refused, the previous rules keep running", error=str(exc))
            self.notifier.ready("reload refused: see the log")
            return False
        self.put_in_force(configuration)
        jobs = configuration.jobs
        self.scheduler.replace(jobs)
        if self.observed is not None:
            # /metrics stops showing what no rule watches any more (in a thread: a million
            # targets take a while).
            await asyncio.to_thread(self.observed.retain, ruleset.rules_for)
        hand_back_freed()  # the old rules' lists, dropped, and what reading the new ones made
        log.info("reloaded", rules=len(ruleset.rules), jobs=describe_jobs(jobs))
        self.notifier.ready(f"{len(ruleset.rules)} rules, {len(jobs)} sweeps")
        return True


def _loaded(load: Callable[[], tuple[Settings, RuleSet]], endpoint: str | None) -> Configuration:
    """``load``, and the configuration made of it (the rule set's jobs among it), in the
    loading thread: at a million targets the jobs take seconds, and on the event loop they held
    up the lease renewals long enough for the other instances to count this one dead."""
    settings, ruleset = load()
    return Configuration.of(settings, ruleset, endpoint)
