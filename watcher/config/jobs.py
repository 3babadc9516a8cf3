"""A job: one scheduled sweep of a source's targets at one interval (``Job``), and the
sequences of targets a job holds. A rule set (``watcher.kinds.ruleset.RuleSet``) groups the
rules into jobs; the scheduler, the sweeps and the call budget take them as they are."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from watcher.config.address_files import JoinedTargets

__all__ = ["IMMUTABLE_TARGETS", "Job", "JoinedTargets", "PickedTargets"]


@dataclass(frozen=True)
class Job:
    """One scheduled sweep: poll every target of ``source`` once per ``interval`` seconds;
    with ``max_interval``, the sweep still runs every ``interval`` but polls only the targets
    due, each backing off while quiet up to ``max_interval`` seconds between its polls."""

    source: str
    interval: float
    targets: Sequence[str]  # a tuple, or with packed addresses a ``JoinedTargets``
    max_interval: float | None = None

    @property
    def adaptive(self) -> bool:
        return self.max_interval is not None


class PickedTargets(Sequence[str]):
    """The targets at ``positions`` of a sequence, in that order (a job's targets in the shards
    an instance holds): 4 bytes a target, and no str made before one is asked for."""

    __slots__ = ("_of", "_positions")

    def __init__(self, of: Sequence[str], positions: array[int]) -> None:
        self._of, self._positions = of, positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._of[position] for position in self._positions[index]]
        return self._of[self._positions[index]]

    def __iter__(self) -> Iterator[str]:
        of = self._of
        return (of[position] for position in self._positions)

    def __repr__(self) -> str:
        return f"PickedTargets(<{len(self)} targets>)"


# Sequences of targets that never change: what is indexed of one holds while it is in use.
IMMUTABLE_TARGETS = (tuple, JoinedTargets, PickedTargets)
