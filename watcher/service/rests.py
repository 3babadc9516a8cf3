"""What a sweep keeps of the targets its last polls found quiet, so that the next one polls them
without reading their states again (a million states read back from the database every sweep
were the largest cost of a quiet poll that grows with the list: bench/README).

A quiet poll leaves its target's state as it was; its source says that state in short
(``FirstCall.rest``: for an address, its cursor's signature and whether its tokens are read).
``Rests`` keeps that short form in a fixed slot per position of the sweep's targets, 90 bytes a
target in one ``bytearray`` (no object per target). The next sweep makes such a target's first
call from it and, when the answer is quiet again, counts the poll without reading the state;
any other answer drops the slot and the poll reads the state and runs as any other.

A rest stands for the stored state only while nobody else writes it. In this process only a
poll that was not quiet writes a target's state, and it drops the slot first. Another instance
writes a target only once it holds its shard: the sweeper keeps rests for one job and one set
of held shards (the store's ``shards_held``, a new object whenever a shard moves), never across
a shard's move or a reload (``Sweeper.rests_for``).
"""

from __future__ import annotations

SLOT = 90  # bytes a target: the rest's length, then its ASCII (a signature is 88 at most)


class Rests:
    """The rest of each of ``count`` targets (by position), or none."""

    __slots__ = ("_slots",)

    def __init__(self, count: int) -> None:
        self._slots = bytearray(count * SLOT)  # zeroed: no rest known

    def __len__(self) -> int:
        return len(self._slots) // SLOT

    def get(self, index: int) -> str | None:
        """The rest kept at ``index``; None: none."""
        at = index * SLOT
        length = self._slots[at]
        if not length:
            return None
        return self._slots[at + 1 : at + 1 + length].decode("ascii")

    def known(self, index: int) -> bool:
        """Whether a rest is kept at ``index``."""
        return self._slots[index * SLOT] != 0

    def put(self, index: int, rest: str) -> None:
        """Keeps ``rest`` at ``index``; one that does not fit a slot (or is not ASCII) is not
        kept: that target's polls read its state."""
        try:
            data = rest.encode("ascii")
        except UnicodeEncodeError:
            data = b""
        at = index * SLOT
        if not 0 < len(data) < SLOT:
            self._slots[at] = 0
            return
        self._slots[at] = len(data)
        self._slots[at + 1 : at + 1 + len(data)] = data

    def drop(self, index: int) -> None:
        """Forgets the rest at ``index`` (its state is about to change)."""
        self._slots[index * SLOT] = 0
