"""JSON through orjson, with the standard library behind it for what orjson refuses.

orjson is several times faster than ``json`` at the sizes the daemon reads and writes on every
poll (a request's body, an answer, a target's state), which showed in a 100,000-address sweep.
What orjson refuses is read (or written) by ``json`` exactly as before.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson


def encode_json(payload: Any) -> bytes:
    """A request's body: compact UTF-8 JSON (what httpx's ``json=`` sends). orjson is about five
    times faster than the standard library here, which showed in a 100,000-address sweep; what
    it cannot encode (integers beyond 64 bits) goes through ``json``."""
    try:
        return orjson.dumps(payload)
    except orjson.JSONEncodeError:
        return json.dumps(
            payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()


def decode_json(content: bytes | str) -> Any:
    """An answer's body. orjson reads what a node sends; what it refuses (NaN, UTF-16, nesting
    past 1024, lone surrogates) is read by ``json`` as before, which decides: a value,
    ``ValueError`` or ``RecursionError``. orjson reads an integer beyond 64 bits as a float;
    every integer of the answer models is strict, so such an answer is still refused."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)


_STORED: Final = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def encode_stored(value: Any) -> str:
    """What the state store keeps (a target's state, an alert's facts): compact and key-sorted,
    so that the same value always serialises to the same text. orjson is about ten times faster
    than ``json`` here, where every poll that changes a state serialises it (the store's largest
    share of a large sweep's CPU, bench/README.md). What orjson refuses (integers beyond 64 bits)
    goes through ``json``. Unlike ``json``, orjson writes NaN and infinities as ``null``: the
    numbers of a state come from answers the models validated, which hold none."""
    try:
        return orjson.dumps(value, option=_STORED).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
