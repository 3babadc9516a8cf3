"""A rule file's addresses kept packed: 32 bytes a key, a str made when one is asked for."""

from __future__ import annotations

import tempfile
from array import array
from pathlib import Path

import base58
import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.config.packed_keys import (
    RECENT,
    JoinedTargets,
    PackedAddresses,
    decode_key,
    encode_key,
)

keys = st.binary(min_size=32, max_size=32).map(lambda raw: base58.b58encode(raw).decode())


def key(number: int) -> str:
    return base58.b58encode(number.to_bytes(32, "big")).decode()


@given(st.binary(min_size=32, max_size=32))
def test_a_key_reads_back_as_base58_does(raw: bytes) -> None:
    text = base58.b58encode(raw).decode()
    assert encode_key(raw) == text
    assert decode_key(text) == raw


def test_keys_of_leading_zero_bytes_keep_their_ones() -> None:
    for raw in (bytes(32), bytes(31) + b"\x01", b"\x00\x00" + b"\xff" * 30):
        assert encode_key(raw) == base58.b58encode(raw).decode()


@given(st.lists(keys, unique=True, max_size=40), st.lists(keys, max_size=10))
def test_the_addresses_in_their_order_and_membership_exact(
    addresses: list[str], others: list[str]
) -> None:
    packed = PackedAddresses(addresses)
    assert list(packed) == addresses
    assert len(packed) == len(addresses)
    assert [packed[i] for i in range(len(addresses))] == addresses
    assert packed[1:3] == addresses[1:3]
    for address in addresses:
        assert address in packed
    for other in others:
        assert (other in packed) == (other in addresses)
    assert object() not in packed


@given(st.lists(keys, unique=True, max_size=30), st.data())
def test_without_and_common(addresses: list[str], data: st.DataObject) -> None:
    packed = PackedAddresses(addresses)
    gone = data.draw(st.sets(st.sampled_from(addresses))) if addresses else set()
    rest = packed.without(gone)
    assert list(rest) == [a for a in addresses if a not in gone]
    assert all((a in rest) == (a not in gone) for a in addresses)
    other = PackedAddresses([*sorted(gone), key(1)] if key(1) not in addresses else sorted(gone))
    assert sorted(packed.common(other)) == sorted(gone)


def test_equal_by_their_keys_and_order() -> None:
    a, b = key(1), key(2)
    assert PackedAddresses([a, b]) == PackedAddresses([a, b])
    assert hash(PackedAddresses([a, b])) == hash(PackedAddresses([a, b]))
    assert PackedAddresses([a, b]) != PackedAddresses([b, a])


@given(st.lists(st.integers(min_value=0, max_value=6), max_size=25))
def test_repeats_name_each_later_position_and_the_first(numbers: list[int]) -> None:
    packed = PackedAddresses.packed(
        b"".join(n.to_bytes(32, "big") for n in numbers),
        array("I", (hash(key(n)) & 0xFFFFFFFF for n in numbers)),
    )
    first = {n: numbers.index(n) for n in numbers}
    assert packed.repeats() == [(at, first[n]) for at, n in enumerate(numbers) if first[n] != at]


@given(
    st.lists(st.lists(keys, max_size=6), max_size=4),
    st.integers(-12, 12),
    st.integers(-12, 12),
    st.sampled_from([None, 1, 2, -1]),
)
def test_joined_targets_slice_as_the_list_of_their_parts_does(
    parts: list[list[str]], start: int, stop: int, step: int | None
) -> None:
    joined = JoinedTargets(
        tuple(
            PackedAddresses(list(dict.fromkeys(part))) if i % 2 else tuple(part)
            for i, part in enumerate(parts)
        )
    )
    whole = list(joined)
    assert whole == [
        t for i, part in enumerate(parts) for t in (list(dict.fromkeys(part)) if i % 2 else part)
    ]
    assert joined[start:stop:step] == whole[start:stop:step]


def test_a_list_keeps_every_str_it_made_when_told_and_else_its_last() -> None:
    """A sweep asks for each address once a round: a list told to keep them all (the rule set
    does when its lists are short, ``ALL_KEPT`` in all) then makes none again, another only
    keeps its last RECENT."""
    count = RECENT + 100
    kept = PackedAddresses([key(n) for n in range(1, count + 1)])
    kept.keep_every_str(True)
    made = [kept[i] for i in range(len(kept))]
    assert all(kept[i] is made[i] for i in range(len(kept)))
    assert all(a is b for a, b in zip(kept, made, strict=True))  # a pass gives the kept ones
    recent = PackedAddresses([key(n) for n in range(1, count + 1)])
    made = [recent[i] for i in range(len(recent))]
    assert made == [key(n) for n in range(1, count + 1)]
    again = [recent[i] is made[i] for i in range(len(recent))]
    assert again.count(False) >= len(recent) - RECENT
    kept.keep_every_str(False)  # a reload made the rules' lists long: back to the last RECENT
    assert [kept[i] for i in range(len(kept))] == made
    assert [kept[i] is made[i] for i in range(len(kept))].count(False) >= count - RECENT


@given(st.lists(keys, unique=True, min_size=1, max_size=40), st.data())
def test_a_list_holding_a_share_answers_as_the_whole(
    addresses: list[str], data: st.DataObject
) -> None:
    packed, whole = PackedAddresses(addresses), PackedAddresses(addresses)
    share = data.draw(st.lists(st.integers(0, len(addresses) - 1)))
    assert packed.hold_only(share)
    assert packed.held_count() == len(set(share))
    assert list(packed) == addresses
    assert [packed[i] for i in range(len(addresses))] == addresses
    assert packed[-1] == addresses[-1]
    assert all(address in packed for address in addresses)
    assert key(0) not in packed or key(0) in addresses
    assert packed == whole and hash(packed) == hash(whole)
    assert list(packed.without(addresses[:1])) == addresses[1:]
    assert packed.common(whole) == addresses == whole.common(packed)
    # Another share, then the whole list again: read back from the file each time.
    assert packed.hold_only(range(len(addresses) - 1, -1, -1))
    assert packed.held_count() == len(addresses) and list(packed) == addresses


def test_a_share_keeps_only_its_keys_in_memory() -> None:
    addresses = [key(n) for n in range(1, 20_001)]
    packed = PackedAddresses(addresses)
    assert packed.held_count() == 20_000
    assert packed.hold_only(range(0, 20_000, 4))
    assert packed.held_count() == 5_000
    assert packed[1] == addresses[1] and packed[4] == addresses[4]
    assert packed != PackedAddresses(addresses[1:])


def test_without_a_file_for_the_rest_every_key_stays(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    addresses = [key(n) for n in range(1, 101)]
    packed = PackedAddresses(addresses)
    assert not packed.hold_only([1, 2])
    assert packed.held_count() == 100 and list(packed) == addresses
