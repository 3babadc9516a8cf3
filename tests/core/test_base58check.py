"""is_base58_of agrees with decoding (the base58 library) on every string: the real encodings of
N bytes (leading zero bytes included), one byte more or less, and arbitrary text."""

from __future__ import annotations

import base58
from hypothesis import given
from hypothesis import strategies as st

from watcher.core.base58check import ALPHABET, is_base58_of


def decodes_to(value: str, size: int) -> bool:
    try:
        return len(base58.b58decode(value)) == size
    except ValueError:
        return False


@st.composite
def near_sizes(draw: st.DrawFn) -> tuple[int, bytes]:
    """A size, and bytes of that size or one off, with any number of leading zero bytes."""
    size = draw(st.sampled_from([32, 64]))
    length = draw(st.integers(size - 1, size + 1))
    zeros = draw(st.integers(0, length))
    return size, bytes(zeros) + draw(st.binary(min_size=length - zeros, max_size=length - zeros))


@given(near_sizes())
def test_encodings_of_n_bytes_pass_and_of_other_sizes_fail(case: tuple[int, bytes]) -> None:
    size, data = case
    text = base58.b58encode(data).decode()
    assert is_base58_of(text, size) == (len(data) == size) == decodes_to(text, size)


@given(st.sampled_from([32, 64]), st.text(alphabet=ALPHABET + "0OIl+/ ", max_size=100))
def test_any_text_is_judged_as_decoding_would(size: int, text: str) -> None:
    assert is_base58_of(text, size) == decodes_to(text, size)


def test_edges() -> None:
    assert is_base58_of("1" * 32, 32)  # 32 zero bytes
    assert not is_base58_of("1" * 31, 32) and not is_base58_of("1" * 33, 32)
    assert is_base58_of(base58.b58encode(b"\xff" * 64).decode(), 64)
    assert not is_base58_of(base58.b58encode(b"\x01" + b"\x00" * 64).decode(), 64)
    assert not is_base58_of("", 32)
