"""The stop requests (SIGTERM, SIGINT) noted while ``watcher run`` starts, before the event
loop takes the signals over (``watcher.entry`` installs them first thing)."""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequests:
    """SIGTERM and SIGINT from the first line of ``watcher run`` until the event loop takes them
    over: noted, so that the start-up ends in a clean stop (exit 0)."""

    def __init__(self) -> None:
        self.caught: signal.Signals | None = None
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._note)

    def _note(self, signum: int, _frame: object) -> None:
        self.caught = signal.Signals(signum)


_EARLY: list[StopRequests] = []  # the one installed for ``run``, if any


def stop_requests() -> StopRequests:
    """The stop requests noted since the process began (installed now if not yet)."""
    if not _EARLY:
        _EARLY.append(StopRequests())
    return _EARLY[0]
