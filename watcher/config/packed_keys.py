"""A list of addresses kept packed (``PackedAddresses``): 32 bytes a key in one ``bytes``, not a
44-character str (about 93 bytes, and a slot wherever it is listed). A million addresses take
40 MB rather than 100 MB and more; a str is made when one is asked for (about 3 us). An
instance that holds a share of the shards keeps in memory only the keys of its share
(``PackedAddresses.hold_only``): the whole list goes to a file of its own, read when a key
outside the share is asked for.

A job's targets (``watcher.kinds.ruleset.Job``) are such sequences, never copied into a list:
the listed ones and the packed lists joined (``JoinedTargets``), or those of the shards an
instance holds (``PickedTargets``).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import IO, overload

_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_DIGIT = {char: value for value, char in enumerate(_ALPHABET)}
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]  # two digits a step: half the divisions
KEY_BYTES = 32
RECENT = 8192  # items made and answers of ``in`` kept (see ``PackedAddresses``)
# Rules whose packed lists hold this many addresses in all keep every str each list made
# (``keep_every_str``, the rule set's call): each sweep would make them all again, a str is about
# 3 us and with its cache entries 190 bytes (a tenth of a quiet poll's CPU, 25 MB at most). In
# all, not per list: a million split into short lists would keep 190 MB.
ALL_KEPT = 131_072


def encode_key(key: bytes) -> str:
    """The base58 text of a 32-byte key."""
    number = int.from_bytes(key, "big")
    pairs = []
    while number >= 3364:
        number, pair = divmod(number, 3364)
        pairs.append(_PAIRS[pair])
    pairs.append(_ALPHABET[number] if number < 58 else _PAIRS[number])
    numeral = "".join(reversed(pairs)).lstrip("1")
    return "1" * (len(key) - len(key.lstrip(b"\0"))) + numeral


def decode_key(text: str) -> bytes:
    """The 32 bytes of a base58 key (``check_pubkey`` passed)."""
    number = 0
    for char in text:
        number = number * 58 + _DIGIT[char]
    return number.to_bytes(KEY_BYTES, "big")


def hash32(text: str) -> int:
    return hash(text) & 0xFFFFFFFF  # a str keeps its hash: a poll's target asks for it once


class PackedAddresses(Sequence[str]):
    """Distinct 32-byte keys, in the order given, packed in one ``bytes`` (or a share of them,
    ``hold_only``); each item is the key's base58 text, made when asked for. Membership by the
    texts' hashes: a sorted array of 32 bits each with the positions beside it, a hit confirmed
    against the key itself. 40 bytes a key in all (12 a key outside a held share). Hashes of
    str differ between processes: an instance is not to be pickled."""

    __slots__ = (
        "__weakref__",
        "_count",
        "_every",
        "_fingerprint",
        "_hashes",
        "_keep",
        "_keys",
        "_known",
        "_made",
        "_positions",
    )
    # The keys: all in one ``bytes``, or once ``hold_only`` ran, those it named (``HeldKeys``).
    # One attribute, swapped at once: a thread may hold while the event loop reads.
    _keys: bytes | HeldKeys
    _count: int
    _fingerprint: bytes | None
    _hashes: array[int]
    _positions: array[int]
    # The last items made and answers of ``in``: a sweep makes a chunk's items for its states'
    # prefetch, then each poll asks for its item again, and whether a rule watches it twice
    # (the rule set's lookup, then the kind's step): each then costs a dict lookup.
    _made: dict[int, str]
    _known: dict[str, bool]
    _keep: int  # how many of each are kept: ``RECENT``, or every one (``keep_every_str``)
    _every: bool  # every one kept: a pass over the list gives the kept strs too

    def __init__(self, addresses: Sequence[str]) -> None:
        """``addresses``: valid base58 keys, no repeats."""
        data = b"".join(decode_key(address) for address in addresses)
        made = self.packed(data, array("I", (hash32(address) for address in addresses)))
        self._keys, self._count, self._fingerprint = made._keys, made._count, None
        self._hashes, self._positions = made._hashes, made._positions
        self._made, self._known, self._keep, self._every = {}, {}, made._keep, False

    @staticmethod
    def packed(data: bytes, hashes: array[int]) -> PackedAddresses:
        """The keys of ``data`` (32 bytes each), ``hashes`` their texts' (``hash32``)."""
        order = sorted(range(len(hashes)), key=hashes.__getitem__)
        return PackedAddresses._from(
            data, array("I", (hashes[index] for index in order)), array("I", order)
        )

    @staticmethod
    def _from(data: bytes, hashes: array[int], positions: array[int]) -> PackedAddresses:
        packed = PackedAddresses.__new__(PackedAddresses)
        packed._keys, packed._count, packed._fingerprint = data, len(data) // KEY_BYTES, None
        packed._hashes, packed._positions = hashes, positions
        packed._made, packed._known = {}, {}
        packed._keep, packed._every = RECENT, False
        return packed

    def keep_every_str(self, every: bool) -> None:
        """Whether every item made (and answer of ``in``) is kept, or the last ``RECENT``."""
        self._keep = 2 * len(self) + 1 if every else RECENT  # answers of ``in`` too
        self._every = every
        if len(self._made) >= self._keep or len(self._known) >= self._keep:
            self._made.clear()
            self._known.clear()

    def repeats(self) -> list[tuple[int, int]]:
        """Each key seen before: (its position, the first position of that key), in order."""
        hashes, positions = self._hashes, self._positions
        found: list[tuple[int, int]] = []
        at = 0
        while at < len(hashes):
            end = at + 1
            while end < len(hashes) and hashes[end] == hashes[at]:
                end += 1
            if end - at > 1:  # a repeat, or two keys of one hash
                first_of: dict[bytes, int] = {}
                for position in sorted(positions[at:end]):
                    first = first_of.setdefault(self.key(position), position)
                    if first != position:
                        found.append((position, first))
            at = end
        return sorted(found)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            made_of, item = self._made.get, self.__getitem__
            return [made_of(i) or item(i) for i in range(*index.indices(len(self)))]
        made = self._made.get(index)
        if made is not None:
            return made
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("address index out of range")
        made = encode_key(self.key(index))
        if len(self._made) >= self._keep:
            self._made.clear()
            self._known.clear()
        self._made[index] = made
        self._known[made] = True
        return made

    def __iter__(self) -> Iterator[str]:
        if self._every:  # the kept strs, not copies of them (a cadence book indexes a pass)
            for index in range(len(self)):
                yield self[index]
            return
        for key in self.keys():
            yield encode_key(key)

    def keys(self) -> Iterator[bytes]:
        """Every key, in order."""
        keys = self._keys
        if isinstance(keys, HeldKeys):
            yield from keys.every()
            return
        for start in range(0, len(keys), KEY_BYTES):
            yield keys[start : start + KEY_BYTES]

    def known_item(self, value: str) -> bool:
        """Whether ``value`` is an item made or found lately (``in`` without a search: a
        False is not an answer, the search may find it)."""
        return self._known.get(value) is True

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        found = self._known.get(value)
        if found is None:
            found = self._position(value) is not None
            if len(self._known) >= self._keep:
                self._known.clear()
            self._known[value] = found
        return found

    def _position(self, value: str) -> int | None:
        wanted = hash32(value)
        hashes = self._hashes
        at = bisect_left(hashes, wanted)
        while at < len(hashes) and hashes[at] == wanted:
            position = self._positions[at]
            if encode_key(self.key(position)) == value:
                return position
            at += 1
        return None

    def key(self, index: int) -> bytes:
        keys = self._keys
        if type(keys) is bytes:
            return keys[index * KEY_BYTES : (index + 1) * KEY_BYTES]
        assert isinstance(keys, HeldKeys)
        return keys.key(index)

    def hold_only(self, positions: Iterable[int]) -> bool:
        """Keeps in memory only the keys at ``positions`` (an instance's share of the list:
        the targets of the shards it holds), the whole list on a file of its own, unlinked,
        that a key elsewhere is read from when asked for (``in``, a pass over the list, the
        next share). Every answer stays the same. False when no such file can be made: the
        keys then all stay in memory."""
        keys = self._keys
        spilled = keys.spilled if isinstance(keys, HeldKeys) else Spilled.of(keys)
        if spilled is None:
            return False
        if self._fingerprint is None:
            self._fingerprint = spilled.fingerprint
        slots = array("I", [NOT_HELD]) * self._count
        held = bytearray()
        for position in positions:
            if slots[position] == NOT_HELD:  # named twice: held once
                slots[position] = len(held) // KEY_BYTES
                held += self.key(position)
        self._keys = HeldKeys(bytes(held), slots, spilled)
        return True

    def held_count(self) -> int:
        """How many keys are in memory (all, until ``hold_only``)."""
        keys = self._keys
        return keys.count if isinstance(keys, HeldKeys) else self._count

    def common(self, other: PackedAddresses) -> list[str]:
        """The addresses in both, in this one's order. A walk of both sorted hash arrays: no
        set of either (200,000 int objects and their set, for each pair of files)."""
        mine, theirs = self._hashes, other._hashes
        found: list[int] = []
        at = there = 0
        while at < len(mine) and there < len(theirs):
            if mine[at] < theirs[there]:
                at += 1
            elif mine[at] > theirs[there]:
                there += 1
            else:
                hashed = mine[at]
                while at < len(mine) and mine[at] == hashed:
                    position = self._positions[at]
                    if encode_key(self.key(position)) in other:
                        found.append(position)
                    at += 1
        return [encode_key(self.key(position)) for position in sorted(found)]

    def without(self, addresses: Collection[str]) -> PackedAddresses:
        """These addresses less ``addresses``, in the same order."""
        gone = {position for value in addresses if (position := self._position(value)) is not None}
        if not gone:
            return self
        kept = [index for index in range(len(self)) if index not in gone]
        renumbered = {old: new for new, old in enumerate(kept)}
        pairs = [
            (hashed, renumbered[position])
            for hashed, position in zip(self._hashes, self._positions, strict=True)
            if position not in gone
        ]
        return self._from(
            b"".join(self.key(index) for index in kept),
            array("I", (hashed for hashed, _ in pairs)),
            array("I", (position for _, position in pairs)),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedAddresses):
            return NotImplemented
        mine, theirs = self._keys, other._keys
        if type(mine) is bytes and type(theirs) is bytes:
            return mine == theirs
        return self._count == other._count and self.fingerprint() == other.fingerprint()

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def fingerprint(self) -> bytes:
        """A digest of every key in order (made once): what equality compares once a list
        holds only a share of its keys."""
        if self._fingerprint is None:
            keys = self._keys
            assert type(keys) is bytes  # a held list's is made when it is spilled
            self._fingerprint = digest(keys)
        return self._fingerprint

    def __repr__(self) -> str:
        return f"PackedAddresses(<{len(self)} addresses>)"


