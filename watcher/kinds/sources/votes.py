"""Source ``votes``: one getVoteAccounts call per interval serves every kind reading it (and the
other sources reading it at the same tick: ``watcher.kinds.sources.vote_accounts``).

One target, ``"cluster"``. Observation: the ``VoteAccounts`` model itself. The kinds riding it
(``delinquent_validators``, ``cluster_stalled``, ``vote_lag``, ``credits_low``,
``stake_changed``, ``commission_changed``) each keep their logic in their own module and name
their pure *part* (``Kind.part``, a ``PartStep``); the registry composes the source from them
(``composed``, by kind name, in ``KINDS``' order). The source's
step runs every part that has a rule to serve, one after the other, each on the state the
previous one left (parts keep to their own keys of the shared state: ``episodes`` of state
kinds are per rule name, so they add up), then notes the counts its doubt compares with.

Doubts (``watcher.ledger.plausibility``): an answer with no vote account at all, or none current,
where the last accepted one had some, is taken once seen three polls in a row (the state keeps
``"accounts"`` and ``"current"``, the counts of the last accepted answer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.sources import vote_accounts
from watcher.kinds.toolkit.cluster import newest_vote, vote_account_counts, vote_accounts_doubt
from watcher.ledger.models import VoteAccounts
from watcher.ledger.plausibility import Doubt, SlotTip

# A part's step (pure): every rule of the target (its own and any other), the state so far,
# the answer and the time -> its state (merged into the shared one) and its alerts.
PartStep = Callable[[Sequence[Any], TargetState, VoteAccounts, float], StepOutcome]


class VotesSource:
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
                outcome = part(rules, merged, observation, now)
                merged.update(outcome.state)
                alerts.extend(outcome.alerts)
        merged.update(vote_account_counts(observation))
        return StepOutcome(merged, tuple(alerts))


# The source as kinds name it: no parts (the registry composes the one it polls).
SOURCE = VotesSource()
