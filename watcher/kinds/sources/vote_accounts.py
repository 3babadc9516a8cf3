"""One getVoteAccounts per tick serves every kind reading it: the ``votes`` source's kinds,
``vat_eligibility`` (``vat``) and ``version_drift`` (``nodes``). On mainnet the answer is about
1 MB, so the sources that read it ask ``read`` rather than the ledger.

The sweeps the scheduler starts together (a ``Tick``: the jobs of one interval tick at once)
share one answer per reader (endpoint), however many sources and targets they poll; a rule test
gives each of its steps one. Outside a tick (a catch-up sweep, a test sweeping by hand) only
calls in flight are shared. A failed call is not shared once failed: the next read calls again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from watcher.kinds import base
from watcher.ledger.models import VoteAccounts


class Tick:
    """The answers of the sweeps started together, by reader (``id`` of the reader)."""

    def __init__(self) -> None:
        self.answers: dict[int, asyncio.Task[VoteAccounts]] = {}


_TICK: ContextVar[Tick | None] = ContextVar("vote_accounts_tick", default=None)
# Outside a tick: the calls in flight, by reader, each forgotten once it ends.
_IN_FLIGHT: dict[int, asyncio.Task[VoteAccounts]] = {}


@contextlib.contextmanager
def sharing(tick: Tick) -> Iterator[None]:
    """The sweeps run inside (and the tasks they start) share ``tick``'s answers."""
    token = _TICK.set(tick)
    try:
        yield
    finally:
        _TICK.reset(token)


async def read(ledger: base.LedgerReader) -> VoteAccounts:
    """getVoteAccounts of ``ledger``, shared as the module says."""
    tick = _TICK.get()
    shared = _IN_FLIGHT if tick is None else tick.answers
    key = id(ledger)
    task = shared.get(key)
    if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
        task = asyncio.get_running_loop().create_task(ledger.get_vote_accounts())
        shared[key] = task
        if tick is None:
            task.add_done_callback(lambda done: _forget(key, done))
    # Shielded: a poll cancelled (a stop) does not cancel the call the others wait on.
    return await asyncio.shield(task)


def _forget(key: int, done: asyncio.Task[VoteAccounts]) -> None:
    if _IN_FLIGHT.get(key) is done:
        del _IN_FLIGHT[key]
