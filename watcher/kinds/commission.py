"""Kind ``commission_changed``: any change of a watched validator's commission (source
``votes``; the comparison and its state: ``watcher.kinds.vote_changes``)."""

from __future__ import annotations

from typing import Any, Literal

from watcher.alerting.events import StepOutcome, TargetState
from watcher.alerting.messages import PLAIN, Facts, Presentation, lines, rule_head, rule_line
from watcher.config.rule_models import CLUSTER, EventRule, PositiveDuration, Pubkeys
from watcher.kinds.base import DigestWords, Kind
from watcher.kinds.cluster import validator_lines
from watcher.kinds.vote_changes import one, step_changes, validator_named
from watcher.kinds.vote_samples import sample_vote_alerts
from watcher.kinds.votes_source import SOURCE, VotePart
from watcher.ledger.models import VoteAccounts

KIND_NAME = "commission_changed"


class CommissionChangedRule(EventRule):
    kind: Literal["commission_changed"] = "commission_changed"
    validators: Pubkeys  # vote account or identity pubkeys
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.validators

    @property
    def targets(self) -> tuple[str, ...]:
        return (CLUSTER,)


def step_commission_changed(
    rules: Any, state: TargetState, observation: VoteAccounts, now: float
) -> StepOutcome:
    mine = [rule for rule in rules if rule.kind == KIND_NAME]
    return step_changes(
        mine,
        state,
        observation,
        key="commission",
        value_of=lambda account: account.commission,
        moved=lambda rule, old, new: True,
    )


SOURCE.serve(VotePart((KIND_NAME,), step_commission_changed))


def commission_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    vote, node = facts.get("vote_pubkey"), facts.get("node_pubkey")
    who = shown.short(facts["subject"], vote, node)
    change = f"{facts['old']}% -> {facts['new']}%"
    title = f"{rule_head(facts)} validator {who} commission {change}"
    body = lines(
        rule_line(facts),
        *validator_lines(facts, shown, f"Commission: {change}"),
    )
    return title, body


KIND = Kind(
    model=CommissionChangedRule,
    source=SOURCE,
    wording=commission_text,
    samples=sample_vote_alerts,
    digest=DigestWords(
        ("commission change", "commission changes"),
        ("validator", "validators"),
        one,
        subject_named=validator_named,
    ),
)
