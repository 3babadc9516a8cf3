"""``watcher status``: what is firing now, each source's last round, pending and dead
deliveries; read from the state database only (no RPC call, no secret needed)."""

from __future__ import annotations

import json
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path

from watcher.core.clock import iso
from watcher.state import snapshot
from watcher.state.database import connect_readonly
from watcher.state.pg_summary import InstanceShards, SharedStatus
from watcher.state.shards import SHARDS
from watcher.state.source_rounds import SourceRound, last_rounds

# `status --health`: a delivery pending this long means the outbox does not drain.
STUCK_SECONDS = 300.0


@dataclass(frozen=True)
class Status:
    firing: list[snapshot.Firing]
    outbox: snapshot.Outbox
    sources: list[SourceRound]
    # Several instances on one database (state_url): each live one with its shards, and the
    # shards nobody holds (their targets wait for an instance to take them). None: SQLite.
    instances: list[InstanceShards] | None = None
    unheld_shards: int = 0
    now: float = 0.0  # when read (the instances' renewals are told relative to it)

    def problems(self, now: float) -> list[str]:
        """Why the daemon looks unhealthy from its database (empty: healthy)."""
        found = [
            f"{s.source}: every poll of its last round failed ({iso(s.finished_at)})"
            for s in self.sources
            if s.targets and s.failed == s.targets
        ]
        if self.instances is not None and not self.instances:
            found.append("no instance is running (none renewed its leases)")
        elif self.unheld_shards:
            found.append(f"{self.unheld_shards} shards held by no instance: not polled")
        oldest = self.outbox.oldest_pending_at
        if oldest is not None and now - oldest > STUCK_SECONDS:
            found.append(f"outbox not draining: oldest pending delivery {now - oldest:.0f}s old")
        return found

    def as_json(self) -> str:
        return json.dumps(
            {
                "firing": [asdict(f) for f in self.firing],
                "sources": [asdict(s) for s in self.sources],
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
            },
            sort_keys=True,
        )

    def lines(self) -> list[str]:
        out = [f"firing: {len(self.firing)}"]
        out += [
            f"  {f.severity.upper():8} {f.rule} {f.subject} since {iso(f.since)}: {f.title}"
            for f in self.firing
        ]
        out.append(f"sources: {len(self.sources)}" if self.sources else "sources: none polled yet")
        for s in self.sources:
            success = "never" if s.last_success_at is None else iso(s.last_success_at)
            out.append(
                f"  {s.source:10} last round {iso(s.finished_at)}: {s.targets} targets, "
                f"{s.failed} failed, {s.duration:.2f}s; last success {success}"
            )
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
        return out


def shared_status(shared: SharedStatus, now: float) -> Status:
    """The status of a shared database (several instances, ``state_url``)."""
    return Status(
        shared.firing,
        shared.outbox,
        shared.rounds,
        instances=shared.instances,
        unheld_shards=shared.unheld_shards,
        now=now,
    )


def read_status(path: Path) -> Status:
    """Raises ``StateUnusable`` for a missing database or one of another schema."""
    with closing(connect_readonly(path)) as conn:
        return Status(snapshot.firing(conn), snapshot.outbox(conn), last_rounds(conn))
