"""The commit path of a step: its alerts worded, routed and silenced, then stored with its state
in one transaction, and the sender woken.

The stages are ``watcher.alerting.pipeline``'s (word -> route -> silence); the transaction is
the store's (``Store.commit_step``: the state, the alerts and one outbox row per destination
URL); the sender (``watcher.delivery.outbox_sender``) then sends what the outbox holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from typing import Protocol

from watcher.alerting import pipeline
from watcher.alerting.messages import PresentedRule
from watcher.core.events import BELOW_THRESHOLD_FACT, AlertMessage, StepOutcome, TargetState
from watcher.core.outbox_rows import Destination, ResolvedDestinations
from watcher.core.tally import count_alerts
from watcher.delivery.channels import Channels
from watcher.kinds import word
from watcher.service.configuration import Configured
from watcher.state.alerts import same_state
from watcher.state.interface import StepToCommit, Store


class Outbox(Protocol):
    """The sender as the commit path sees it (``watcher.delivery.outbox_sender.Sender``): the
    channels in force, and ``more_due``, set when the outbox holds new deliveries."""

    @property
    def channels(self) -> Channels: ...

    @property
    def more_due(self) -> asyncio.Event: ...


class Committer:
    """Commits steps: ``config`` gives the routes and the wording in force, ``sender`` the
    channels, and is woken when a step queued deliveries."""

    def __init__(self, *, store: Store, config: Configured, sender: Outbox) -> None:
        self.store, self.config, self.sender = store, config, sender

    async def commit(
        self,
        source: str,
        target: str,
        outcome: StepOutcome,
        rules: Sequence[PresentedRule],
        now: float,
        *,
        previous: TargetState | None = None,
    ) -> None:
        """The commit path (``watcher.alerting.pipeline``): word -> route -> silence the step's
        alerts, then store them with its state in one transaction and wake the sender.
        A quiet step that left the state as it was (``previous``) writes nothing: most polls of
        a large address list see nothing new, and a sweep then costs no write at all. One that
        changed it is staged and written with the others (``Store.flush_states``)."""
        if not outcome.alerts:
            if previous is not None and same_state(outcome.state, previous):
                return
            if self.store.stage_state(source, target, outcome.state, now):
                await self.store.flush_states()
            return
        # Read now, after the observation: a silence added before the change it mutes is seen.
        active = await self.store.active_silences(now)
        config = self.config.current
        stages = (
            pipeline.word(word, rules, config.presentation),
            pipeline.route(config.routes),
            pipeline.silence(lambda: active, now),
        )
        alerts = pipeline.run(outcome.alerts, stages)
        # Resolved here, before the transaction (which may run on the store's own thread), from
        # the channels in force now.
        routed = ResolvedDestinations.of(alerts, partial(destinations, self.sender.channels))
        await self.store.commit_step(
            StepToCommit(source, target, outcome.state, alerts, routed, now)
        )
        if alerts:
            count_alerts(len(alerts))
            self.sender.more_due.set()

    async def commit_state(self, source: str, target: str, state: TargetState, now: float) -> None:
        """``state`` alone, in its own transaction (a doubted poll's streak: nothing else of
        the target moves)."""
        await self.store.commit_step(
            StepToCommit(source, target, state, [], ResolvedDestinations({}), now)
        )


def destinations(channels: Channels, alert: AlertMessage) -> Sequence[Destination]:
    """Every URL ``alert`` goes to by ``channels``; none for a silenced one, or one below its
    rule's thresholds (recorded in the history as "silenced", sent nowhere)."""
    if pipeline.is_silenced(alert) or BELOW_THRESHOLD_FACT in alert.facts:
        return []  # below its rule's thresholds: kept in the history the same way
    return channels.destinations(alert)
