"""When the idle sender claims (``watcher.service.supervisor.deliver_until_stopped``): at once
for a new row (``more_due``), else when its next delivery falls due, at most
``SENDER_LONGEST_IDLE_SECONDS`` later, never twice a second for nothing.

The loop runs on the test's clock: its waits are ``OnTheTestClock``'s, which end at a wake as
the daemon's do and otherwise move the clock on by the whole wait (nothing could have ended it
sooner). The claims are counted at the store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from watcher.alerting.builtin import StateHealth
from watcher.config.sections import DeliverySettings
from watcher.core.outbox_rows import DeliveryRow
from watcher.delivery.channels import Channels
from watcher.delivery.outbox_sender import DELIVERY_DEFAULTS, Sender, SenderStore, SendSettings
from watcher.service.supervisor import (
    SENDER_IDLE_SECONDS,
    SENDER_LONGEST_IDLE_SECONDS,
    deliver_until_stopped,
    idle_seconds,
)
from watcher.state.interface import OutboxStore, StepToCommit, Store
from watcher.state.pg_store import PostgresStore
from watcher.state.store import AsyncSqliteStore
from watcher.testing.postgres import Postgres
from watcher.testing.receivers import JsonReceiver

from support.sending import alert, delivery_settings
from support.values import FakeClock

S = TypeVar("S", bound=OutboxStore)


@dataclass(frozen=True)
class Claim:
    now: float  # the clock the claim was made at
    rows: int  # how many deliveries it took


def counting_claims(store: S, claims: list[Claim]) -> S:
    """``store``, each of its claims recorded in ``claims``."""
    claim_due = store.claim_due

    async def counted(
        now: float, limit: int = 100, group_limit: int = 0, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]:
        rows = await claim_due(now, limit, group_limit, skip_urls)
        claims.append(Claim(now, len(rows)))
        return rows

    store.claim_due = counted  # type: ignore[method-assign]
    return store


class OnTheTestClock:
    """The sender loop's wait on ``clock``. A wake (``more_due``) ends it at once; while a
    worker sends, the worker's end (which sets ``more_due``) ends it; otherwise nothing could
    end it before its time: ``meanwhile`` runs (what happens elsewhere while the sender
    sleeps), then the clock moves on by the whole wait, unless ``meanwhile`` woke the sender.
    The loop stops at the first idle wait that finds ``done`` true."""

    def __init__(
        self,
        clock: FakeClock,
        sender: Sender,
        stopping: asyncio.Event,
        *,
        done: Callable[[], bool],
        meanwhile: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.clock, self.sender, self.stopping = clock, sender, stopping
        self.done, self.meanwhile = done, meanwhile
        self.waits: list[float] = []  # each wait's length, as the loop asked for it

    async def __call__(self, wake: asyncio.Event, seconds: float) -> None:
        assert len(self.waits) < 20, "the sender loop does not settle"
        self.waits.append(seconds)
        if not wake.is_set() and self.sender.sending:
            await wake.wait()
        if wake.is_set():
            return
        if self.done():
            self.stopping.set()
            return
        if self.meanwhile is not None:
            await self.meanwhile()
        if not wake.is_set():
            self.clock.advance(seconds)


def sender_on(
    store: SenderStore,
    receiver: JsonReceiver,
    clock: FakeClock,
    delivery: DeliverySettings = DELIVERY_DEFAULTS,
    *also: str,
) -> Sender:
    """A sender to ``receiver`` (the channel ``ops``) and to the URLs ``also``."""
    # random=0: retries without jitter, the first one delivery.first_retry (2 s) later.
    return Sender(
        store,
        Channels.of({"ops": [receiver.url, *also]}),
        clock=clock,
        settings=SendSettings(delivery, random=lambda: 0.0),
    )


def counted_sender(
    store: SenderStore, receiver: JsonReceiver
) -> tuple[Sender, list[Claim], FakeClock]:
    """``sender_on`` a test clock, each claim of ``store`` recorded in the list."""
    claims: list[Claim] = []
    clock = FakeClock()
    return sender_on(counting_claims(store, claims), receiver, clock), claims, clock


async def queue(store: Store, sender: Sender, key: str, now: float) -> None:
    await store.commit_step(
        StepToCommit.of("signatures", "addr1", {}, [alert(key)], sender.destinations, now)
    )


async def until(predicate: Callable[[], object], within: float) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[AsyncSqliteStore]:
    async with AsyncSqliteStore.open(tmp_path / "watcher.db") as store:
        yield store


# -- the rule -------------------------------------------------------------------------------------


def test_the_idle_wait_runs_until_the_next_due_delivery_within_its_bounds() -> None:
    assert idle_seconds(None, 100.0) == SENDER_LONGEST_IDLE_SECONDS  # nothing pending
    assert idle_seconds(102.0, 100.0) == 2.0  # a retry due in 2 s
    assert idle_seconds(100.1, 100.0) == pytest.approx(0.1)
    assert idle_seconds(100.0 + 3600, 100.0) == SENDER_LONGEST_IDLE_SECONDS  # look again anyway
    # Due already, yet the claim did not take it (another instance holds its URL): soon again.
    assert idle_seconds(99.0, 100.0) == SENDER_IDLE_SECONDS


# -- the loop, on SQLite --------------------------------------------------------------------------


async def test_a_refused_delivery_is_claimed_again_at_its_retry_and_not_before(
    sqlite: AsyncSqliteStore, json_receiver: JsonReceiver
) -> None:
    sender, claims, clock = counted_sender(sqlite, json_receiver)
    start = clock()
    await queue(sqlite, sender, "k1", start)
    json_receiver.refuse(1)
    stopping = asyncio.Event()
    wait = OnTheTestClock(clock, sender, stopping, done=lambda: bool(json_receiver.received))

    await asyncio.wait_for(
        deliver_until_stopped(sender, stopping, StateHealth(), clock, wait), timeout=30
    )

    assert claims == [
        Claim(start, 1),  # refused: retried 2 s later
        Claim(start, 0),  # its worker finished: a look, nothing due
        Claim(start + 2.0, 1),  # the retry's time: sent
        Claim(start + 2.0, 0),  # its worker finished
    ]
    assert [post["title"] for post in json_receiver.received] == ["[warning] treasury: k1"]
    (record,) = await sqlite.history()
    assert [(d.status, d.sent_at) for d in record.deliveries] == [("sent", start + 2.0)]
    assert clock() == start + 2.0 and max(wait.waits) <= SENDER_LONGEST_IDLE_SECONDS


async def test_an_alert_committed_while_the_sender_sleeps_is_sent_at_once(
    sqlite: AsyncSqliteStore, json_receiver: JsonReceiver
) -> None:
    """The daemon's own wait (the event loop's clock): a wake ends it, not its timeout."""
    sender, claims, clock = counted_sender(sqlite, json_receiver)
    stopping = asyncio.Event()
    loop = asyncio.create_task(deliver_until_stopped(sender, stopping, StateHealth(), clock))
    await until(lambda: claims, within=10.0)  # idle now: nothing pending, the longest wait

    await queue(sqlite, sender, "k1", clock())
    sender.more_due.set()  # as the commit path does (watcher.service.committing)
    await until(lambda: json_receiver.received, within=SENDER_LONGEST_IDLE_SECONDS / 2)

    stopping.set()
    sender.more_due.set()
    await asyncio.wait_for(loop, timeout=10)
    assert [claim.rows for claim in claims[:2]] == [0, 1]


async def test_a_quiet_outbox_is_claimed_once_per_longest_wait(
    sqlite: AsyncSqliteStore, json_receiver: JsonReceiver
) -> None:
    """An idle daemon's claims: one per SENDER_LONGEST_IDLE_SECONDS (it was two a second)."""
    sender, claims, clock = counted_sender(sqlite, json_receiver)
    start = clock()
    stopping = asyncio.Event()
    minute = start + 60.0
    wait = OnTheTestClock(clock, sender, stopping, done=lambda: clock() >= minute)

    await asyncio.wait_for(
        deliver_until_stopped(sender, stopping, StateHealth(), clock, wait), timeout=30
    )

    assert len(claims) == 60 / SENDER_LONGEST_IDLE_SECONDS + 1  # at 0, 10, ..., 60 s
    assert wait.waits == [SENDER_LONGEST_IDLE_SECONDS] * len(claims)


