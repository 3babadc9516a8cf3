"""Kind ``credits_low``: a watched validator earned more than ``below_median_pct`` percent
fewer vote credits in the current epoch than the median validator (source ``votes``).

From getVoteAccounts' ``epochCredits`` (``[epoch, credits, previous credits]``, cumulative):
the current epoch is the newest epoch any account reports; what an account earned in it is
``credits - previous`` of that entry (0 without one). The median is over the current
(non-delinquent) vote accounts with activated stake. Unknown (not evidence): a watched pubkey in
neither list, or a median of 0 (the first slots of an epoch). Early in an epoch the counts are
small and noisy: ``for:`` keeps a short dip from firing. State: the shared ``episodes``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from statistics import median
from typing import Annotated, Any, Literal

from pydantic import Field

from watcher.alerting import formatting, messages
from watcher.alerting.lifecycle import Assessment, step_episodes
from watcher.config import rule_models
from watcher.config.rule_models import PositiveDuration, Pubkeys
from watcher.core.events import StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.sources.votes import vote_kind
from watcher.kinds.toolkit.cluster import account_finder, current_epoch, earned, validator_title
from watcher.ledger.models import VoteAccount, VoteAccounts

KIND_NAME = "credits_low"


class CreditsLowRule(rule_models.StateRule):
    kind: Literal["credits_low"] = "credits_low"
    validators: Pubkeys  # vote account or identity pubkeys
    below_median_pct: Annotated[float, Field(gt=0, le=100)] = 10.0
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.validators


def median_credits(vote_accounts: VoteAccounts, epoch: int) -> Fraction | None:
    """Median of what the current, staked vote accounts earned in ``epoch``; None: none."""
    counts = [earned(acc, epoch) for acc in vote_accounts.current if acc.activated_stake > 0]
    return Fraction(median(counts)) if counts else None


def credits_assessment(
    account: VoteAccount | None, epoch: int | None, middle: Fraction | None, limit_pct: float
) -> Assessment:
    if account is None or epoch is None or not middle:
        return None, {}
    mine = earned(account, epoch)
    short_pct = (middle - mine) * 100 / middle
    facts = {
        "vote_pubkey": account.vote_pubkey,
        "node_pubkey": account.node_pubkey,
        "epoch": epoch,
        "credits": mine,
        "median": float(middle),
        "below_pct": round(float(short_pct), 2),
        "below_median_pct": limit_pct,
    }
    return short_pct > Fraction(str(limit_pct)), facts


def step_credits_low(
    rules: Sequence[Any],
    target: str,
    state: TargetState | None,
    observation: VoteAccounts,
    now: float,
) -> StepOutcome:
    state = state or {}  # the source's shared state, never None
    mine = base.rules_of(rules, CreditsLowRule)
    epoch = current_epoch(observation)
    middle = None if epoch is None else median_credits(observation, epoch)
    find = account_finder(observation)
    accounts = {key: find(key) for rule in mine for key in rule.validators}

    def assess(rule: CreditsLowRule) -> Mapping[str, Assessment]:
        limit = rule.below_median_pct
        return {
            key: credits_assessment(accounts[key], epoch, middle, limit) for key in rule.validators
        }

    return step_episodes(mine, state, now, assess)


def credits_low_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    vote, node = facts.get("vote_pubkey"), facts.get("node_pubkey")
    below = f"{float(facts['below_pct']):g}%"
    if facts["reason"] == "resolved":
        title = validator_title(facts, shown, "credits back near the median")
        where = f"{below} under" if float(facts["below_pct"]) > 0 else "at or above"
        summary = f"Resolved after {facts['duration']}: {where} the median."
    elif facts["reason"] == "repeat":
        title = validator_title(facts, shown, f"credits still {below} under the median")
        summary = f"Still low: for {facts['duration']}, since {facts['firing_since']}."
    else:
        title = validator_title(facts, shown, f"credits {below} under the median")
        limit = f"{float(facts['below_median_pct']):g}%"
        summary = f"It earned more than {limit} fewer vote credits than the median validator."
    body = formatting.lines(
        messages.rule_line(facts),
        f"Validator: {shown.name(facts['subject'], vote, node)}",
        summary,
        f"Epoch {facts['epoch']}: {facts['credits']:,} credits; median of the current staked "
        f"validators {facts['median']:,.0f}",
        f"Vote account: {shown.name(vote) if vote else 'unknown'}",
        shown.link("address", vote),
    )
    return title, body


KIND = vote_kind(CreditsLowRule, credits_low_text, step_credits_low)
