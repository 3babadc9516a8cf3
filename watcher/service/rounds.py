"""One scheduled round (a sweep) of a source over its targets, and what it tells afterwards.

The targets are polled a bounded number at once (``watcher.service.sweeps``), each through
``Daemon.poll_target``; the states that quiet polls changed are written in one go at the end;
then the round's health (the built-in rpc_unhealthy), its row in ``source_rounds``, its log line
and the heartbeat. A database error ends only the work it hit (one poll, one of these writes):
its transaction rolled back, the next round redoes it. Any other error a poll raises is that
target's failure (``watcher.service.poll_faults``): the sweep goes on with the others.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import structlog

from watcher.alerting import builtin
from watcher.alerting.health import RoundVerdict
from watcher.alerting.ruleset import Job
from watcher.core.errors import state_error
from watcher.core.tally import tallying
from watcher.kinds import SOURCES
from watcher.kinds.base import Source
from watcher.service.sweeps import in_chunks, run_bounded, sweep_width
from watcher.state.sources import SourceRound, record_round

if TYPE_CHECKING:
    from watcher.app import Daemon

log = structlog.get_logger("watcher.app")

PREFETCH_CHUNK = 500  # targets whose states one query reads (SQLite takes up to 32,766 values)


async def sweep(daemon: Daemon, job: Job) -> None:
    """One scheduled round of a source over its targets, a bounded number at once
    (``watcher.service.sweeps``); the RPC client paces and batches their calls."""
    if daemon.stopping.is_set():
        return
    source = SOURCES[job.source]
    started = daemon.clock()
    width = sweep_width(daemon.settings.rpc.max_concurrency, daemon.settings.rpc.batch_size)
    width = min(width, max(1, len(job.targets)))  # no idle workers for a one-target sweep
    with tallying() as tally:
        # The states of each chunk of targets are read in one query as the sweep reaches it.
        targets = in_chunks(job.targets, PREFETCH_CHUNK, lambda part: _prefetch(daemon, job, part))
        results = await run_bounded(
            targets, lambda target: _poll(daemon, source, target, job.interval), width
        )
    with database_work(daemon, "save the sweep's states"):
        daemon.store.flush_states()
    now = daemon.clock()
    verdict = daemon.health.round_done(job.source, now, interval=job.interval)
    if verdict is not None:
        with database_work(daemon, "rpc health"):
            _check_rpc_health(daemon, verdict, now)
    failed = sum(result is False for result in results)
    done = SourceRound(job.source, now, len(results), failed, now - started,
                       now if any(results) else None)  # fmt: skip
    with database_work(daemon, "record the round"):
        record_round(daemon.store.db, done)
    problem = {"error": daemon.last_errors.get(job.source)} if failed else {}
    log.info("round", source=job.source, targets=len(results), failed=failed,
             disagreed=tally.disagreements,  # answered, not evidence: not failed
             calls=tally.calls, alerts=tally.alerts, duration=round(now - started, 3),
             **problem)  # fmt: skip
    if daemon.heartbeat is not None:
        daemon.heartbeat.round_done(all(results) and daemon.state_health.healthy)


def _prefetch(daemon: Daemon, job: Job, chunk: Sequence[str]) -> None:
    # A failed read costs only speed: each poll then reads its own state (and meets the error).
    with database_work(daemon, f"read {job.source} states"):
        try:
            daemon.store.prefetch_states(job.source, chunk)
        except sqlite3.Error:
            raise  # database_work's
        except Exception:
            log.exception("reading a chunk of states failed; each poll reads its own",
                          source=job.source)  # fmt: skip


async def _poll(daemon: Daemon, source: Source, target: str, interval: float) -> bool | None:
    """Whether the poll succeeded; None when the database failed it."""
    with database_work(daemon, f"poll {source.name}"):
        try:
            ok = await daemon.poll_target(source, target, interval)
        except sqlite3.Error:
            raise  # database_work's
        except Exception as exc:  # a bug or an unreadable state: this target's failure only
            detail = daemon.poll_faults.failed(source.name, target, exc)
            daemon.last_errors[source.name] = detail
            daemon.metrics.poll_raised(source.name)
            return False
        if ok:
            daemon.poll_faults.succeeded(source.name, target)
        return ok
    return None


@contextlib.contextmanager
def database_work(daemon: Daemon, operation: str) -> Iterator[None]:
    """A database error ends only this work (one poll): its transaction rolled back, so
    the cursor did not move without its outbox rows, and the next round redoes the step."""
    commits = daemon.store.commits
    try:
        yield
    except sqlite3.Error as exc:
        daemon.state_health.failed(state_error(exc, operation), daemon.clock())
    else:
        if daemon.store.commits != commits:  # only a write shows the database works again
            daemon.state_health.succeeded(daemon.clock())


def _check_rpc_health(daemon: Daemon, verdict: RoundVerdict, now: float) -> None:
    """The built-in rpc_unhealthy: its episode is stored like a target's state."""
    state = daemon.store.load_state(builtin.SOURCE, builtin.RPC_TARGET)
    outcome = daemon.builtins.rpc_step(state, verdict, now)
    if outcome is not None:
        rules = [daemon.builtins.rpc_unhealthy]
        daemon.commit(builtin.SOURCE, builtin.RPC_TARGET, outcome, rules, now)
