"""Kind ``vote_lag``: a watched validator's lastVote more than ``max_slots`` behind the
cluster's newest vote (source ``votes``: the getVoteAccounts answer delinquency reads too).

It warns before delinquency (128 slots). A watched pubkey (vote account or identity) found in
neither list is unknown here (not evidence either way): ``delinquent_validators`` reports it
missing. State: the shared ``episodes`` (``watcher.alerting.lifecycle.step_episodes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field

from watcher.alerting import formatting, messages
from watcher.alerting.lifecycle import Assessment, step_episodes
from watcher.config import rule_models
from watcher.config.rule_models import PositiveDuration, Pubkeys
from watcher.core.events import StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.delinquent_validators import ValidatorStatus, classify_validators
from watcher.kinds.sources.votes import vote_kind
from watcher.kinds.toolkit.cluster import validator_lines, validator_title
from watcher.ledger.models import VoteAccounts

KIND_NAME = "vote_lag"


class VoteLagRule(rule_models.StateRule):
    kind: Literal["vote_lag"] = "vote_lag"
    validators: Pubkeys  # vote account or identity pubkeys
    max_slots: Annotated[int, Field(strict=True, ge=1)] = 50
    every: PositiveDuration = 30.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.validators


def lag_assessment(status: ValidatorStatus, max_slots: int) -> Assessment:
    """Lagging when its last vote is more than ``max_slots`` behind the newest vote; unknown
    when it is in neither list (or there is no current vote to compare with)."""
    if status.state == "missing" or status.slots_behind is None:
        return None, {}
    facts = {
        "vote_pubkey": status.vote_pubkey,
        "node_pubkey": status.node_pubkey,
        "last_vote": status.last_vote,
        "slots_behind": status.slots_behind,
        "max_slots": max_slots,
    }
    return status.slots_behind > max_slots, facts


def step_vote_lag(
    rules: Sequence[Any],
    target: str,
    state: TargetState | None,
    observation: VoteAccounts,
    now: float,
) -> StepOutcome:
    state = state or {}  # the source's shared state, never None
    mine = base.rules_of(rules, VoteLagRule)
    statuses = classify_validators({key for rule in mine for key in rule.validators}, observation)

    def assess(rule: VoteLagRule) -> Mapping[str, Assessment]:
        return {key: lag_assessment(statuses[key], rule.max_slots) for key in rule.validators}

    return step_episodes(mine, state, now, assess)


def vote_lag_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    behind = formatting.plural(int(facts["slots_behind"]), "slot")
    limit = formatting.plural(int(facts["max_slots"]), "slot")
    if facts["reason"] == "resolved":
        title = validator_title(facts, shown, f"caught up ({behind} behind)")
        summary = f"Resolved after {facts['duration']}: its last vote is {behind} behind."
    elif facts["reason"] == "repeat":
        title = validator_title(facts, shown, f"still {behind} behind ({facts['duration']})")
        summary = f"Still lagging: for {facts['duration']}, {messages.since_text(facts)}."
    else:
        title = validator_title(facts, shown, f"votes {behind} behind")
        summary = f"Its last vote is {behind} behind the cluster's newest vote (limit {limit})."
    body = formatting.lines(
        messages.rule_line(facts),
        *validator_lines(facts, shown, summary),
        f"Last vote: slot {facts['last_vote']}",
    )
    return title, body


KIND = vote_kind(VoteLagRule, vote_lag_text, step_vote_lag)
