"""Kind ``stake_changed``: a watched validator's activated stake moved by at least
``min_change_pct`` (default 5) percent from the amount last notified (source ``votes``; the
comparison and its state: ``watcher.kinds.vote_changes``). Comparing with the last *notified*
amount, not the last polled one, catches slow creep."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import Field

from watcher.alerting.events import StepOutcome, TargetState
from watcher.alerting.messages import PLAIN, Facts, Presentation, lines, rule_head, rule_line, sol
from watcher.config.rule_models import CLUSTER, EventRule, PositiveDuration, Pubkeys
from watcher.kinds.base import DigestWords, Kind
from watcher.kinds.cluster import validator_lines
from watcher.kinds.vote_changes import one, step_changes, validator_named
from watcher.kinds.vote_samples import sample_vote_alerts
from watcher.kinds.votes_source import SOURCE, VotePart
from watcher.ledger.models import VoteAccounts

KIND_NAME = "stake_changed"


class StakeChangedRule(EventRule):
    kind: Literal["stake_changed"] = "stake_changed"
    validators: Pubkeys  # vote account or identity pubkeys
    min_change_pct: Annotated[float, Field(gt=0)] = 5.0
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.validators

    @property
    def targets(self) -> tuple[str, ...]:
        return (CLUSTER,)


def stake_moved(rule: Any, old: int, new: int) -> bool:
    """At least ``min_change_pct`` percent of ``old`` (from 0: any stake at all)."""
    if old == 0:
        return new > 0
    threshold = Fraction(Decimal(str(rule.min_change_pct)))
    return abs(new - old) * 100 >= threshold * old


def step_stake_changed(
    rules: Any, state: TargetState, observation: VoteAccounts, now: float
) -> StepOutcome:
    mine = [rule for rule in rules if rule.kind == KIND_NAME]
    return step_changes(
        mine,
        state,
        observation,
        key="stake",
        value_of=lambda account: account.activated_stake,
        moved=stake_moved,
    )


SOURCE.serve(VotePart((KIND_NAME,), step_stake_changed))


def stake_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    vote, node = facts.get("vote_pubkey"), facts.get("node_pubkey")
    who = shown.short(facts["subject"], vote, node)
    old, new = int(facts["old"]), int(facts["new"])
    pct = f" ({Decimal(new - old) * 100 / Decimal(old):+.2f}%)" if old else ""
    moved = f"{sol(old)} -> {sol(new)}{pct}"
    title = f"{rule_head(facts)} validator {who} stake {moved}"
    body = lines(
        rule_line(facts),
        *validator_lines(facts, shown, f"Activated stake: {moved}, since it was last notified"),
    )
    return title, body


KIND = Kind(
    model=StakeChangedRule,
    source=SOURCE,
    wording=stake_text,
    samples=sample_vote_alerts,
    digest=DigestWords(
        ("stake change", "stake changes"),
        ("validator", "validators"),
        one,
        subject_named=validator_named,
    ),
)
