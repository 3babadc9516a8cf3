"""Each adaptive target's cadence at run time: where it is kept, when it is written, what is due.

A job with ``max_interval`` (rules with ``max_every``) sweeps every ``interval`` but polls only
the targets whose cadence (``backoff.Cadence``) says they are due. Three places hold it:

* **The target's state document**, under ``CADENCE_KEY``: it survives a restart and needs no
  second store. Kinds never read the key; the daemon puts the stored value back on every new
  state, since some kinds build their state afresh.
* **Written rarely.** A quiet poll that changes nothing else writes nothing (most polls of a
  large list): the cadence in the document is replaced only when the poll saw activity (the
  state is written then anyway), when there is none yet, or when the interval moved by
  ``REWRITE_RATIO`` or more (the few doubling steps of a backoff, a new allocation that moved
  it far). So the stored ``next_due`` may be old: a restart polls such a target at once (never
  later than promised; under a budget, paced like first polls) and goes on from its stored
  interval and rate.
* **The in-memory book** (``CadenceBook``), filled as targets are polled, and once at a
  target's first sweep from its stored state: a sweep asks it what is due without reading any
  state, so a quiet target costs nothing between its polls.

Pure: values in, values out; the clock and the database are the caller's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from watcher.budget.backoff import Cadence, after_poll, rescheduled
from watcher.config.current import Current
from watcher.config.packed_keys import IMMUTABLE_TARGETS
from watcher.core.events import CADENCE_KEY as CADENCE_KEY  # the key it writes
from watcher.core.events import WATCH_SINCE_KEY, TargetState
from watcher.kinds.ruleset import Job

# A target never polled is assumed to see an event a day until it shows its own rate: enough
# to weigh it against proven idle targets in a budget allocation, little enough not to matter
# once it has been watched for a few hours (the estimate's half-life is an hour).
PRIOR_RATE: Final = 1.0 / 86400
REWRITE_RATIO: Final = 1.25
# Upper bounds (seconds) of the interval bands /metrics and ``watcher status`` count targets in.
INTERVAL_BANDS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 21600.0, 86400.0)


def stored_cadence(state: TargetState | None) -> Cadence | None:
    """The cadence kept in a state document; None when there is none or it is damaged (the
    target then starts afresh at ``every``: never later than promised)."""
    if not state or CADENCE_KEY not in state:
        return None
    try:
        return Cadence.from_json(state[CADENCE_KEY])
    except ValueError:
        return None


def activity(previous: TargetState | None, new: Mapping[str, object], keys: Iterable[str]) -> int:
    """1 when the step moved what the source says is activity (``keys`` of its state: the
    cursor of signatures, a mint's top holders ...), else 0. A first poll is a baseline, not
    activity. (A target awaiting its first poll holds only when its watch began.)"""
    if previous is None or WATCH_SINCE_KEY in previous:
        return 0
    for key in keys:  # a loop, not any(): this runs after every poll
        if previous.get(key) != new.get(key):
            return 1
    return 0


def worth_storing(stored: Cadence | None, new: Cadence, events: int) -> bool:
    """Whether a poll's new cadence replaces the one in the state document."""
    if stored is None or events > 0:
        return True
    ratio = new.interval / stored.interval
    return ratio >= REWRITE_RATIO or ratio <= 1.0 / REWRITE_RATIO


def paced_state(
    previous: TargetState | None,
    new_state: TargetState,
    cadence: Cadence,
    events: int,
    stored: Cadence | None,
) -> TargetState:
    """The step's new state with the cadence to keep: the new one when ``worth_storing``,
    else the stored one unchanged (so that a quiet poll leaves the document as it was).
    ``stored``: ``stored_cadence(previous)``, which the caller has read already."""
    if worth_storing(stored, cadence, events):
        return {**new_state, CADENCE_KEY: cadence.to_json()}
    assert previous is not None  # a stored cadence comes from a previous state
    return {**new_state, CADENCE_KEY: previous[CADENCE_KEY]}


@dataclass
class _SourceIndex:
    """One source's cadences, and what makes ``due`` cost what is due rather than every target:
    a timing wheel of next due times (whole seconds: ``wheel[second][target] = next_due``) read
    up to each sweep's moment, the targets whose time came (taken off the wheel, not polled
    since), and those known to have no cadence."""

    known: dict[str, Cadence | None] = field(default_factory=dict)
    wheel: dict[int, dict[str, float]] = field(default_factory=dict)
    read_to: int | None = None  # the wheel's slots below this one are empty
    came: dict[str, float] = field(default_factory=dict)  # target -> its next_due, passed
    never: dict[str, None] = field(default_factory=dict)  # an ordered set

    def place(self, target: str, cadence: Cadence | None) -> None:
        """``target``'s cadence, off the wheel (or ``came``) at its old time, on at its new."""
        old = self.known.get(target)
        self.known[target] = cadence
        if old is not None and self.came.pop(target, None) is None:
            slot = self.wheel.get(math.floor(old.next_due))
            if slot is not None:
                slot.pop(target, None)
        if cadence is None:
            self.never[target] = None
            return
        if old is None:
            self.never.pop(target, None)
        second = math.floor(cadence.next_due)
        if self.read_to is not None and second < self.read_to:
            self.came[target] = cadence.next_due  # a slot already read: its time has come
            return
        slot = self.wheel.get(second)
        if slot is None:
            slot = self.wheel[second] = {}
        slot[target] = cadence.next_due

    def read_until(self, until: float) -> None:
        """Moves every target due at or before ``until`` from the wheel to ``came``."""
        last = math.floor(until)
        start = self.read_to
        if start is None or last - start > len(self.wheel):
            seconds = sorted(second for second in self.wheel if second <= last)
        else:
            seconds = [second for second in range(start, last + 1) if second in self.wheel]
        came = self.came
        for second in seconds:
            slot = self.wheel[second]
            if second < last:
                came.update(slot)
                del self.wheel[second]
                continue
            # The slot of ``until`` itself: only what is due by then; the rest stays.
            passed = [target for target, at in slot.items() if at <= until]
            for target in passed:
                came[target] = slot.pop(target)
        if start is None or last > start:
            self.read_to = last


@dataclass
class _View:
    """A sequence of targets a sweep asks about, indexed once: each target's position, and
    those the book did not know when it was first asked (fewer as they are learned)."""

    targets: Sequence[str]
    position: dict[str, int]
    unknown: list[str]


class CadenceBook:
    """The cadence of each adaptive target this process knows, by source: a sweep's index of
    what is due. A target absent is unknown (its stored cadence not read yet); ``None`` is
    known to have none (never polled, or its stored one was damaged): due.

    ``due`` costs what is due, not the number of targets (the scheduler's CPU at 100,000
    targets is measured in ``bench/activity.py``): the book keeps a timing wheel of next due
    times per source, and indexes each sequence of targets it is asked about once. A tuple
    is indexed for as long as it is asked about (a sweep's targets are the job's, or the held
    shards', ``ShardedTargets``), as is each sequence of ``IMMUTABLE_TARGETS``; any other
    sequence at each call (it may change).
    """

    def __init__(self) -> None:
        self._by_source: dict[str, _SourceIndex] = {}
        self._views: dict[tuple[str, int], _View] = {}
        # Intervals of the last budget allocation, by source and target (None: no budget).
        self._allocated: dict[str, dict[str, float]] = {}

    def _index(self, source: str) -> _SourceIndex:
        index = self._by_source.get(source)
        if index is None:
            index = self._by_source[source] = _SourceIndex()
        return index

    def _set(self, source: str, target: str, cadence: Cadence | None) -> None:
        (self._by_source.get(source) or self._index(source)).place(target, cadence)

    def _view(self, source: str, targets: Sequence[str]) -> _View:
        key = (source, id(targets))
        view = self._views.get(key)
        if view is not None and view.targets is targets:
            return view
        known = self._index(source).known
        position = {target: position for position, target in enumerate(targets)}
        # The unknown ones are the position's own strs, not ``targets``' again: a packed list
        # makes a new str at each pass, and what the book learns of them (and the polls they
        # are due for) would then hold a second copy of each target's str.
        view = _View(targets, position, [target for target in position if target not in known])
        if type(targets) in IMMUTABLE_TARGETS:
            if len(self._views) > 64:  # jobs and shard sets of the past
                self._views.clear()
            self._views[key] = view
        return view

    def get(self, source: str, target: str) -> Cadence | None:
        index = self._by_source.get(source)
        return None if index is None else index.known.get(target)

    def unknown(self, source: str, targets: Sequence[str]) -> list[str]:
        """The targets whose cadence has not been read or set yet, in their order."""
        view = self._view(source, targets)
        if view.unknown:
            known = self._index(source).known
            view.unknown = [target for target in view.unknown if target not in known]
        return list(view.unknown)

    def learn(self, source: str, target: str, cadence: Cadence | None) -> None:
        self._set(source, target, cadence)

    def due(self, source: str, targets: Sequence[str], now: float, slack: float = 0.0) -> list[str]:
        """The targets to poll at ``now``, in their order: never polled, or their time come or
        within ``slack`` of it. Sweeps run at fixed ticks and a poll's due time counts from its
        answer, a little after its sweep's tick: without a slack (half the sweeps' interval) a
        target due "every second" would wait for every other tick."""
        index = self._index(source)
        view = self._view(source, targets)
        until = now + slack
        index.read_until(until)
        came, position = index.came, view.position
        # A target popped by another job's sweep (a longer slack) is not due here before its
        # own time: ``came`` keeps each one's due time.
        due = [target for target, at in came.items() if at <= until and target in position]
        due += [target for target in index.never if target in position]
        due += self.unknown(source, targets)
        due.sort(key=position.__getitem__)
        return due

    def after_poll(
        self,
        source: str,
        target: str,
        stored: Cadence | None,
        *,
        now: float,
        events: int,
        every: float,
        max_every: float,
    ) -> Cadence:
        """The target's cadence after a poll, kept in the book. It goes on from the book's
        (the latest, a reschedule included), else from the one stored in its state."""
        # ``allocated_interval`` of ``after_poll`` is not used: it would send a target that just
        # moved back to its allocated interval on its first quiet poll.
        index = self._by_source.get(source)
        previous = (None if index is None else index.known.get(target)) or stored
        by_target = self._allocated.get(source) if self._allocated else None
        allocated = None if by_target is None else by_target.get(target)
        # Under a budget the allocated interval is the ceiling the backoff climbs to: a target
        # that moved is polled at every, then backs off toward it by doubling (not straight
        # back to it on the next quiet poll), until the next plan weighs its raised rate.
        cadence = after_poll(
            previous,
            now=now,
            events=events,
            every=every,
            max_every=max_every if allocated is None else max(allocated, every),
            prior_rate=PRIOR_RATE,
        )
        if previous is None and allocated is not None:
            # Under a budget a baseline is no activity: the target takes its allocation.
            cadence = rescheduled(cadence, allocated)
        self._set(source, target, cadence)
        return cadence

    def cadences(self, source: str) -> Mapping[str, Cadence | None]:
        index = self._by_source.get(source)
        return {} if index is None else index.known

    def allocate(self, intervals: Mapping[str, Mapping[str, float]]) -> None:
        """A budget allocation's intervals, by source and target: a known cadence moves its
        next poll at once (``rescheduled``); later quiet polls take the allocated interval."""
        self._allocated = {source: dict(by_target) for source, by_target in intervals.items()}
        for source, by_target in intervals.items():
            known = self.cadences(source)
            for target, interval in by_target.items():
                cadence = known.get(target)
                if cadence is not None and not math.isclose(cadence.interval, interval):
                    self._set(source, target, rescheduled(cadence, interval))

    def planned(self, source: str) -> Mapping[str, float]:
        """The intervals of the last budget allocation for ``source``'s targets, by target
        (empty without a budget)."""
        return self._allocated.get(source) or {}

    def rate(self, source: str, target: str, prior: float = PRIOR_RATE) -> float:
        """The target's estimated events per second; ``prior`` for one never polled."""
        cadence = self.get(source, target)
        return prior if cadence is None else cadence.rate

    def never_polled(self, source: str, targets: Sequence[str]) -> int:
        known = self.cadences(source)
        return sum(known.get(target) is None for target in targets)

    def first_polls_limited(self, source: str, due: Sequence[str], limit: int) -> list[str]:
        """``due`` with at most ``limit`` of its never-polled targets (the first ones)."""
        known = self.cadences(source)
        kept, firsts = [], 0
        for target in due:
            if known.get(target) is None:
                if firsts >= limit:
                    continue
                firsts += 1
            kept.append(target)
        return kept

    def drop_allocation(self) -> None:
        """No budget any more (a reload): quiet polls back off by doubling again."""
        self._allocated.clear()

    def intervals(self) -> list[float]:
        """The current interval of every target with a cadence (for /metrics)."""
        return [
            cadence.interval
            for index in self._by_source.values()
            for cadence in index.known.values()
            if cadence is not None
        ]


def projected_per_second(jobs: Sequence[Job], book: CadenceBook) -> float:
    """Calls a second at the current cadences: a fixed job's targets at its interval, an
    adaptive target at its current interval (one not polled yet at ``every``)."""
    total = 0.0
    for job in jobs:
        if job.max_interval is None:
            total += len(job.targets) / job.interval
            continue
        known = book.cadences(job.source)
        for target in job.targets:
            cadence = known.get(target)
            total += 1.0 / (job.interval if cadence is None else cadence.interval)
    return total


class JobsInForce(Protocol):
    """What ``at_scrape`` reads of the configuration in force."""

    @property
    def jobs(self) -> Sequence[Job]: ...


def at_scrape(config: Current[JobsInForce], book: CadenceBook) -> tuple[float, list[float]]:
    """What /metrics shows of the cadences when scraped: the calls a second they project over
    the jobs in force (``projected_per_second``) and every adaptive target's current interval."""
    return projected_per_second(config.current.jobs, book), book.intervals()


def interval_bands(intervals: Iterable[float]) -> list[tuple[float, int]]:
    """How many intervals fall in each band: (upper bound, count), ``inf`` last; each interval
    counts in the first band whose bound it does not exceed."""
    bounds = (*INTERVAL_BANDS, math.inf)
    counts = [0] * len(bounds)
    for interval in intervals:
        counts[next(i for i, bound in enumerate(bounds) if interval <= bound)] += 1
    return list(zip(bounds, counts, strict=True))
