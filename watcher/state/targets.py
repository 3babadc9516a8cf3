"""Target state: each (source, target)'s state document, committed with the step's alerts."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from watcher.alerting.events import AlertMessage, TargetState
from watcher.delivery.outbox import Destination
from watcher.state.alerts import AlertRows, to_json
from watcher.state.database import transaction


class TargetStates(AlertRows):
    """Per-target state documents."""

    # Steps committed: a caller sees whether its work wrote anything (a health signal).
    commits: int

    def load_state(self, source: str, target: str) -> TargetState | None:
        row = self._db.execute(
            "SELECT state FROM targets WHERE source = ? AND target = ?", [source, target]
        ).fetchone()
        if row is None:
            return None
        state: TargetState = json.loads(row[0])
        return state

    def commit_step(
        self,
        source: str,
        target: str,
        state: TargetState,
        alerts: Sequence[AlertMessage],
        destinations: Callable[[AlertMessage], Sequence[Destination]],
        now: float,
    ) -> list[int]:
        """Save the target's new state, its alerts and their deliveries in ONE transaction.

        An alert whose ``dedup_key`` is already recorded is skipped with its deliveries (a
        step re-run after a crash repeats nothing). A URL listed twice for one alert (the same
        URL in two channels) gets one delivery. Returns the ids of the alerts inserted.
        """
        with transaction(self._db):
            self._db.execute(
                """INSERT INTO targets (source, target, state, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (source, target)
                DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at""",
                [source, target, to_json(state), now],
            )
            new_ids = self._insert_alerts(alerts, destinations, now)
        self.commits += 1
        return new_ids
