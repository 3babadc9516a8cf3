"""Target state: each (source, target)'s state document, committed with the step's alerts."""

from __future__ import annotations

from collections.abc import Sequence

from sqlite_utils import Database

from watcher.core.events import WATCH_SINCE_KEY, TargetState, WatchSince
from watcher.core.fastjson import decode_json
from watcher.state.alerts import AlertRows, to_json
from watcher.state.database import transaction
from watcher.state.interface import StepToCommit
from watcher.state.staging import StagedRow

# Quiet state changes held before they are written together (see ``stage_state``).
STAGED_LIMIT = 1000
# Targets whose watch's start one transaction records (``register_watch``).
REGISTER_CHUNK = 10_000


class TargetRows:
    """The targets' state documents in the file: read, written with a step's alerts, written
    in batches of staged states. Each write is one transaction; ``commits`` counts them.

    A step with alerts is committed at once, with its outbox rows (``write_step``). A step that
    only changed the state (a first poll's baseline, a pending counter) is staged in memory
    (``watcher.state.staging``) and written with the others in one transaction
    (``write_states``: at the end of a sweep, or every ``STAGED_LIMIT``): the first sweep of
    100,000 addresses costs a hundred transactions, not 100,000. A staged state lost in a crash
    is a poll that did not happen: the next one redoes it.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._alerts = AlertRows(db)
        # Steps and flushes committed: a caller sees whether its work wrote anything.
        self.commits = 0

    def read_states(self, source: str, targets: Sequence[str]) -> dict[str, str | None]:
        """The stored JSON of each of ``targets``' states (None: no state yet), in one query."""
        marks = ",".join("?" * len(targets))
        rows = self._db.conn.execute(
            f"SELECT target, state FROM targets WHERE source = ? AND target IN ({marks})",
            [source, *targets],
        )
        found: dict[str, str | None] = dict.fromkeys(targets)
        found.update(rows.fetchall())
        return found

    def read_state(self, source: str, target: str) -> TargetState | None:
        """The target's state as stored (None: no state yet)."""
        row = self._db.conn.execute(
            "SELECT state FROM targets WHERE source = ? AND target = ?", [source, target]
        ).fetchone()
        if row is None:
            return None
        state: TargetState = decode_json(row[0])
        return state

    def write_states(self, rows: Sequence[StagedRow]) -> None:
        """Writes a flush's rows in one transaction."""
        with transaction(self._db):
            self._db.conn.executemany(_UPSERT, rows)
        self.commits += 1

    def register_watch(self, source: str, targets: Sequence[str], since: WatchSince) -> int:
        """Keeps when the watch of each of ``targets`` began, as the first state of those that
        have none (``{"v": 1, "_since": ...}``), in one transaction; how many were new."""
        state = to_json({"v": 1, WATCH_SINCE_KEY: since.to_json()})
        rows = [(source, target, state, since.at, since.at) for target in targets]
        with transaction(self._db):
            before = self._db.conn.total_changes
            self._db.conn.executemany(_REGISTER, rows)
            return self._db.conn.total_changes - before

    def write_step(self, step: StepToCommit) -> list[int]:
        """Saves the target's new state, its alerts and their deliveries in ONE transaction.

        An alert whose ``dedup_key`` is already recorded is skipped with its deliveries (a
        step re-run after a crash repeats nothing). A URL listed twice for one alert (the same
        URL in two channels) gets one delivery. Returns the ids of the alerts inserted.
        """
        with transaction(self._db):
            self._db.execute(_UPSERT, [step.source, step.target, to_json(step.state), step.now])
            new_ids = self._alerts.insert_alerts(step.alerts, step.destinations, step.now)
        self.commits += 1
        return new_ids


# A state still holding the watch's start ("_since": a first poll held back as doubtful) keeps
# the target counted as awaiting; any other clears it.
_UPSERT = """INSERT INTO targets (source, target, state, updated_at) VALUES (?, ?, ?, ?)
    ON CONFLICT (source, target)
    DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at,
    awaiting_since = CASE WHEN instr(excluded.state, '"_since"') > 0
        THEN targets.awaiting_since END"""
# The first row of a target whose watch began; a row that exists is never changed.
_REGISTER = """INSERT INTO targets (source, target, state, updated_at, awaiting_since)
    VALUES (?, ?, ?, ?, ?) ON CONFLICT (source, target) DO NOTHING"""
