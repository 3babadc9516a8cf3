"""Whether a string is the base58 form of exactly N bytes, without decoding it.

Every answer's signatures (64 bytes) and keys (32), and every address of a rule file, are
checked. Decoding in Python (a multiply per character) cost 30 µs a signature: more than the
rest of a poll. This check is two string comparisons in C: the alphabet is in ASCII order, so
two base58 numerals without leading '1's compare as numbers when compared by (length, text).
A string of k leading '1's (k zero bytes) and numeral r decodes to N bytes exactly when r's
value needs N - k bytes: 256^(N-k-1) <= r < 256^(N-k), both bounds precomputed.
"""

from __future__ import annotations

import functools
import re
from functools import cache
from typing import Final

ALPHABET: Final = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_NUMERAL: Final = re.compile(r"[1-9A-HJ-NP-Za-km-z]*")


def _encode(number: int) -> str:
    digits = []
    while number:
        number, digit = divmod(number, 58)
        digits.append(ALPHABET[digit])
    return "".join(reversed(digits))


@cache
def _bounds(nbytes: int) -> tuple[tuple[int, str], tuple[int, str]]:
    """(length, numeral) of 256^(nbytes-1) and of 256^nbytes."""
    low, high = _encode(256 ** (nbytes - 1)), _encode(256**nbytes)
    return (len(low), low), (len(high), high)


def is_base58_of(value: str, size: int, *, remember: bool = True) -> bool:
    """Whether ``value`` is base58 that decodes to exactly ``size`` bytes. ``remember``: a
    32-byte key's answer is kept (keys come back every poll: 6,455 gossip nodes); a rule
    file's keys, checked once a load, are not (a million addresses would fill the cache, about
    100 bytes each, and a load reads them in order: a bounded cache of them never hits)."""
    if size == 32 and remember:
        return _is_key(value)
    return _check(value, size)


# Room for the keys answers show again and again (6,455 gossip nodes, the vote accounts and
# their identities): about 3 MB at most.
@functools.lru_cache(maxsize=2**15)
def _is_key(value: str) -> bool:
    return _check(value, 32)


def _check(value: str, size: int) -> bool:
    if len(value) > 2 * size or _NUMERAL.fullmatch(value) is None:
        return False
    numeral = value.lstrip("1")
    needed = size - (len(value) - len(numeral))  # bytes the numeral must fill
    if needed <= 0:
        return needed == 0 and not numeral
    low, high = _bounds(needed)
    return low <= (len(numeral), numeral) < high
