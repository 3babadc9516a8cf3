"""``watcher.kinds.sources.vote_accounts``: the sweeps of one tick share one getVoteAccounts answer
per reader; a later tick calls again; outside a tick only a call in flight is shared; a failed call
is not handed to the next read."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from watcher.kinds import SOURCES, base
from watcher.kinds.sources import vote_accounts
from watcher.ledger.batching import SharedReads
from watcher.ledger.models import VoteAccounts


class Reader:
    """A ledger answering getVoteAccounts, counting its calls; ``fail`` raises the next one."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False
        self.shared_reads = SharedReads(cast(Any, self))  # never reads an account

    async def get_vote_accounts(self) -> VoteAccounts:
        self.calls += 1
        await asyncio.sleep(0)  # a real call yields: the other readers see it in flight
        if self.fail:
            self.fail = False
            raise ConnectionError("down")
        return VoteAccounts(current=[], delinquent=[])


def ledger(reader: Reader) -> base.LedgerReader:
    return cast(base.LedgerReader, cast(Any, reader))


async def test_the_sweeps_of_a_tick_share_one_call_and_the_next_tick_calls_again() -> None:
    reader = Reader()

    async def sweep() -> VoteAccounts:
        return await vote_accounts.read(ledger(reader))

    with vote_accounts.sharing(vote_accounts.Tick()):
        first = await sweep()
        # A later sweep of the same tick (another source), and tasks it starts, read the same.
        again, *polls = await asyncio.gather(sweep(), *(sweep() for _ in range(10)))
    assert reader.calls == 1
    assert again is first and all(poll is first for poll in polls)
    with vote_accounts.sharing(vote_accounts.Tick()):
        assert await sweep() is not first
    assert reader.calls == 2


async def test_each_reader_has_its_own_answer() -> None:
    a, b = Reader(), Reader()
    with vote_accounts.sharing(vote_accounts.Tick()):
        await asyncio.gather(vote_accounts.read(ledger(a)), vote_accounts.read(ledger(b)))
    assert (a.calls, b.calls) == (1, 1)


async def test_outside_a_tick_only_a_call_in_flight_is_shared() -> None:
    reader = Reader()
    await asyncio.gather(*(vote_accounts.read(ledger(reader)) for _ in range(5)))
    assert reader.calls == 1
    await vote_accounts.read(ledger(reader))
    assert reader.calls == 2


async def test_a_failed_call_is_not_handed_to_the_next_read() -> None:
    reader = Reader()
    reader.fail = True
    with vote_accounts.sharing(vote_accounts.Tick()):
        with pytest.raises(ConnectionError):
            await vote_accounts.read(ledger(reader))
        assert await vote_accounts.read(ledger(reader)) == VoteAccounts(current=[], delinquent=[])
    assert reader.calls == 2


def test_every_source_calling_get_vote_accounts_shares_the_ticks_call() -> None:
    """So that ``watcher check`` counts one call a tick (``SourceFacts.per_tick``), as made."""
    readers = {
        name: source.facts.per_tick
        for name, source in SOURCES.items()
        if "getVoteAccounts" in source.facts.methods
    }
    assert readers == {name: ("getVoteAccounts",) for name in ("votes", "vat", "nodes")}
