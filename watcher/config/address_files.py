"""``addresses_file:`` on a ``new_transactions`` rule: a plain file of addresses, one per line,
``#`` comments and blank lines ignored, path relative to the rule file, read with the rules (so
on every reload too). Each bad line is one ``FILE:LINE: message`` problem; the file's addresses
join the rule's ``addresses`` (``RuleAddresses``) before the rule is validated.

A file's addresses are kept packed (``PackedAddresses``): 32 bytes a key in one ``bytes``, not a
44-character str (about 93 bytes, and a slot wherever it is listed). A million addresses take
40 MB rather than 100 MB and more; a str is made when one is asked for (about 3 us).

A job's targets (``watcher.kinds.ruleset.Job``) are such sequences, never copied into a list:
the listed ones and the packed lists joined (``JoinedTargets``), or those of the shards an
instance holds (``PickedTargets``). An instance that holds a share of the shards keeps in memory
only the keys of its share (``PackedAddresses.hold_only``): the whole list goes to a file of its
own, read when a key outside the share is asked for.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import weakref
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import IO, Annotated, Any, overload

from pydantic import GetCoreSchemaHandler, GetPydanticSchema
from pydantic_core import core_schema

from watcher.config.rule_models import Pubkeys, check_pubkey
from watcher.config.yamlload import MAX_BYTES
from watcher.config.yamlpos import display_path
from watcher.core.errors import Problem

KEY = "addresses_file"


def read_addresses(path: Path, listed: Sequence[str] = ()) -> tuple[PackedAddresses, list[Problem]]:
    """The file's addresses in order, packed, and its problems (``listed``: the rule's own
    ``addresses``; an address already there, or twice in the file, is a problem). A file read
    again unchanged, with the same ``listed``, gives the list it gave before while that list is
    still held (``LastReads``)."""
    shown = display_path(path)
    nothing = PackedAddresses(())
    try:
        if path.stat().st_size > MAX_BYTES:
            limit = f"larger than the limit of {MAX_BYTES // (1024 * 1024)} MiB"
            return nothing, [Problem(shown, None, f"{KEY}: {limit}")]
        raw = path.read_bytes()
        read = LAST_READS.read(path, raw, listed)
        if read.packed is not None:
            return read.packed, []
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return nothing, [Problem(shown, None, f"{KEY}: not UTF-8 text")]
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return nothing, [Problem(shown, None, f"{KEY}: cannot read {shown}: {reason}")]
    del raw
    already = set(listed)
    # Each key packed as it is read, with its hash and line: no str kept per address (a
    # million would hold 100 MB until the rule is built). Repeats are found once packed.
    data, hashes, lines = bytearray(), array("I"), array("I")
    problems: list[Problem] = []
    for number, line in enumerate(_lines(text), start=1):
        value = _value(line)
        if not value:
            continue
        try:
            check_pubkey(value)
        except ValueError as exc:
            problems.append(Problem(shown, number, str(exc)))
            continue
        if value in already:
            problems.append(Problem(shown, number, f"{value} is already in the rule's addresses"))
            continue
        data += decode_key(value)
        hashes.append(_hash32(value))
        lines.append(number)
    del text
    packed = PackedAddresses.packed(bytes(data), hashes)
    del data, hashes
    repeats = packed.repeats()
    if repeats:
        for position, first in repeats:
            message = f"duplicate address {packed[position]} (first on line {lines[first]})"
            problems.append(Problem(shown, lines[position], message))
        problems.sort(key=lambda problem: problem.line or 0)
    if not problems:
        LAST_READS.keep(read, packed)
    return packed, problems


@dataclass(frozen=True)
class FileRead:
    """A file's read: where, what it held (a digest) and the rule's listed addresses beside it,
    and the list an earlier read of the same gave (None: none held any more)."""

    path: Path
    digest: bytes
    listed: frozenset[str]
    packed: PackedAddresses | None


class LastReads:
    """The packed list each file's last read gave, while the rules in force hold it (a weak
    reference: a rule dropped frees its list). A reload reads every file again: an unchanged
    million addresses would otherwise be packed a second time, 40 MB beside the first until
    the old rules are dropped, and the seconds it takes."""

    def __init__(self) -> None:
        self._last: dict[Path, tuple[bytes, frozenset[str], weakref.ref[PackedAddresses]]] = {}

    def read(self, path: Path, raw: bytes, listed: Sequence[str]) -> FileRead:
        where, digest = path.resolve(), hashlib.blake2b(raw, digest_size=16).digest()
        wanted = frozenset(listed)
        last = self._last.get(where)
        packed = None
        if last is not None and last[0] == digest and last[1] == wanted:
            packed = last[2]()
        return FileRead(where, digest, wanted, packed)

    def keep(self, read: FileRead, packed: PackedAddresses) -> None:
        self._last[read.path] = (read.digest, read.listed, weakref.ref(packed))


LAST_READS = LastReads()


BLOCK_CHARS = 1 << 20


def _lines(text: str) -> Iterator[str]:
    """``text.splitlines()`` a block at a time: a list of every line of a file of 200,000
    would be held at once (a str each)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + BLOCK_CHARS)
        end = len(text) if end < 0 else end + 1  # a cut after a line feed ends a line
        yield from text[start:end].splitlines()
        start = end


