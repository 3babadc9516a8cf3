"""APScheduler 3.11 wiring: one interval job per (source, interval), coroutine jobs on our loop.

APScheduler's defaults are tuned for cron-like work, not for a poller: a one-second misfire
grace silently drops runs whenever the loop was busy, and ``shutdown(wait=True)`` cancels
running coroutines. So: a generous grace, coalescing, one instance per job, and a stop that
pauses first, waits for the sweeps we track ourselves, and only then shuts the scheduler down.
A sweep that outlasted its interval is followed by the next one at once, not at the next tick.
The sweeps started together (the jobs of one interval tick at once) share one getVoteAccounts
answer (``watcher.kinds.sources.vote_accounts``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import structlog
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.base import STATE_RUNNING

from watcher.core.clock import Clock, system_clock
from watcher.kinds import SOURCES
from watcher.kinds.ruleset import Job
from watcher.kinds.sources import vote_accounts

log = structlog.get_logger(__name__)

MISFIRE_GRACE_SECONDS = 30
# Sweeps started within this of the tick's first are of that tick (APScheduler starts the jobs
# due together one after the other, milliseconds apart); well under the shortest interval.
TICK_SECONDS = 0.1

# APScheduler warns "skipped: maximum number of running instances reached" at every interval
# a sweep overruns; we say it once per overrun stretch instead (Scheduler._skipped).
logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)


class Scheduler:
    def __init__(
        self,
        sweep: Callable[[Job], Awaitable[None]],
        *,
        catch_up: Callable[[Job], Awaitable[None]] | None = None,
        clock: Clock = system_clock,
        stretch: Callable[[Job], str | None] = lambda job: None,
    ) -> None:
        self._sweep = sweep
        self._catch_up = catch_up
        self._catching_up: set[str] = set()  # job ids with a catch-up round running
        # Why a job's sweep must take longer than its interval (max_rps), said once per schedule.
        self._stretch = stretch
        self._stretched: set[str] = set()  # jobs whose sweeps are known to outlast the interval
        self._clock = clock
        self._inflight: set[asyncio.Task[object]] = set()
        self._overrunning: set[str] = set()  # jobs in a stretch of overrunning sweeps
        self._skipped_now: dict[str, int] = {}  # job id -> runs skipped during the current one
        self._tick = vote_accounts.Tick()
        self._tick_at = -math.inf  # when it began (monotonic)
        self._scheduler = AsyncIOScheduler(
            timezone="UTC",
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": MISFIRE_GRACE_SECONDS,
            },
        )
        self._scheduler.add_listener(self._skipped, EVENT_JOB_MAX_INSTANCES)

    def _skipped(self, event: JobSubmissionEvent) -> None:
        """A run skipped because the last one still runs: one warning per stretch of them."""
        self._skipped_now[event.job_id] = self._skipped_now.get(event.job_id, 0) + 1
        if event.job_id not in self._overrunning:
            self._overrunning.add(event.job_id)
            if event.job_id in self._stretched:
                return  # expected: the stretch warning said so and by how much
            log.warning(
                "sweep overran its interval; runs are skipped until sweeps are faster",
                job=event.job_id,
            )

    def _finished(self, job_id: str) -> None:
        if not self._skipped_now.pop(job_id, 0) and job_id in self._overrunning:
            self._overrunning.discard(job_id)
            log.info("sweep within its interval again", job=job_id)

    def start(self, jobs: Sequence[Job]) -> None:
        """Must be called from inside the running event loop. Every job runs once right away."""
        self._add(jobs)
        self._scheduler.start()

    def replace(self, jobs: Sequence[Job]) -> None:
        """A reload: jobs that are gone stop, new ones run at once, a job whose targets changed
        keeps its schedule and sweeps its new targets from its next run on."""
        wanted = {_job_id(job): job for job in jobs}
        for scheduled in self._scheduler.get_jobs():
            job = wanted.pop(scheduled.id, None)
            if job is None:
                scheduled.remove()
            elif scheduled.args[0] != job:
                scheduled.modify(args=[job])
                self._warn_stretch(job)
        self._add(list(wanted.values()))

    def _add(self, jobs: Sequence[Job]) -> None:
        first_run = datetime.fromtimestamp(self._clock(), UTC)
        for job in jobs:
            self._warn_stretch(job)
            self._scheduler.add_job(
                self._run,
                "interval",
                seconds=job.interval,
                args=[job],
                id=_job_id(job),
                next_run_time=first_run,
            )

    def _warn_stretch(self, job: Job) -> None:
        message = self._stretch(job)
        self._stretched.discard(_job_id(job))
        if message is not None:
            self._stretched.add(_job_id(job))
            log.warning(message, job=_job_id(job))

    async def _run(self, job: Job) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._inflight.add(task)
        started = self._clock()
        try:
            if _reads_per_tick(job):
                with vote_accounts.sharing(self._tick_now()):
                    await self._sweep(job)
            else:
                await self._sweep(job)
            if self._clock() - started >= job.interval:
                # Overran: the tick it covered was skipped, and waiting for the next one leaves
                # the paid rate unused. Start again at once, from a done-callback added after
                # APScheduler's own, which first counts this run as no longer running.
                task.add_done_callback(lambda _task: self._run_now(_job_id(job)))
        except asyncio.CancelledError:
            # ``stop`` cancelled it after its grace and says so once; re-raised, apscheduler
            # would log each cancelled sweep as an error with its traceback.
            return
        except Exception:
            # A bug in one sweep must not kill the job; the next interval tries again.
            log.exception("sweep failed", source=job.source, interval=job.interval)
        finally:
            self._inflight.discard(task)
            self._finished(_job_id(job))

    def _tick_now(self) -> vote_accounts.Tick:
        """The tick a sweep starting now is of: the last one, or a new one once it is past."""
        now = time.monotonic()
        if now - self._tick_at > TICK_SECONDS:
            self._tick, self._tick_at = vote_accounts.Tick(), now
        return self._tick

    def catch_up(self) -> None:
        """Shards changed hands (several instances): each job sweeps the shards it took since
        its last round now, one catch-up at a time per job, beside its schedule."""
        if self._catch_up is None or self._scheduler.state != STATE_RUNNING:
            return
        for scheduled in self._scheduler.get_jobs():
            job: Job = scheduled.args[0]
            if scheduled.id in self._catching_up:
                continue
            self._catching_up.add(scheduled.id)
            task = asyncio.create_task(self._catch_up_job(scheduled.id, job))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)

    async def _catch_up_job(self, job_id: str, job: Job) -> None:
        assert self._catch_up is not None
        try:
            await self._catch_up(job)
        except asyncio.CancelledError:
            return  # ``stop`` cancelled it after its grace (said there)
        except Exception:
            log.exception("catch-up sweep failed", source=job.source, interval=job.interval)
        finally:
            self._catching_up.discard(job_id)

    def _run_now(self, job_id: str) -> None:
        if self._scheduler.state != STATE_RUNNING:
            return  # stopping (paused) or stopped: no new sweep
        with contextlib.suppress(JobLookupError):  # removed by a reload meanwhile
            self._scheduler.modify_job(
                job_id, next_run_time=datetime.fromtimestamp(self._clock(), UTC)
            )

    async def stop(self, grace: float) -> None:
        """No new sweeps; let running ones finish within ``grace`` seconds, then cancel them.

        Cancelling is safe: a sweep commits each target's state and outbox rows in one
        transaction, so a cancelled target simply keeps its old cursor.
        """
        if not self._scheduler.running:
            return
        self._scheduler.pause()
        if self._inflight:
            _done, pending = await asyncio.wait(set(self._inflight), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
                log.warning("stopped with sweeps cancelled", cancelled=len(pending))
        self._scheduler.shutdown(wait=False)


def _job_id(job: Job) -> str:
    if job.max_interval is not None:
        return f"{job.source}@{job.interval:g}-{job.max_interval:g}"
    return f"{job.source}@{job.interval:g}"


def _reads_per_tick(job: Job) -> bool:
    """Whether ``job``'s source reads getVoteAccounts, whose one call serves every sweep
    started together (``watcher.kinds.sources.vote_accounts``)."""
    source = SOURCES.get(job.source)
    return source is not None and bool(source.facts.per_tick)
