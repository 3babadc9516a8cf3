"""The lease loop: several instances on one database share the targets by leased shards.

Every ``renew_every`` seconds (a third of the lease time: two renewals may fail before a lease
lapses) one round renews what this instance holds, takes free or lapsed shards up to its share
and hands back its surplus (``Store.maintain_leases``). A failed round is the database failing
(``StateHealth``: past ``health.database_down_for`` the daemon exits for its supervisor);
meanwhile the leases lapse by themselves and the store stops offering their shards, so a cut-off
instance writes nothing. With one process owning the state (SQLite) the loop ends at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog

from watcher.alerting.builtin import StateHealth
from watcher.core.clock import Clock
from watcher.core.errors import StateError
from watcher.state.interface import LeaseRound, LeaseStore

log = structlog.get_logger(__name__)


class LeaseKeeper:
    """Runs the lease rounds (``keep_forever``) and tells ``on_round`` what each did."""

    def __init__(
        self,
        store: LeaseStore,
        state_health: StateHealth,
        stopping: asyncio.Event,
        clock: Clock,
        *,
        renew_every: float,
        on_round: Callable[[LeaseRound], None] | None = None,
    ) -> None:
        self.store, self.state_health = store, state_health
        self.stopping, self.clock = stopping, clock
        self.renew_every = renew_every
        self.on_round = on_round
        self.last: LeaseRound | None = None

    async def round(self) -> LeaseRound | None:
        """One round; None when it failed (recorded) or there are no leases to keep."""
        try:
            done = await self.store.maintain_leases()
        except StateError as exc:
            self.state_health.failed(exc.during("renew the leases"), self.clock())
            return None
        if done is None:
            return None
        self.state_health.succeeded(self.clock())
        if done.taken or done.released or done.lost:
            log.info(
                "shards",
                held=done.held,
                taken=done.taken,
                released=done.released,
                lost=done.lost,
                instances=done.live_instances,
            )
        self.last = done
        if self.on_round is not None:
            self.on_round(done)
        return done

    async def keep_forever(self) -> None:
        while not self.stopping.is_set():
            started = self.clock()
            done = await self.round()
            if done is None and self.store.shards_held() is None:
                return  # one process owns everything: nothing to keep
            wait = max(0.0, self.renew_every - (self.clock() - started))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), wait)
