"""One getVoteAccounts per tick serves every kind reading it: the ``votes`` source's kinds,
``vat_eligibility`` (``vat``) and ``version_drift`` (``nodes``). On mainnet the answer is about
1 MB, so the sources that read it ask ``read`` rather than the ledger.

The sweeps the scheduler starts together (a ``Tick``: the jobs of one interval tick at once)
share one answer per reader (endpoint), however many sources and targets they poll; a rule test
gives each of its steps one. Outside a tick (a catch-up sweep, a test sweeping by hand) only
the reader's call in flight is shared (held by the reader, ``shared_reads``). A failed call is not
shared once failed: the next read calls again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from watcher.kinds import base
from watcher.ledger.batching import SharedReads
from watcher.ledger.models import VoteAccounts


class Tick:
    """The answers of the sweeps started together, by reader (its ``shared_reads``)."""

    def __init__(self) -> None:
        self.answers: dict[SharedReads, asyncio.Task[VoteAccounts]] = {}


_TICK: ContextVar[Tick | None] = ContextVar("vote_accounts_tick", default=None)


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
    reads = ledger.shared_reads
    task = reads.vote_accounts if tick is None else tick.answers.get(reads)
    if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
        task = asyncio.get_running_loop().create_task(ledger.get_vote_accounts())
        if tick is None:
            reads.vote_accounts = task
            task.add_done_callback(lambda done: _forget(reads, done))
        else:
            tick.answers[reads] = task
    # Shielded: a poll cancelled (a stop) does not cancel the call the others wait on.
    return await asyncio.shield(task)


def _forget(reads: SharedReads, done: asyncio.Task[VoteAccounts]) -> None:
    if reads.vote_accounts is done:
        reads.vote_accounts = None
