"""``watcher status``: what is firing now, each source's last round, pending and dead
deliveries, and how many targets of rules with ``max_every`` sit at each interval band (with
what they project a month); read from the store only (``Store.status``: no RPC call, no secret
needed). The intervals are those stored in the targets' states (``watcher.budget.cadences``:
rewritten when an interval moves by a quarter or more), so they trail the daemon's by less
than that."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

from watcher.budget.cadences import CADENCE_KEY, interval_bands
from watcher.budget.cost import monthly_calls
from watcher.core.clock import iso
from watcher.state import snapshot
from watcher.state.commands import CommandStore
from watcher.state.records import CONFIG_SOURCE, SourceRound
from watcher.state.shards import SHARDS
from watcher.state.snapshot import Awaiting, InstanceShards, StoreStatus

# `status --health`: a delivery pending this long means the outbox does not drain.
STUCK_SECONDS = 300.0


@dataclass(frozen=True)
class Intervals:
    """The adaptive targets' current intervals: (band's upper bound, targets) and the calls a
    second they add up to."""

    bands: list[tuple[float, int]]
    per_second: float

    @property
    def targets(self) -> int:
        return sum(count for _, count in self.bands)


def intervals_of(intervals: list[float]) -> Intervals:
    return Intervals(interval_bands(intervals), math.fsum(1.0 / value for value in intervals))


@dataclass(frozen=True)
class Status:
    firing: list[snapshot.Firing]
    outbox: snapshot.Outbox
    sources: list[SourceRound]  # each source's last round of each instance
    # Several instances on one database (state_url): each live one with its shards, and the
    # shards nobody holds (their targets wait for an instance to take them). None: SQLite.
    instances: list[InstanceShards] | None = None
    unheld_shards: int = 0
    now: float = 0.0  # when read (the instances' renewals are told relative to it)
    intervals: Intervals | None = None
    # Each instance's last load of the settings and rules (the start or a reload): a refused
    # reload is the sources' ``failed`` (``watcher.state.records.config_round``).
    loads: list[SourceRound] = field(default_factory=list)
    # Per source, the targets whose watch began and whose first poll has not come.
    awaiting: list[Awaiting] = field(default_factory=list)

    def problems(self, now: float) -> list[str]:
        """Why the daemon looks unhealthy from its database (empty: healthy)."""
        found = [
            f"{s.source}: every poll of its last round failed ({iso(s.finished_at)})"
            + (f" on {s.instance}" if s.instance else "")
            for s in self.live_rounds()
            if s.targets and s.failed == s.targets
        ]
        found += [
            f"the last reload ({iso(load.finished_at)})"
            + (f" on {load.instance}" if load.instance else "")
            + " was refused: the settings and rules on disk are not those running (see the log)"
            for load in self.live(self.loads)
            if load.failed
        ]
        if self.instances is not None and not self.instances:
            found.append("no instance is running (none renewed its leases)")
        elif self.unheld_shards:
            found.append(f"{self.unheld_shards} shards held by no instance: not polled")
        oldest = self.outbox.oldest_pending_at
        if oldest is not None and now - oldest > STUCK_SECONDS:
            found.append(f"outbox not draining: oldest pending delivery {now - oldest:.0f}s old")
        return found

    def live_rounds(self) -> list[SourceRound]:
        """The last rounds of the instances running now (all of them on SQLite)."""
        return self.live(self.sources)

    def live(self, rounds: list[SourceRound]) -> list[SourceRound]:
        """Those of ``rounds`` run by the instances running now (all of them on SQLite)."""
        if self.instances is None:
            return rounds
        live = {i.instance_id for i in self.instances}
        return [s for s in rounds if s.instance in live]

    def as_json(self) -> str:
        return json.dumps(
            {
                "firing": [asdict(f) for f in self.firing],
                "sources": [asdict(s) for s in self.sources],
                "reloads": [
                    {
                        "at": load.finished_at,
                        "refused": bool(load.failed),
                        "last_success_at": load.last_success_at,
                        "instance": load.instance,
                    }
                    for load in self.loads
                ],
                "deliveries": {
                    "pending": self.outbox.pending,
                    "oldest_pending_at": self.outbox.oldest_pending_at,
                    "dead": self.outbox.dead,
                },
                **(
                    {}
                    if self.instances is None
                    else {
                        "instances": [asdict(i) for i in self.instances],
                        "unheld_shards": self.unheld_shards,
                    }
                ),
                "awaiting_first_poll": [
                    {
                        "source": a.source,
                        "targets": a.targets,
                        "oldest_since": a.oldest_since,
                        "oldest_wait_seconds": max(0.0, self.now - a.oldest_since),
                    }
                    for a in self.awaiting
                ],
                "intervals": None
                if self.intervals is None
                else {
                    "bands": [
                        {"up_to": None if math.isinf(bound) else bound, "targets": count}
                        for bound, count in self.intervals.bands
                        if count
                    ],
                    "projected_monthly_calls": monthly_calls(self.intervals.per_second),
                },
            },
            sort_keys=True,
        )

    def lines(self) -> list[str]:
        out = [f"firing: {len(self.firing)}"]
        out += [
            f"  {f.severity.upper():8} {f.rule} {f.subject} since {iso(f.since)}: {f.title}"
            for f in self.firing
        ]
        polled = len({s.source for s in self.sources})
        out.append(f"sources: {polled}" if polled else "sources: none polled yet")
        for s in self.sources:
            success = "never" if s.last_success_at is None else iso(s.last_success_at)
            on = f" on {s.instance}" if s.instance else ""
            out.append(
                f"  {s.source:10} last round {iso(s.finished_at)}{on}: {s.targets} targets, "
                f"{s.failed} failed, {s.duration:.2f}s; last success {success}"
            )
        for load in self.loads:  # a line only while a refused reload leaves old rules running
            if load.failed:
                on = f" on {load.instance}" if load.instance else ""
                success = "never" if load.last_success_at is None else iso(load.last_success_at)
                out.append(
                    f"config{on}: last reload refused {iso(load.finished_at)}, running what was "
                    f"loaded {success}"
                )
        out += [
            f"awaiting first poll: {a.source}: {a.targets} targets, the oldest asked for "
            f"{max(0.0, self.now - a.oldest_since):.0f}s ago ({iso(a.oldest_since)}); what "
            "lands on them meanwhile is notified at that poll"
            for a in self.awaiting
        ]
        oldest = self.outbox.oldest_pending_at
        since = "" if oldest is None else f" (oldest since {iso(oldest)})"
        out.append(f"deliveries: {self.outbox.pending} pending{since}, {self.outbox.dead} dead")
        if self.instances is not None:
            held = sum(i.shards for i in self.instances)
            out.append(
                f"instances: {len(self.instances)}, holding {held} of {SHARDS} shards"
                + (f" ({self.unheld_shards} held by none)" if self.unheld_shards else "")
            )
            out += [
                f"  {i.instance_id:12} {i.host} pid {i.pid}: {i.shards} shards, renewed "
                f"{max(0.0, self.now - i.renewed_at):.0f}s ago, up since {iso(i.started_at)}"
                for i in self.instances
            ]
        if self.intervals is not None and self.intervals.targets:
            bands = ", ".join(
                f"{'over' if math.isinf(bound) else 'up to'} {_seconds(bound, previous)}: {count}"
                for (bound, count), (previous, _) in zip(
                    self.intervals.bands, [(0.0, 0), *self.intervals.bands], strict=False
                )
                if count
            )
            calls = monthly_calls(self.intervals.per_second)
            out.append(
                f"intervals of {self.intervals.targets} targets with max_every: {bands}; "
                f"{calls:,.0f} calls a month at these intervals"
            )
        return out


def status_of(found: StoreStatus, now: float) -> Status:
    """The status of what the store read (``Store.status``) at ``now``."""
    return Status(
        found.firing,
        found.outbox,
        [r for r in found.rounds if r.source != CONFIG_SOURCE],
        instances=found.instances,
        unheld_shards=found.unheld_shards,
        now=now,
        intervals=None if found.intervals is None else intervals_of(found.intervals),
        loads=[r for r in found.rounds if r.source == CONFIG_SOURCE],
        awaiting=found.awaiting,
    )


def read_status(store: CommandStore, now: float) -> Status:
    """``watcher status`` of a one-shot command's store (``watcher.state.commands``)."""
    return status_of(store.status(CADENCE_KEY), now)


def _seconds(bound: float, previous: float) -> str:
    return f"{previous:g}s" if math.isinf(bound) else f"{bound:g}s"
