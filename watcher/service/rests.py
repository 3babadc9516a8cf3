"""What a sweep keeps of the targets its last polls found quiet, so that the next one polls them
without reading their states again (a million states read back from the database every sweep
were the largest cost of a quiet poll that grows with the list: bench/README).

A quiet poll leaves its target's state as it was; its source says that state in short
(``FirstCall.rest``: for an address, its cursor's signature and whether its tokens are read).
``Rests`` keeps that short form by position of the sweep's targets in blocks of ``bytearray``
(no object per target; a block made at its first rest): 2 bytes a target whose rest is one
byte (an address with no history), 91 for one that holds a signature. The
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

LONGEST = 89  # bytes of the longest rest kept (a flag and a signature: 88 at most)
BLOCK_BITS = 10  # targets a block: 1,024; a block's parts made at its first rest, so that a
# first sweep (no poll quiet yet) holds none, and small enough for the allocator to reuse room


class Rests:
    """The rest of each of ``count`` targets (by position), or none.

    A block of targets keeps two bytes each (a rest's length, and a one-byte rest itself:
    an address with no history says only its flag), and once one of them keeps a longer rest,
    ``LONGEST`` bytes each for those: 2 bytes a target where no rest is longer than a byte, 91
    where they are."""

    __slots__ = ("_count", "_heads", "_texts")

    def __init__(self, count: int) -> None:
        self._count = count
        blocks = -(-count >> BLOCK_BITS)
        self._heads: list[bytearray | None] = [None] * blocks
        self._texts: list[bytearray | None] = [None] * blocks

    def __len__(self) -> int:
        return self._count

    def get(self, index: int) -> str | None:
        """The rest kept at ``index``; None: none."""
        heads = self._heads[index >> BLOCK_BITS]
        if heads is None:
            return None
        at = (index & _IN_BLOCK) << 1
        length = heads[at]
        if length == 1:
            return _ONE_BYTE[heads[at + 1]]
        if not length:
            return None
        texts = self._texts[index >> BLOCK_BITS]
        assert texts is not None  # made with the first rest longer than a byte
        at = (index & _IN_BLOCK) * LONGEST
        return texts[at : at + length].decode("ascii")

    def known(self, index: int) -> bool:
        """Whether a rest is kept at ``index``."""
        heads = self._heads[index >> BLOCK_BITS]
        return heads is not None and heads[(index & _IN_BLOCK) << 1] != 0

    def put(self, index: int, rest: str) -> None:
        """Keeps ``rest`` at ``index``; one longer than ``LONGEST`` bytes (or not ASCII, or
        empty) is not kept: that target's polls read its state."""
        try:
            data = rest.encode("ascii")
        except UnicodeEncodeError:
            data = b""
        if not 0 < len(data) <= LONGEST:
            self.drop(index)
            return
        block = index >> BLOCK_BITS
        heads = self._heads[block]
        if heads is None:
            heads = self._heads[block] = bytearray(2 << BLOCK_BITS)
        at = (index & _IN_BLOCK) << 1
        heads[at] = len(data)
        if len(data) == 1:
            heads[at + 1] = data[0]
            return
        texts = self._texts[block]
        if texts is None:
            texts = self._texts[block] = bytearray(LONGEST << BLOCK_BITS)
        at = (index & _IN_BLOCK) * LONGEST
        texts[at : at + len(data)] = data

    def drop(self, index: int) -> None:
        """Forgets the rest at ``index`` (its state is about to change)."""
        heads = self._heads[index >> BLOCK_BITS]
        if heads is not None:
            heads[(index & _IN_BLOCK) << 1] = 0

    def held(self) -> int:
        """Bytes its blocks hold."""
        return sum(len(part) for part in (*self._heads, *self._texts) if part is not None)


_IN_BLOCK = (1 << BLOCK_BITS) - 1
_ONE_BYTE = [chr(code) for code in range(128)]  # a one-byte rest's str, made once
