"""The JSON of requests and answers (watcher.ledger.wire): orjson where it can, and exactly the
standard library's reading of what orjson refuses, so an odd answer is read as it always was."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from watcher.core.fastjson import decode_json, encode_json
from watcher.ledger.models import U64

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_a_request_body_reads_back_as_the_payload(payload: Any) -> None:
    assert json.loads(encode_json(payload)) == payload


@pytest.mark.parametrize(
    "body",
    [
        b'{"result": NaN}',  # the standard library's extension
        '{"result": "\u00e9"}'.encode("utf-16"),
        b'{"result": "\\ud800"}',  # a lone surrogate
        b"[" * 1500 + b"]" * 1500,  # deeper than orjson goes, within the interpreter's limit
    ],
)
def test_what_orjson_refuses_is_read_as_the_standard_library_reads_it(body: bytes) -> None:
    try:
        expected: Any = json.loads(body)
    except RecursionError:
        with pytest.raises(RecursionError):
            decode_json(body)
        return
    got = decode_json(body)
    if isinstance(expected, dict) and isinstance(expected.get("result"), float):
        assert math.isnan(got["result"])
    else:
        assert got == expected


@pytest.mark.parametrize("body", [b"", b"<html>", b'{"a": 1', b"\xff\xfe\x00"])
def test_garbage_is_a_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):
        decode_json(body)


def test_an_answer_with_an_integer_beyond_64_bits_is_still_refused() -> None:
    """orjson reads such an integer as a float; every integer of the answer models is strict,
    so the answer is refused as before (then a u64 out of range, now not an integer)."""
    value = decode_json(b'{"result": 123456789012345678901234567890}')["result"]
    with pytest.raises(ValidationError):
        TypeAdapter(U64).validate_python(value)
    with pytest.raises(ValidationError):
        TypeAdapter(U64).validate_python(json.loads(b"123456789012345678901234567890"))


def test_an_integer_beyond_64_bits_is_still_encoded() -> None:
    assert encode_json({"n": 2**70}) == b'{"n":1180591620717411303424}'
