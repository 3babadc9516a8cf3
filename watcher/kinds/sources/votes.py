"""Source ``votes``: one getVoteAccounts call per interval serves every kind reading it (and the
other sources reading it at the same tick: ``watcher.kinds.sources.vote_accounts``).

One target, ``"cluster"``. Observation: the ``VoteAccounts`` model itself. The kinds riding it
(``delinquent_validators``, ``cluster_stalled``, ``vote_lag``, ``credits_low``,
``stake_changed``, ``commission_changed``) each keep their logic in their own module and name
their pure *part* (``Kind.part``, a ``base.Part``, built with ``vote_kind``); the registry
composes the source from them (``composed``, by kind name, in ``KINDS``' order). The source's
step runs every part that has a rule to serve, one after the other, each handed every rule of
the target and the state the previous one left (parts keep to their own keys of the shared
state: ``episodes`` of state kinds are per rule name, so they add up), then notes the counts its
doubt compares with.

A kind's ``samples`` (for ``watcher check``'s template check) are this source, serving the
kind's part, stepped over made-up answers where the rule's first validator lags, earns few
credits, loses stake and changes its commission while the cluster stands still, then recovers:
every transition of the kind (an event; firing, repeat and resolved) comes out with exactly the
facts real alerts carry.

Doubts (``watcher.ledger.plausibility``): an answer with no vote account at all, or none current,
where the last accepted one had some, is taken once seen three polls in a row (the state keeps
``"accounts"`` and ``"current"``, the counts of the last accepted answer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from watcher.alerting import messages
from watcher.config.rule_models import RuleBase
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.sources import vote_accounts
from watcher.kinds.toolkit.alert_samples import SAMPLE_TIME, sample_key
from watcher.kinds.toolkit.cluster import (
    account_finder,
    current_epoch,
    earned,
    newest_vote,
    vote_account_counts,
    vote_accounts_doubt,
)
from watcher.kinds.toolkit.metric_values import Sample, sol, unique, validators_watched
from watcher.ledger.models import VoteAccount, VoteAccounts
from watcher.ledger.plausibility import Doubt, SlotTip

# A kind's part: handed every rule of the target (its own and any other) and the state so far;
# its state is merged into the shared one.
PartStep = base.Part[VoteAccounts]
EPOCH = 837  # of the samples' made-up answers


def vote_samples(
    rules: Sequence[Any], target: str, observation: VoteAccounts
) -> tuple[Sample, ...]:
    """Source ``votes``: each watched validator's vote account, and the cluster as a whole."""
    accounts = (*observation.current, *observation.delinquent)
    highest_vote = max((account.last_vote for account in accounts), default=None)
    highest_root = max(
        (account.root_slot for account in accounts if account.root_slot is not None), default=None
    )
    samples = [
        Sample("solana_cluster_active_stake", (), sol(sum(a.activated_stake for a in accounts))),
        Sample("solana_cluster_validator_count", ("current",), len(observation.current)),
        Sample("solana_cluster_validator_count", ("delinquent",), len(observation.delinquent)),
    ]
    if highest_vote is not None:
        samples.append(Sample("solana_cluster_last_vote", (), highest_vote))
    if highest_root is not None:
        samples.append(Sample("solana_cluster_root_slot", (), highest_root))
    epoch = current_epoch(observation)
    current = {account.vote_pubkey for account in observation.current}
    find_account = account_finder(observation)
    for watched in validators_watched(rules):
        account = find_account(watched)
        if account is None:
            # In neither list (an unstaked delinquent is left out of both): delinquent, and
            # only the watched pubkey is known.
            samples.append(Sample("solana_validator_delinquent", (watched, ""), 1, watched))
            continue
        keys = (account.vote_pubkey, account.node_pubkey)
        delinquent = 0 if account.vote_pubkey in current else 1
        samples += [
            Sample("solana_validator_delinquent", keys, delinquent, watched),
            Sample("solana_validator_active_stake", keys, sol(account.activated_stake), watched),
            Sample("solana_validator_last_vote", keys, account.last_vote, watched),
        ]
        if account.root_slot is not None:
            samples.append(Sample("solana_validator_root_slot", keys, account.root_slot, watched))
        if account.commission is not None:
            samples.append(Sample("solana_validator_commission", keys, account.commission, watched))
        if epoch is not None:
            credits = earned(account, epoch)
            samples.append(Sample("solana_validator_epoch_credits", keys, credits, watched))
        if highest_vote is not None:
            lag = max(0, highest_vote - account.last_vote)
            samples.append(Sample("solana_validator_vote_lag_slots", keys, lag, watched))
    return unique(samples)


class VotesSource:
    metric_values = staticmethod(vote_samples)  # what /metrics shows of an answer
    name = "votes"
    facts = base.SourceFacts(("getVoteAccounts",), per_tick=("getVoteAccounts",))

    def __init__(self, parts: Mapping[str, PartStep] | None = None) -> None:
        # The parts, by the rule kind each serves: one runs when its kind has a rule.
        self._parts: dict[str, PartStep] = dict(parts or {})
        self.rule_kinds: tuple[str, ...] = tuple(self._parts)

    def composed(self, parts: Mapping[str, PartStep]) -> VotesSource:
        """The source serving ``parts`` (by kind name; the registry's, when it is built)."""
        return VotesSource(parts)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> VoteAccounts:
        return await vote_accounts.read(ledger)

    def tip(self, observation: VoteAccounts) -> int | None:
        return newest_vote(observation)

    def doubt(
        self,
        state: TargetState | None,
        observation: VoteAccounts,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        return vote_accounts_doubt(state, observation)

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: VoteAccounts,
        now: float,
    ) -> StepOutcome:
        merged: dict[str, Any] = dict(state or {})
        alerts: list[AlertMessage] = []
        kinds = {rule.kind for rule in rules}
        for kind, part in self._parts.items():
            if kind in kinds:
                outcome = part(rules, target, merged, observation, now)
                merged.update(outcome.state)
                alerts.extend(outcome.alerts)
        merged.update(vote_account_counts(observation))
        return StepOutcome(merged, tuple(alerts))


# The source as kinds name it: no parts (the registry composes the one it polls).
SOURCE = VotesSource()


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
) -> base.Kind[VoteAccounts]:
    """A kind riding the ``votes`` source: its ``part`` of the source's step, and the samples
    that part steps."""
    return base.Kind(
        model=model,
        source=SOURCE,
        wording=wording,
        part=part,
        samples=part_samples(part),
        digest=digest,
    )


def part_samples(part: PartStep) -> Callable[[Any], list[AlertMessage]]:
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
