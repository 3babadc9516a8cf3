"""Freed memory handed back to the system.

Python hands the memory of objects larger than 512 bytes to the C allocator, and glibc's keeps
what is freed inside its heap for later use: after reading a million addresses' rules, or a
sweep of a million polls, the process holds megabytes it no longer uses (at a million
addresses shared by four instances, 16 MB each after the first sweep: bench/README).
``malloc_trim`` returns the heap's free pages. It takes a few milliseconds, so it runs after
work that made many objects, not on a timer.

Settings made before the daemon reads its rules keep that room from growing in the first place
(``settle_allocator``): two arenas in all rather than one per thread that ever allocated (the
reload's reading, the scrapes' and the database's threads each left theirs), and blocks of 512
KiB or more always mapped on their own, given back as soon as they are freed (glibc raises that
threshold to the largest block freed so far, up to 32 MiB: after a packed list or a sweep's list
of results, every block below it went to the heap). 512 KiB, not glibc's starting 128: the
event loop reads each answer into a 256 KiB buffer, which mapped and unmapped per request cost
0.1 system call pairs a poll; and the heap's top trimmed only past 1 MiB (glibc's own rule,
twice the threshold), not after each such buffer. With them, four instances sharing 200,000
addresses peaked at 133-134 MiB each against 138-143, and the million's at 194-195 MiB
(bench/README). Where the C library is not glibc (musl, macOS), nothing happens.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENAS = 2
MMAP_THRESHOLD = 512 * 1024
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD


# The process's own symbols: the C library it runs on, with no search for its file (which
# ``ctypes.util.find_library`` makes by running ``ldconfig``, at every start).
_PROCESS = ctypes.CDLL(None)


def _glibc(name: str) -> Callable[..., int] | None:
    function: Callable[..., int] | None = getattr(_PROCESS, name, None)
    return function


_TRIM = _glibc("malloc_trim")
_MALLOPT = _glibc("mallopt")


def settle_allocator() -> bool:
    """At most ``ARENAS`` arenas, and fixed mmap and trim thresholds; whether they are set
    (glibc)."""
    if _MALLOPT is None:
        return False
    settings = (
        (M_ARENA_MAX, ARENAS),
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
    )
    return all(_MALLOPT(option, value) == 1 for option, value in settings)


def hand_back_freed() -> bool:
    """Returns the allocator's free pages to the system; whether it could (glibc)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
