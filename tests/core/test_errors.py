"""The pauses of a loop that retries until it works (``watcher.core.errors.RetryPauses``)."""

from __future__ import annotations

import time

from watcher.core.errors import RetryPauses


def test_pauses_double_up_to_the_longest_and_a_success_starts_them_over() -> None:
    pauses = RetryPauses(0.5, 30.0)
    assert [pauses.next() for _ in range(9)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    pauses.reset()
    assert [pauses.next() for _ in range(2)] == [0.5, 1]


async def test_sleep_waits_the_next_pause() -> None:
    pauses = RetryPauses(0.01, 0.02)
    started = time.monotonic()
    for _ in range(3):
        await pauses.sleep()
    assert time.monotonic() - started >= 0.05  # 0.01 + 0.02 + 0.02
    assert pauses.next() == 0.02
