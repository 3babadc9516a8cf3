"""What a kind's ``samples`` (``watcher.kinds.base.Kind``) are made of: made-up keys, a fixed
time, a plain account, and the walk of a state kind through every transition (firing, repeat,
resolved). ``watcher check`` renders a rule's templates against its kind's samples
(``watcher.checks.templates``), so a template that fails on a fact is found before an
alert needs it. Samples come from the kind's own step (or alert builder), so their facts are
exactly what real alerts carry."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import base58

from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds.base import Source
from watcher.ledger.models_accounts import Account

SAMPLE_TIME = 1_790_000_000.0
Observation = TypeVar("Observation")


def sample_key(label: str, size: int = 32) -> str:
    """A made-up base58 key (``size`` bytes: 32 a pubkey, 64 a signature)."""
    return base58.b58encode(hashlib.sha512(label.encode()).digest()[:size]).decode()


def sample_account(lamports: int, data: bytes = b"v1", owner: str | None = None) -> Account:
    return Account(
        data=(base64.b64encode(data).decode(), "base64"),
        executable=False,
        lamports=lamports,
        owner=owner or sample_key("owner"),
        space=len(data),
    )


def episode_samples(
    rule: Any, step: Callable[[TargetState | None, bool, float], StepOutcome]
) -> list[AlertMessage]:
    """A state kind's walk: fire (after ``for``), repeat (when it repeats), stop holding,
    resolve (after ``keep_firing_for``); ``step(state, bad, now)`` is the kind's step."""
    waits = (
        (True, 0.0),
        (True, rule.for_ + 1),
        (True, (rule.repeat or 0.0) + 1),
        (False, 1.0),
        (False, rule.keep_firing_for + 1),
    )
    state: TargetState | None = None
    now, alerts = SAMPLE_TIME, list[AlertMessage]()
    for bad, wait in waits:
        now += wait
        outcome = step(state, bad, now)
        alerts += outcome.alerts
        state = outcome.state
    return alerts


def change_samples(
    source: Source[Observation], rule: Any, target: str, first: Observation, later: Observation
) -> list[AlertMessage]:
    """A snapshot kind's change: the alerts of ``later``, read after ``first`` (the baseline)."""
    start = source.step([rule], target, None, first, SAMPLE_TIME)
    return list(source.step([rule], target, start.state, later, SAMPLE_TIME).alerts)
