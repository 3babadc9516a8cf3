"""What a sweep keeps of the targets its last polls found quiet, so that the next one polls them
without reading their states again (a million states read back from the database every sweep
were the largest cost of a quiet poll that grows with the list: bench/README).

A quiet poll leaves its target's state as it was; its source says that state in short
(``FirstCall.rest``: for an address, its cursor's signature and whether its tokens are read).
``Rests`` keeps that short form in a fixed slot per position of the sweep's targets, 90 bytes a
target in blocks of ``bytearray`` (no object per target; a block made at its first rest). The
next sweep makes such a target's first call from it and, when the answer is quiet again, counts
the poll without reading the state; any other answer drops the slot and the poll reads the state
and runs as any other.

A rest stands for the stored state only while nobody else writes it. In this process only a
poll that was not quiet writes a target's state, and it drops the slot first. Another instance
writes a target only once it holds its shard: the sweeper keeps rests for one job and one set
of held shards (the store's ``shards_held``, a new object whenever a shard moves), never across
a shard's move or a reload (``Sweeper.rests_for``).
"""

from __future__ import annotations

SLOT = 90  # bytes a target: the rest's length, then its ASCII (a signature is 88 at most)
BLOCK_BITS = 10  # slots a block: 1,024 (92 KB), each made at its first rest, so that a first
# sweep (no poll quiet yet) holds none, and small enough for the allocator to reuse freed room


class Rests:
    """The rest of each of ``count`` targets (by position), or none."""

    __slots__ = ("_blocks", "_count")

    def __init__(self, count: int) -> None:
        self._count = count
        self._blocks: list[bytearray | None] = [None] * -(-count >> BLOCK_BITS)

    def __len__(self) -> int:
        return self._count

    def get(self, index: int) -> str | None:
        """The rest kept at ``index``; None: none."""
        block = self._blocks[index >> BLOCK_BITS]
        if block is None:
            return None
        at = (index & _IN_BLOCK) * SLOT
        length = block[at]
        if not length:
            return None
        return block[at + 1 : at + 1 + length].decode("ascii")

    def known(self, index: int) -> bool:
        """Whether a rest is kept at ``index``."""
        block = self._blocks[index >> BLOCK_BITS]
        return block is not None and block[(index & _IN_BLOCK) * SLOT] != 0

    def put(self, index: int, rest: str) -> None:
        """Keeps ``rest`` at ``index``; one that does not fit a slot (or is not ASCII) is not
        kept: that target's polls read its state."""
        try:
            data = rest.encode("ascii")
        except UnicodeEncodeError:
            data = b""
        if not 0 < len(data) < SLOT:
            self.drop(index)
            return
        block = self._blocks[index >> BLOCK_BITS]
        if block is None:
            block = self._blocks[index >> BLOCK_BITS] = bytearray(SLOT << BLOCK_BITS)
        at = (index & _IN_BLOCK) * SLOT
        block[at] = len(data)
        block[at + 1 : at + 1 + len(data)] = data

    def drop(self, index: int) -> None:
        """Forgets the rest at ``index`` (its state is about to change)."""
        block = self._blocks[index >> BLOCK_BITS]
        if block is not None:
            block[(index & _IN_BLOCK) * SLOT] = 0

    def held(self) -> int:
        """Bytes its blocks hold."""
        return sum(len(block) for block in self._blocks if block is not None)


_IN_BLOCK = (1 << BLOCK_BITS) - 1
