"""Kind ``supply_changed``: a token's total supply minted or burnt (source ``supply``,
getTokenSupply per mint).

State per mint (raw amounts as decimal strings: u64 does not fit a JSON double)::

    {"v": 1, "supply": "1000000", "decimals": 6, "slot": 361665664,
     "refs": {rule_name: "1000000"},     # the supply each rule last notified (or its baseline)
     "seq": 42}                          # answers taken so far: names the alerts

A change counts from the amount a rule last notified, so a slow creep of small mints adds up.
``min_change`` (token units) or ``min_change_pct``; neither: any change. The first answer is
the baseline; an answer older in slots than the last one taken is stale (not taken).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal, Self

from pydantic import Field, model_validator

from watcher.alerting import formatting, messages
from watcher.config.rule_models import EventRule, PositiveDuration, Pubkeys
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.alert_samples import change_samples
from watcher.kinds.toolkit.metric_values import Sample, ui_units

STATE_VERSION = 1


class SupplyChangedRule(EventRule):
    kind: Literal["supply_changed"] = "supply_changed"
    mints: Pubkeys
    every: PositiveDuration = 60.0
    min_change: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    min_change_pct: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None

    @model_validator(mode="after")
    def _one_threshold(self) -> Self:
        if self.min_change is not None and self.min_change_pct is not None:
            raise ValueError("give min_change or min_change_pct, not both")
        return self

    @property
    def watched(self) -> tuple[str, ...]:
        return self.mints


def qualifies(rule: SupplyChangedRule, ref: int, new: int, decimals: int) -> bool:
    """Does a move from ``ref`` (last notified) to ``new`` (raw amounts) count for ``rule``?"""
    delta = abs(new - ref)
    if delta == 0:
        return False
    if rule.min_change is not None:
        return bool(delta >= Decimal(str(rule.min_change)) * 10**decimals)
    if rule.min_change_pct is not None:
        return ref == 0 or delta * 100 >= Decimal(str(rule.min_change_pct)) * ref
    return True


@dataclass(frozen=True)
class SupplyObservation:
    amount: int  # raw
    decimals: int
    slot: int


def supply_samples(
    rules: Sequence[Any], target: str, observation: SupplyObservation
) -> tuple[Sample, ...]:
    """Source ``supply``: the mint's supply in UI units."""
    supply = ui_units(observation.amount, observation.decimals)
    return (Sample("solana_token_supply", (target,), supply),)


class SupplySource(base.ContextSlotted[SupplyObservation]):
    metric_values = staticmethod(supply_samples)  # what /metrics shows of an answer
    name = "supply"
    facts = base.SourceFacts(("getTokenSupply",))
    rule_kinds: tuple[str, ...] = ("supply_changed",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> SupplyObservation:
        answer = await ledger.get_token_supply(target)
        return SupplyObservation(answer.value.amount, answer.value.decimals, answer.context.slot)

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: SupplyObservation,
        now: float,
    ) -> StepOutcome:
        new, decimals = observation.amount, observation.decimals
        seq = int((state or {}).get("seq", 0)) + 1
        stored: Mapping[str, str] = (state or {}).get("refs", {})
        refs = {rule: int(amount) for rule, amount in stored.items()}
        alerts: list[AlertMessage] = []
        for rule in base.rules_of(rules, SupplyChangedRule):
            if target not in rule.mints:
                continue
            if rule.name not in refs:  # the baseline (a rule new to this mint too)
                refs[rule.name] = new
                continue
            ref = refs[rule.name]
            if qualifies(rule, ref, new, decimals):
                alerts.append(_alert(rule, target, ref, new, decimals, seq))
                refs[rule.name] = new
        new_state: TargetState = {
            "v": STATE_VERSION,
            "supply": str(new),
            "decimals": decimals,
            "slot": observation.slot,
            "refs": {rule: str(amount) for rule, amount in refs.items()},
            "seq": seq,
        }
        return StepOutcome(state=new_state, alerts=tuple(alerts))


def _alert(
    rule: SupplyChangedRule, mint: str, old: int, new: int, decimals: int, seq: int
) -> AlertMessage:
    delta = new - old
    facts = {
        "mint": mint,
        "decimals": decimals,
        "old": str(old),
        "new": str(new),
        "delta": str(delta),
        "old_ui": formatting.ui_amount(old, decimals),
        "new_ui": formatting.ui_amount(new, decimals),
        "delta_ui": formatting.ui_amount(abs(delta), decimals),
        "direction": "minted" if delta > 0 else "burnt",
    }
    key = f"{rule.name}|{mint}|supply-{seq}|event"
    return messages.make_alert(rule, subject=mint, reason="event", dedup_key=key, facts=facts)


SOURCE = SupplySource()


# -- wording ---------------------------------------------------------------------------------


def supply_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    mint = facts["mint"]
    sign = "+" if facts["direction"] == "minted" else "-"
    title = (
        f"{messages.rule_head(facts)} {facts['delta_ui']} tokens {facts['direction']} "
        f"on {shown.short(mint)}"
    )
    body = formatting.lines(
        messages.rule_line(facts),
        f"Mint: {shown.name(mint)}",
        shown.link("address", mint),
        f"Supply: {facts['old_ui']} -> {facts['new_ui']} ({sign}{facts['delta_ui']}, "
        f"{'a mint' if sign == '+' else 'a burn'})",
        f"Raw: {facts['old']} -> {facts['new']} ({sign}{abs(int(facts['delta']))}, "
        f"{facts['decimals']} decimals)",
    )
    return title, body


def samples(rule: SupplyChangedRule) -> list[AlertMessage]:
    first, later = SupplyObservation(10**12, 6, 100), SupplyObservation(10**13, 6, 101)
    return change_samples(SOURCE, rule, rule.mints[0], first, later)


KIND = base.Kind(
    model=SupplyChangedRule,
    source=SOURCE,
    wording=supply_text,
    samples=samples,
    digest=base.DigestWords(("supply change", "supply changes"), ("mint", "mints"), lambda f: 1),
)
