"""``addresses_file:`` on a ``new_transactions`` rule: a plain file of addresses, one per line,
``#`` comments and blank lines ignored, path relative to the rule file, read with the rules (so
on every reload too). Each bad line is one ``FILE:LINE: message`` problem; the file's addresses
join the rule's ``addresses`` (``RuleAddresses``) before the rule is validated.

A file's addresses are kept packed (``watcher.config.packed_keys.PackedAddresses``); with the
rule's listed ones they are its ``RuleAddresses``.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import GetCoreSchemaHandler, GetPydanticSchema
from pydantic_core import core_schema

from watcher.config.packed_keys import (
    JoinedTargets,
    PackedAddresses,
    decode_key,
    digest,
    hash32,
)
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
        hashes.append(hash32(value))
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
        where, digested = path.resolve(), digest(raw)
        wanted = frozenset(listed)
        last = self._last.get(where)
        packed = None
        if last is not None and last[0] == digested and last[1] == wanted:
            packed = last[2]()
        return FileRead(where, digested, wanted, packed)

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
