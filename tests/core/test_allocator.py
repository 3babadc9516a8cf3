"""Freed memory handed back to the system (glibc, as on the machines the daemon runs on)."""

from __future__ import annotations

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
