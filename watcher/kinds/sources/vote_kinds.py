"""The ``samples`` of the kinds riding the ``votes`` source (``Kind.samples``, for ``watcher
check``'s template check): the source (serving the kind's part) steps over made-up answers where the
rule's first validator lags, earns few credits, loses stake and changes its commission while the
cluster stands still, then recovers, so every transition of the rule's kind (an event; firing,
repeat and resolved) comes out with exactly the facts real alerts carry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from watcher.alerting import messages
from watcher.config.rule_models import RuleBase
from watcher.core.events import AlertMessage, TargetState
from watcher.kinds import base
from watcher.kinds.sources.votes import SOURCE, PartStep, VotesSource
from watcher.kinds.toolkit.samples import SAMPLE_TIME, sample_key
from watcher.ledger.models import VoteAccount, VoteAccounts

EPOCH = 837


def _account(vote: str, last_vote: int, credits: int, stake: int, commission: int) -> VoteAccount:
    return VoteAccount(
        vote_pubkey=vote,
        node_pubkey=sample_key("node of " + vote),
        activated_stake=stake,
        commission=commission,
        last_vote=last_vote,
        root_slot=last_vote - 31,
        epoch_credits=((EPOCH, 10_000 + credits, 10_000),),
    )


def _answer(watched: str, bad: bool, tip: int) -> VoteAccounts:
    peers = [_account(sample_key(f"peer {n}"), tip, 8000, 10**16, 5) for n in range(3)]
    mine = (
        _account(watched, tip - 1000, 10, 10**15 // 2, 10)
        if bad
        else _account(watched, tip, 8000, 10**15, 5)
    )
    return VoteAccounts(current=[*peers, mine], delinquent=[])


def vote_kind(
    model: type[RuleBase],
    wording: messages.Wording,
    part: PartStep,
    digest: base.DigestWords | None = None,
) -> base.Kind:
    """A kind riding the ``votes`` source: its ``part`` of the source's step, and the samples
    that part steps."""
    return base.Kind(
        model=model,
        source=SOURCE,
        wording=wording,
        part=part,
        samples=vote_samples(part),
        digest=digest,
    )


def vote_samples(part: PartStep) -> Callable[[Any], list[AlertMessage]]:
    """The ``samples`` of the kind whose part of the ``votes`` source is ``part``."""
    return lambda rule: sample_vote_alerts(rule, part)


def sample_vote_alerts(rule: Any, part: PartStep) -> list[AlertMessage]:
    """Every transition of ``rule``, stepped by the ``votes`` source serving ``part`` for its
    kind: baseline, trouble (long enough to fire and repeat), then recovery (long enough to
    resolve)."""
    source = VotesSource({rule.kind: part})
    watched = (getattr(rule, "validators", None) or (sample_key("sample validator"),))[0]
    wait = float(getattr(rule, "for_", 0.0)) + float(getattr(rule, "stalled_for", 0.0)) + 1
    repeat = float(getattr(rule, "repeat", None) or 0.0) + 1
    keep = float(getattr(rule, "keep_firing_for", 0.0)) + 1
    plan = [(False, 0.0), (True, 1.0), (True, wait), (True, repeat), (False, 1.0), (False, keep)]
    state: TargetState | None = None
    alerts: list[AlertMessage] = []
    now, tip = SAMPLE_TIME, 5000
    for bad, later in plan:
        now += later
        tip += 0 if bad else 10  # standing still while in trouble
        outcome = source.step([rule], "cluster", state, _answer(watched, bad, tip), now)
        alerts.extend(outcome.alerts)
        state = outcome.state
    return alerts
