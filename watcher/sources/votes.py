"""Source ``votes``: delinquency of watched validators (rule kind ``delinquent_validators``).

One target, ``"cluster"``: one getVoteAccounts call serves every rule. Observation: the
``VoteAccounts`` model itself. State: ``{"v": 1, "episodes": {rule: {subject: Episode}}}``
(see ``watcher.lifecycle.step_episodes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Protocol, cast

from watcher.diff import ValidatorStatus, classify_validators
from watcher.events import StepOutcome, TargetState
from watcher.lifecycle import Assessment, StateRule, step_episodes
from watcher.messages import validator_text
from watcher.models import VoteAccounts
from watcher.sources.base import LedgerReader

CLUSTER = "cluster"


class DelinquencyRule(StateRule, Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def validators(self) -> Sequence[str]: ...


class VotesSource:
    name = "votes"
    rule_kinds: tuple[str, ...] = ("delinquent_validators",)

    def targets(self, rules: Sequence[Any]) -> list[str]:
        # No rule of this kind: nothing to poll.
        return [CLUSTER] if self._rules(rules) else []

    async def observe(
        self, ledger: LedgerReader, target: str, state: TargetState | None
    ) -> VoteAccounts:
        return await ledger.get_vote_accounts()

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: VoteAccounts,
        now: float,
    ) -> StepOutcome:
        mine = self._rules(rules)
        statuses = classify_validators(
            {pubkey for rule in mine for pubkey in rule.validators}, observation
        )

        def assess(rule: StateRule) -> Mapping[str, Assessment]:
            watched = cast(DelinquencyRule, rule).validators
            return {pubkey: _assessment(statuses[pubkey]) for pubkey in watched}

        return step_episodes(mine, state, now, assess, validator_text)

    def _rules(self, rules: Sequence[Any]) -> list[DelinquencyRule]:
        return [cast(DelinquencyRule, rule) for rule in rules if rule.kind in self.rule_kinds]


def _assessment(status: ValidatorStatus) -> Assessment:
    facts = asdict(status)
    facts["status"] = facts.pop("state")
    return status.state != "current", facts


SOURCE = VotesSource()
