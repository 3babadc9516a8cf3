"""Freed memory handed back to the system (glibc, as on the machines the daemon runs on)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from watcher.core.allocator import hand_back_freed


def resident_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_what_was_freed_leaves_the_process() -> None:
    # 50 MB in blocks under the allocator's mmap threshold (its heap, as a sweep's answers and
    # lists are), then one kept above them: free() alone cannot give back what lies below it.
    blocks = [bytearray(100_000) for _ in range(500)]
    kept = bytearray(100_000)
    del blocks
    before = resident_mb()
    assert hand_back_freed()
    assert resident_mb() < before - 40
    assert len(kept) == 100_000


FREED_AFTER_A_BIG_BLOCK = """
import sys
from pathlib import Path
from watcher.core.allocator import settle_allocator

if sys.argv[1] == "settled":
    assert settle_allocator()
big = bytearray(8 << 20)
del big  # glibc on its own now keeps every block under 8 MiB in its heap
blocks = [bytearray(600_000) for _ in range(100)]
kept = bytearray(600_000)
del blocks
rss = next(line for line in Path("/proc/self/status").read_text().splitlines()
           if line.startswith("VmRSS:"))
print(int(rss.split()[1]) // 1024)
"""


def test_a_settled_allocator_gives_back_large_blocks_as_they_are_freed() -> None:
    def resident_after(mode: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", FREED_AFTER_A_BIG_BLOCK, mode],
            capture_output=True,
            text=True,
            check=True,
        )
        return int(done.stdout)

    assert resident_after("settled") < resident_after("as glibc starts") - 40
