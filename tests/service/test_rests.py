"""``Rests``: a short ASCII text per position, in blocks of bytearrays."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.service.rests import BLOCK_BITS, LONGEST, Rests

SIGNATURE = "5" * 88  # the longest base58 signature


@pytest.mark.parametrize(
    ("rest", "kept"),
    [
        ("S" + SIGNATURE, "S" + SIGNATURE),  # a cursor's signature and its flag: fits
        ("S", "S"),  # an address with no history yet
        ("S" + SIGNATURE + "x", None),  # one byte past the longest: not kept
        ("", None),  # nothing to tell apart from no rest
        ("Sé", None),  # not ASCII
    ],
)
def test_what_a_slot_keeps(rest: str, kept: str | None) -> None:
    rests = Rests(3)
    rests.put(1, "T" + SIGNATURE)
    rests.put(1, rest)  # a rest that does not fit leaves none, never the older one
    assert (rests.get(0), rests.get(1), rests.get(2)) == (None, kept, None)
    assert rests.known(1) is (kept is not None)


COUNT = 3 << BLOCK_BITS  # three blocks' slots
positions = st.one_of(st.integers(0, 9), st.integers(0, COUNT - 1))
actions = st.lists(
    st.tuples(
        positions,
        st.one_of(st.none(), st.text(st.characters(max_codepoint=0x7F), max_size=LONGEST + 2)),
    ),
    max_size=40,
)


@given(actions)
def test_rests_are_what_a_dict_of_the_rests_that_fit_would_be(
    moves: list[tuple[int, str | None]],
) -> None:
    rests, model = Rests(COUNT), dict[int, str]()
    for index, rest in moves:
        if rest is None:
            rests.drop(index)
            model.pop(index, None)
        else:
            rests.put(index, rest)
            if 0 < len(rest) <= LONGEST:
                model[index] = rest
            else:
                model.pop(index, None)
    assert len(rests) == COUNT
    kept = {index: rests.get(index) for index in range(COUNT) if rests.known(index)}
    assert kept == model
    # A block's lengths are made at its first rest, its texts at its first rest of two bytes
    # or more.
    puts = [(index >> BLOCK_BITS, len(rest)) for index, rest in moves if rest is not None]
    heads = {block for block, length in puts if 0 < length <= LONGEST}
    texts = {block for block, length in puts if 1 < length <= LONGEST}
    assert rests.held() == (len(heads) * 2 + len(texts) * LONGEST) << BLOCK_BITS


def test_a_million_targets_hold_nothing_until_their_polls_are_quiet() -> None:
    rests = Rests(1_000_000)
    assert rests.held() == 0 and rests.get(999_999) is None
    rests.drop(999_999)
    assert rests.held() == 0
    rests.put(999_999, "S")  # no history: two bytes a target of its block
    assert rests.held() == 2_048
    rests.put(999_998, "S" + SIGNATURE)  # a signature: its block's texts too
    assert rests.held() == 2_048 + 91_136
    assert rests.get(999_999) == "S" and rests.get(999_998) == "S" + SIGNATURE
    assert rests.get(998_976) is None