def _value(line: str) -> str:
    """A line's address, or "" (a blank line or a comment)."""
    return line.split("#", 1)[0].strip()


def with_address_file(
    raw: Mapping[str, Any], rule_file: Path
) -> tuple[dict[str, Any], list[Problem]] | None:
    """The rule's mapping with the file's addresses added to ``addresses`` (the key itself
    kept), and the file's problems; None when the rule names no file (or not as text: the
    model then says so)."""
    name = raw.get(KEY)
    if not isinstance(name, str) or not name.strip():
        return None
    listed = raw.get("addresses") or []
    listed = list(listed) if isinstance(listed, list) else []
    path = rule_file.parent / name.strip()
    addresses, problems = read_addresses(path, [a for a in listed if isinstance(a, str)])
    if problems:
        return dict(raw), problems
    if not addresses:
        return {**raw, "addresses": listed}, []
    # The listed ones are validated with the rule (their problems point at their lines); the
    # file's were checked as they were read.
    return {**raw, "addresses": _FromFile(listed, addresses)}, []


@dataclass(frozen=True)
class _FromFile:
    """What the rule's ``addresses`` validate from: those listed (as written) and the file's."""

    listed: list[Any]
    packed: PackedAddresses


def _listed_then_packed(value: Any, handler: core_schema.ValidatorFunctionWrapHandler) -> Any:
    if isinstance(value, RuleAddresses):
        return value
    if isinstance(value, _FromFile):
        listed = handler(value.listed) if value.listed else ()
        return RuleAddresses(tuple(listed), value.packed)
    return handler(value)


def _addresses_schema(_: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
    return core_schema.no_info_wrap_validator_function(
        _listed_then_packed,
        handler.generate_schema(Pubkeys),
        serialization=core_schema.plain_serializer_function_ser_schema(list),
    )


# A rule's ``addresses``: the listed ones as ``Pubkeys`` (a tuple), or with an ``addresses_file``
# those and the file's packed ones (``RuleAddresses``).
Addresses = Annotated[Sequence[str], GetPydanticSchema(_addresses_schema)]


# -- packed keys -------------------------------------------------------------------------------

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


def _hash32(text: str) -> int:
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
        made = self.packed(data, array("I", (_hash32(address) for address in addresses)))
        self._keys, self._count, self._fingerprint = made._keys, made._count, None
        self._hashes, self._positions = made._hashes, made._positions
        self._made, self._known, self._keep, self._every = {}, {}, made._keep, False

    @staticmethod
    def packed(data: bytes, hashes: array[int]) -> PackedAddresses:
        """The keys of ``data`` (32 bytes each), ``hashes`` their texts' (``_hash32``)."""
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
        wanted = _hash32(value)
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
            self._fingerprint = _fingerprint(keys)
        return self._fingerprint

    def __repr__(self) -> str:
        return f"PackedAddresses(<{len(self)} addresses>)"


NOT_HELD = 0xFFFFFFFF  # a slot of ``HeldKeys``: that key is on the file only
SPILL_READ = 1 << 20  # bytes a pass over a spilled list reads at once


def _fingerprint(data: bytes) -> bytes:
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
        return Spilled(file, len(data) // KEY_BYTES, _fingerprint(data))

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


class RuleAddresses(JoinedTargets):
    """A rule's ``addresses`` with an ``addresses_file``: those listed in the rule (``listed``),
    then the file's (``packed``), none in both."""

    __slots__ = ("_listed_set", "listed", "packed")

    def __init__(self, listed: tuple[str, ...], packed: PackedAddresses) -> None:
        super().__init__((listed, packed))
        self.listed, self.packed = listed, packed
        self._listed_set = frozenset(listed)

    def __contains__(self, value: object) -> bool:
        return value in self._listed_set or value in self.packed

    def __repr__(self) -> str:
        return f"RuleAddresses({self.listed!r}, {self.packed!r})"


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
