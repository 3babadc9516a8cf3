"""Durations as users write them (``500ms``, ``30s``, ``5m``, ``1h``, ``1d``, ``1m30s``) and back.

A duration is one or more ``<number><unit>`` parts, largest unit first, each unit at most once;
numbers may have a fraction (``1.5h``). Units: ``ms``, ``s``, ``m``, ``h``, ``d``. A bare number
has no unit and is refused (``30`` could mean seconds or minutes), except ``0``, which needs none.
Values are float seconds everywhere in the code. A duration is at most 365d.
"""

from __future__ import annotations

import re
from fractions import Fraction

# Largest first: the order parts must appear in, and the order format_duration writes them.
UNIT_SECONDS: dict[str, Fraction] = {
    "d": Fraction(86400),
    "h": Fraction(3600),
    "m": Fraction(60),
    "s": Fraction(1),
    "ms": Fraction(1, 1000),
}
_UNIT_ORDER = list(UNIT_SECONDS)
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_EXAMPLES = "e.g. 500ms, 30s, 5m, 1h, 1d, 1m30s"
# The longest duration anything takes (a poll interval, a silence, a delay): a year. Longer ones
# are mistakes, and unbounded ones overflow the scheduler's and SQLite's date arithmetic.
MAX_DURATION_SECONDS = 365 * 86400
MAX_DURATION_TEXT = "365d"
_MAX_TEXT_LENGTH = 40  # longer text is no duration: refused before any number is read


def parse_duration(value: object) -> float:
    """``"1m30s"`` -> ``90.0``. Raises ``ValueError`` with a message meant for the user.

    Accepts a string, or the number 0. Sums exactly (fractions) so that ``format_duration``
    and ``parse_duration`` round-trip at millisecond precision.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r} ({_EXAMPLES})")
    if not isinstance(value, int | float | str):
        raise ValueError(f"not a duration ({_EXAMPLES})")
    text = str(value).strip()
    if len(text) > _MAX_TEXT_LENGTH:
        raise ValueError(f"not a duration: {text[:20]!r}... is too long")
    if _NUMBER.fullmatch(text):  # from YAML (30) or the environment ("30")
        if float(text) == 0:
            return 0.0
        raise ValueError(f"{value!r} has no unit: write e.g. {text}s or {text}m")
    total = Fraction(0)
    position = 0
    last_unit_index = -1
    for match in _PART.finditer(text):
        if match.start() != position:
            break
        number, unit = match.groups()
        unit_index = _UNIT_ORDER.index(unit)
        if unit_index <= last_unit_index:
            raise ValueError(f"not a duration: {value!r} (units go from largest to smallest)")
        last_unit_index = unit_index
        total += Fraction(number) * UNIT_SECONDS[unit]
        position = match.end()
    if position == 0 or position != len(text):
        raise ValueError(f"not a duration: {value!r} ({_EXAMPLES})")
    if total > MAX_DURATION_SECONDS:
        raise ValueError(f"{value!r} is longer than the limit of {MAX_DURATION_TEXT}")
    return float(total)


def format_duration(seconds: float) -> str:
    """``90.0`` -> ``"1m30s"``: the shortest form ``parse_duration`` reads back (millisecond
    precision; ``0`` -> ``"0s"``)."""
    if seconds < 0:
        raise ValueError(f"negative duration: {seconds!r}")
    millis = round(Fraction(seconds) * 1000)
    if millis == 0:
        return "0s"
    parts = []
    for unit, size in UNIT_SECONDS.items():
        count, millis = divmod(millis, int(size * 1000))
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
