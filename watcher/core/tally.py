"""What one sweep did, counted where it happens: RPC calls (in the RPC client), alerts
committed, polls whose endpoints disagreed and targets handed back to another instance (in the
daemon), for the round's summary line.

The tally rides a context variable set around one sweep: the tasks the sweep starts inherit it,
so two sweeps running at once (two sources, or one source at two intervals) keep apart counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class RoundTally:
    calls: int = 0  # logical RPC calls (one per call of a batch; retries not counted)
    alerts: int = 0  # alerts committed to the outbox (events, firings, resolutions...)
    disagreements: int = 0  # polls under quorum whose endpoints disagreed (not failures)
    # Balance reads of addresses that moved (``new_transactions``' amounts), each a key of a
    # getMultipleAccounts call and, with tokens, a getTokenAccounts call: rpc.budget pays them.
    balance_reads: int = 0
    token_reads: int = 0  # of the balance reads, those that read token accounts too
    # Targets of the sweep not polled: their shard went to another instance during the sweep.
    handed_back: int = 0


# Per sweep, not per process: the client is shared by sweeps running at once, so only the context
# a call runs in says which sweep made it (a parameter would cross every source's observe).
_CURRENT: ContextVar[RoundTally | None] = ContextVar("watcher_round_tally", default=None)


@contextmanager
def tallying() -> Iterator[RoundTally]:
    """Count what happens in this context (and the tasks it starts) until the block ends."""
    tally = RoundTally()
    token = _CURRENT.set(tally)
    try:
        yield tally
    finally:
        _CURRENT.reset(token)


def count_call(number: int = 1) -> None:
    tally = _CURRENT.get()
    if tally is not None:
        tally.calls += number


def count_alerts(number: int) -> None:
    tally = _CURRENT.get()
    if tally is not None:
        tally.alerts += number


def count_disagreement() -> None:
    tally = _CURRENT.get()
    if tally is not None:
        tally.disagreements += 1


def count_handed_back(number: int) -> None:
    tally = _CURRENT.get()
    if tally is not None:
        tally.handed_back += number


def count_balance_read(tokens: bool = False) -> None:
    tally = _CURRENT.get()
    if tally is not None:
        tally.balance_reads += 1
        tally.token_reads += tokens
