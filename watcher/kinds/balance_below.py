"""Kind ``balance_below``: a state kind firing while an account's balance is under a minimum
(source ``accounts``).

``accounts`` with ``min_sol``: lamports read with getMultipleAccounts (a missing account counts
as 0); or ``token_accounts`` with ``min_amount`` (token units): getTokenAccountBalance. One
episode per (rule, account), in the target's ``balance_below`` state slice
(``watcher.alerting.lifecycle.step_episodes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Annotated, Any, Literal, Self

from pydantic import Field, model_validator

from watcher.alerting import formatting, messages
from watcher.alerting.lifecycle import Assessment, step_episodes
from watcher.config import rule_models
from watcher.config.rule_models import PositiveDuration, Pubkeys
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.core.lamports import LAMPORTS_DECIMALS
from watcher.kinds import base
from watcher.kinds.sources.accounts import SOURCE, AccountObservation, address_of, token_target
from watcher.kinds.toolkit.alert_samples import episode_samples, sample_account
from watcher.ledger.models import TokenAmount

Minimum = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class BalanceBelowRule(rule_models.StateRule, rule_models.Backoff):
    kind: Literal["balance_below"] = "balance_below"
    accounts: Pubkeys | None = None
    token_accounts: Pubkeys | None = None
    min_sol: Minimum | None = None
    min_amount: Minimum | None = None
    every: PositiveDuration = 60.0

    @model_validator(mode="after")
    def _one_kind_of_account(self) -> Self:
        if (self.accounts is None) == (self.token_accounts is None):
            raise ValueError("give exactly one of accounts (with min_sol) or token_accounts")
        if self.accounts is not None and (self.min_sol is None or self.min_amount is not None):
            raise ValueError("accounts take min_sol (in SOL), not min_amount")
        if self.token_accounts is not None and (
            self.min_amount is None or self.min_sol is not None
        ):
            raise ValueError("token_accounts take min_amount (in the token's units), not min_sol")
        return self

    @property
    def watched(self) -> tuple[str, ...]:
        return self.accounts or self.token_accounts or ()

    @property
    def targets(self) -> tuple[str, ...]:
        if self.token_accounts is not None:
            return tuple(token_target(account) for account in self.token_accounts)
        return self.accounts or ()


def balance_assessment(rule: BalanceBelowRule, observation: AccountObservation) -> Assessment:
    """Is the balance under the rule's minimum, and the facts that tell it (pure)."""
    if observation.token is not None:
        raw, decimals, unit = observation.token.amount, observation.token.decimals, "tokens"
        minimum = rule.min_amount or 0.0
    else:
        raw = observation.account.lamports if observation.account is not None else 0
        decimals, unit, minimum = LAMPORTS_DECIMALS, "SOL", rule.min_sol or 0.0
    min_raw = Decimal(str(minimum)) * 10**decimals
    facts = {
        "account": observation.address,
        "exists": observation.exists,
        "unit": unit,
        "decimals": decimals,
        "amount": str(raw),
        "amount_ui": formatting.ui_amount(raw, decimals),
        "minimum": f"{minimum:g}",
        "slot": observation.slot,
    }
    return raw < min_raw, facts


def step_balances(
    rules: Sequence[Any],
    target: str,
    state: TargetState | None,
    observation: AccountObservation,
    now: float,
) -> StepOutcome:
    watching = base.watching(rules, BalanceBelowRule, target)
    address = address_of(target)

    def assess(rule: BalanceBelowRule) -> Mapping[str, Assessment]:
        return {address: balance_assessment(rule, observation)}

    return step_episodes(watching, state, now, assess)


# -- wording ---------------------------------------------------------------------------------


def _amount(facts: Mapping[str, Any]) -> str:
    if facts["unit"] == "SOL":
        return f"{facts['amount_ui']} SOL ({facts['amount']} lamports)"
    return f"{facts['amount_ui']} tokens (raw {facts['amount']})"


def balance_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    account = facts["subject"]
    unit = "SOL" if facts["unit"] == "SOL" else "tokens"
    minimum = f"{facts['minimum']} {unit}"
    who = shown.short(account)
    reason = facts["reason"]
    head = messages.rule_head(facts)
    if reason == "resolved":
        title = f"{head} balance of {who} back to {facts['amount_ui']} {unit}"
        summary = f"Resolved after {facts['duration']}: at or above the {minimum} minimum again."
    elif reason == "repeat":
        title = f"{head} balance of {who} still below {minimum} ({facts['duration']})"
        summary = f"Still below {minimum}: for {facts['duration']}, since {facts['firing_since']}."
    else:
        title = f"{head} balance of {who} below {minimum}: {facts['amount_ui']} {unit}"
        summary = f"The balance is under the {minimum} minimum."
    missing = None if facts.get("exists", True) else "The account does not exist (counts as 0)."
    body = formatting.lines(
        messages.rule_line(facts),
        f"Account: {shown.name(account)}",
        shown.link("address", account),
        summary,
        missing,
        f"Balance: {_amount(facts)} at slot {facts['slot']}",
    )
    return title, body


def samples(rule: BalanceBelowRule) -> list[AlertMessage]:
    target = rule.targets[0]
    address = address_of(target)

    def observe(bad: bool) -> AccountObservation:
        if rule.token_accounts is not None:
            amount = 0 if bad else int(((rule.min_amount or 0) + 1) * 10**6)
            return AccountObservation(address, 100, token=TokenAmount(amount=amount, decimals=6))
        lamports = 0 if bad else int(((rule.min_sol or 0) + 1) * 10**9)
        return AccountObservation(address, 100, account=sample_account(lamports))

    return episode_samples(
        rule, lambda state, bad, now: step_balances([rule], target, state, observe(bad), now)
    )


KIND = base.Kind(
    model=BalanceBelowRule,
    source=SOURCE,
    wording=balance_text,
    part=step_balances,
    samples=samples,
)
