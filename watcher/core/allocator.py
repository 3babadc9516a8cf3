"""Freed memory handed back to the system.

Python hands the memory of objects larger than 512 bytes to the C allocator, and glibc's keeps
what is freed inside its heap for later use: after reading a million addresses' rules, or a
sweep of a million polls, the process holds megabytes it no longer uses (at a million
addresses shared by four instances, 16 MB each after the first sweep: bench/README).
``malloc_trim`` returns the heap's free pages. It takes a few milliseconds, so it runs after
work that made many objects, not on a timer. Where the C library has none (musl, macOS),
nothing happens.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _malloc_trim()


def hand_back_freed() -> bool:
    """Returns the allocator's free pages to the system; whether it could (glibc)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
