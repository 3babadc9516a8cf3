"""Target states: each (source, target)'s state document, committed with the step's alerts
(``TargetRows``, the SQLite engine's repository), and the copies of states a store holds in
memory, the same on both engines (``HeldStates``): quiet steps' states staged until a flush
writes them together, and a chunk of states prefetched for a sweep's loads. ``HeldStates`` is
pure (no clock, no database): the engine reads and writes, it says what the engine holds and
which copy a load gets.

Which copy ``HeldStates.load`` returns, newest first:

1. a staged state (a quiet step's, not written yet);
2. a state being flushed (taken by ``take`` and neither ``flushed`` nor ``failed`` yet: a
   PostgreSQL flush awaits its round trip while polls go on staging and loading);
3. a prefetched one, taken once (``None``: the target had no state when the chunk was read);
4. else ``MISS``: the engine reads the database.

A write of this process drops the target's prefetched copy (``stage``; ``written``, a committed
step, drops its staged copy too: that write is newer); another process's writes do not (the
shards keep one writer per target). A failed flush puts its states back behind those staged
meanwhile (``failed``: a newer state is never overwritten by an older one).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import Enum
from typing import cast

from sqlite_utils import Database

from watcher.core.events import WATCH_SINCE_KEY, TargetState, WatchSince
from watcher.core.fastjson import decode_json
from watcher.state.alerts import AlertRows, to_json
from watcher.state.database import transaction
from watcher.state.interface import StepToCommit

# Quiet state changes held before they are written together (see ``stage_state``).
STAGED_LIMIT = 1000
# Targets whose watch's start one transaction records (``register_watch``).
REGISTER_CHUNK = 10_000


# A flush's rows: source, target, the state's JSON, when it was staged.
StagedRow = tuple[str, str, str, float]


class Miss(Enum):
    """``load`` holds no copy of the target's state: read it from the database."""

    MISS = "miss"


MISS = Miss.MISS


class HeldStates:
    """The staged, flushing and prefetched copies of target states (see the module)."""

    def __init__(self, limit: int) -> None:
        """``limit``: staged states at which ``stage`` asks for a flush."""
        self.limit = limit
        self._staged: dict[tuple[str, str], tuple[str, float]] = {}
        self._flushing: dict[tuple[str, str], tuple[str, float]] = {}
        self._prefetched: dict[str, dict[str, str | None]] = {}  # source -> target -> JSON

    @property
    def staged(self) -> int:
        """How many states wait for a flush."""
        return len(self._staged)

    def stage(self, source: str, target: str, state: TargetState, now: float) -> bool:
        """Holds a quiet step's state; whether it is time to flush."""
        self._staged[source, target] = (to_json(state), now)
        self._prefetched.get(source, {}).pop(target, None)
        return len(self._staged) >= self.limit

    def prefetched(self, source: str, found: dict[str, str | None]) -> None:
        """A chunk of ``source``'s states just read (target -> JSON, None: no state yet); it
        replaces the source's previous chunk."""
        self._prefetched[source] = found

    def load(self, source: str, target: str) -> TargetState | Miss | None:
        """The newest copy held of the target's state (see the module), or ``MISS``."""
        if self._staged or self._flushing:  # most polls: nothing staged, no key to make
            held = self._staged.get((source, target)) or self._flushing.get((source, target))
            if held is not None:
                state: TargetState = decode_json(held[0])
                return state
        text = self._prefetched.get(source, {}).pop(target, MISS)
        if text is MISS or text is None:
            return text
        read: TargetState = decode_json(text)
        return read

    def load_all(
        self, source: str, targets: Sequence[str]
    ) -> tuple[list[TargetState | Miss | None], list[str]]:
        """``load`` of each of ``targets``, in order, and the targets of those ``MISS``-ed."""
        found = [self.load(source, target) for target in targets]
        return found, [
            target for target, state in zip(targets, found, strict=True) if state is MISS
        ]

    @staticmethod
    def filled(
        found: Sequence[TargetState | Miss | None],
        targets: Sequence[str],
        read: Mapping[str, str | None],
    ) -> list[TargetState | None]:
        """``load_all``'s states with each ``MISS`` replaced by its target's state as ``read``
        from the database (its JSON; None: no state yet)."""
        if not read:  # nothing missed: the engine read nothing
            return cast(list[TargetState | None], found)
        return [
            (None if (text := read[target]) is None else decode_json(text))
            if state is MISS
            else state
            for target, state in zip(targets, found, strict=True)
        ]

    def written(self, source: str, target: str) -> None:
        """A step of the target committed: its staged and prefetched copies are older."""
        self._staged.pop((source, target), None)
        self._prefetched.get(source, {}).pop(target, None)

    def take(self) -> list[StagedRow]:
        """Starts a flush: the staged states, now being flushed (still what ``load`` returns
        until ``flushed`` or ``failed``); states staged meanwhile wait for the next flush."""
        self._flushing, self._staged = self._staged, {}
        return [
            (source, target, text, now) for (source, target), (text, now) in self._flushing.items()
        ]

    @contextmanager
    def flush(self) -> Iterator[list[StagedRow]]:
        """A flush of the staged states, yielded: ``take`` them, then ``flushed`` when the block
        ends or ``failed`` when it raises (each engine writes them in the block)."""
        rows = self.take()
        try:
            yield rows
        except BaseException:
            self.failed()
            raise
        self.flushed()

    def flushing(self, source: str, target: str) -> bool:
        """Whether the target's state is in the flush under way."""
        return (source, target) in self._flushing

    def flushed(self) -> None:
        """The flush under way ended: its states are in the database (or, a shard lost on
        PostgreSQL, dropped: its new owner polls them again)."""
        self._flushing = {}

    def failed(self) -> None:
        """The flush under way wrote nothing: its states are staged again, behind any newer
        one staged meanwhile."""
        self._staged = {**self._flushing, **self._staged}
        self._flushing = {}


class TargetRows:
    """The targets' state documents in the file: read, written with a step's alerts, written
    in batches of staged states. Each write is one transaction; ``commits`` counts them.

    A step with alerts is committed at once, with its outbox rows (``write_step``). A step that
    only changed the state (a first poll's baseline, a pending counter) is staged in memory
    (``HeldStates``) and written with the others in one transaction
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