async def test_an_idle_sender_wakes_for_its_alertmanager_re_post_round(
    sqlite: AsyncSqliteStore, json_receiver: JsonReceiver
) -> None:
    """The re-posts start from the sender loop: it sleeps no later than the next round."""
    clock = FakeClock()
    start = clock()
    every = 25.0
    sender = sender_on(
        sqlite,
        json_receiver,
        clock,
        delivery_settings(alertmanager_repost_every=every),
        "alertmanager://127.0.0.1:9",
    )
    stopping = asyncio.Event()
    wait = OnTheTestClock(clock, sender, stopping, done=lambda: clock() > start + every)

    await asyncio.wait_for(
        deliver_until_stopped(sender, stopping, StateHealth(), clock, wait), timeout=30
    )

    assert wait.waits[:4] == [10.0, 10.0, 5.0, 10.0]  # the round at 25 s, the next at 50 s
    assert sender.reposter.next_round_at() == start + 2 * every


# -- the loop, on PostgreSQL ----------------------------------------------------------------------


async def test_a_row_another_instance_committed_unannounced_is_sent_within_the_longest_wait(
    postgres: Postgres, json_receiver: JsonReceiver
) -> None:
    """No notification reaches this instance (its listener is not running, as after a lost
    connection): the row another instance committed is claimed at the end of the wait."""
    with postgres.database() as url:
        async with PostgresStore(url, instance="b") as b:
            await b.maintain_leases()  # alone yet: b takes every shard, its steps commit
            async with PostgresStore(url, instance="a") as a:
                sender, claims, clock = counted_sender(a, json_receiver)
                start = clock()
                stopping = asyncio.Event()

                async def b_commits() -> None:
                    if not await b.pending_count():
                        await queue(b, sender, "k1", clock())

                wait = OnTheTestClock(
                    clock,
                    sender,
                    stopping,
                    done=lambda: bool(json_receiver.received),
                    meanwhile=b_commits,
                )
                await asyncio.wait_for(
                    deliver_until_stopped(sender, stopping, StateHealth(), clock, wait), timeout=30
                )
                (record,) = await a.history()

    assert claims == [
        Claim(start, 0),  # nothing yet; b commits while a sleeps, unannounced
        Claim(start + SENDER_LONGEST_IDLE_SECONDS, 1),  # the longest wait's end: sent
        Claim(start + SENDER_LONGEST_IDLE_SECONDS, 0),
    ]
    assert [post["title"] for post in json_receiver.received] == ["[warning] treasury: k1"]
    assert [(d.status, d.sent_at) for d in record.deliveries] == [
        ("sent", start + SENDER_LONGEST_IDLE_SECONDS)
    ]
