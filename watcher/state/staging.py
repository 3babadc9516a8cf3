"""The target states a store holds in memory, the same on both engines: quiet steps' states
staged until a flush writes them together, and a chunk of states prefetched for a sweep's
loads. Pure: no clock, no database; the engine reads and writes, ``HeldStates`` says what it
holds and which copy a load gets.

Which copy ``load`` returns, newest first:

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

from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum

from watcher.core.events import TargetState
from watcher.core.fastjson import decode_json
from watcher.state.alerts import to_json

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
        held = self._staged.get((source, target)) or self._flushing.get((source, target))
        if held is not None:
            state: TargetState = decode_json(held[0])
            return state
        prefetched = self._prefetched.get(source)
        if prefetched is not None and target in prefetched:
            text = prefetched.pop(target)
            read: TargetState | None = None if text is None else decode_json(text)
            return read
        return MISS

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