NOT_HELD = 0xFFFFFFFF  # a slot of ``HeldKeys``: that key is on the file only
SPILL_READ = 1 << 20  # bytes a pass over a spilled list reads at once


def digest(data: bytes) -> bytes:
    """A 16-byte digest of ``data`` (a list's keys, a file's text)."""
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclass(frozen=True)
class Spilled:
    """Every key of a list on a temporary file, unlinked at once (the kernel's page cache
    keeps what is read often; the process holds none of it)."""

    file: IO[bytes]
    count: int
    fingerprint: bytes

    @staticmethod
    def of(data: bytes) -> Spilled | None:
        try:
            file = tempfile.TemporaryFile(prefix="watcher-keys-")  # noqa: SIM115 (held open)
            file.write(data)
            file.flush()
        except OSError:
            return None
        return Spilled(file, len(data) // KEY_BYTES, digest(data))

    def key(self, index: int) -> bytes:
        if not 0 <= index < self.count:
            raise IndexError("address index out of range")
        return os.pread(self.file.fileno(), KEY_BYTES, index * KEY_BYTES)

    def every(self) -> Iterator[bytes]:
        size, fd = self.count * KEY_BYTES, self.file.fileno()
        for offset in range(0, size, SPILL_READ):
            block = os.pread(fd, min(SPILL_READ, size - offset), offset)
            for start in range(0, len(block), KEY_BYTES):
                yield block[start : start + KEY_BYTES]


@dataclass(frozen=True)
class HeldKeys:
    """A share of a list's keys in memory (``held``, 32 bytes each, at ``slots[position]``),
    the whole list ``spilled``: 36 bytes a key held and 4 a key elsewhere."""

    held: bytes
    slots: array[int]
    spilled: Spilled

    @property
    def count(self) -> int:
        return len(self.held) // KEY_BYTES

    def key(self, index: int) -> bytes:
        slot = self.slots[index]
        if slot == NOT_HELD:
            return self.spilled.key(index)
        return self.held[slot * KEY_BYTES : (slot + 1) * KEY_BYTES]

    def every(self) -> Iterator[bytes]:
        return self.spilled.every()


class JoinedTargets(Sequence[str]):
    """Sequences of targets one after the other (a job's listed targets, then the packed
    addresses of rule files): an immutable sequence that makes no str until one is asked for."""

    __slots__ = ("_starts", "parts")

    def __init__(self, parts: tuple[Sequence[str], ...]) -> None:
        self.parts = parts
        self._starts: list[int] = []
        total = 0
        for part in parts:
            self._starts.append(total)
            total += len(part)
        self._starts.append(total)

    def __len__(self) -> int:
        return self._starts[-1]

    def placed(self) -> Iterator[tuple[int, Sequence[str]]]:
        """Each part with the position of its first target."""
        return zip(self._starts, self.parts, strict=False)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            part = bisect_right(self._starts, start) - 1
            if step == 1 and start < stop <= self._starts[part + 1]:  # a sweep's chunk: one part
                offset = self._starts[part]
                return list(self.parts[part][start - offset : stop - offset])
            return [self[i] for i in range(start, stop, step)]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("target index out of range")
        part = bisect_right(self._starts, index) - 1
        return self.parts[part][index - self._starts[part]]

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self.parts)

    def __contains__(self, value: object) -> bool:
        return any(value in part for part in self.parts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JoinedTargets):
            return self.parts == other.parts
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"JoinedTargets({self.parts!r})"


class PickedTargets(Sequence[str]):
    """The targets at ``positions`` of a sequence, in that order (a job's targets in the shards
    an instance holds): 4 bytes a target, and no str made before one is asked for."""

    __slots__ = ("_of", "_positions")

    def __init__(self, of: Sequence[str], positions: array[int]) -> None:
        self._of, self._positions = of, positions

    @property
    def positions(self) -> array[int]:
        """The positions picked, in their order."""
        return self._positions

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
