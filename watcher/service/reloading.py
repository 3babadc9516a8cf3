"""SIGHUP (`systemctl reload`): read the settings and rules again and swap them in at once.

When a file is broken, every ``FILE:LINE`` problem is logged and the old rules keep running.
State (cursors, snapshots, episodes, silences, the outbox) lives in the database and is
untouched either way. Settings that hold the daemon's connections and database are kept until
a restart, and the log says which.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import structlog

from watcher.alerting.ruleset import RuleSet
from watcher.config.settings import Settings
from watcher.core.errors import ConfigError
from watcher.service.supervisor import describe_jobs

if TYPE_CHECKING:
    from watcher.app import Daemon

log = structlog.get_logger(__name__)

# Settings a running daemon keeps until it restarts: its connections and its database.
RESTART_SETTINGS: Final = (
    "rpc_url", "rpc_urls", "quorum", "commitment", "state_path", "rpc", "log_level", "log_format"
)


async def reload(daemon: Daemon, load: Callable[[], tuple[Settings, RuleSet]]) -> bool:
    """Whether the new settings and rules are in force."""
    daemon.notifier.reloading()
    try:
        settings, ruleset = await asyncio.to_thread(load)
    except ConfigError as exc:
        for problem in exc.problems:
            log.error("reload refused, the previous rules keep running", problem=str(problem))
        daemon.notifier.ready("reload refused: see the log")
        return False
    except Exception as exc:  # unreadable in a way the checks did not foresee: keep running
        log.error("reload failed, the previous rules keep running", error=repr(exc))
        daemon.notifier.ready("reload failed: see the log")
        return False
    old = daemon.settings
    later = [key for key in RESTART_SETTINGS if getattr(settings, key) != getattr(old, key)]
    if later:
        log.warning("reloaded; these settings apply after a restart", settings=later)
    daemon.sender.configure_channels(settings.channels, settings.fallback_channels)
    daemon.use(settings, ruleset)
    jobs = ruleset.jobs()
    daemon.scheduler.replace(jobs)
    log.info("reloaded", rules=len(ruleset.rules), jobs=describe_jobs(jobs))
    daemon.notifier.ready(f"{len(ruleset.rules)} rules, {len(jobs)} sweeps")
    return True
