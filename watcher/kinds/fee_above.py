"""Kind ``fee_above``: a state kind firing while the fee of a sample message is above
``max_lamports`` (source ``fees``, getFeeForMessage; the target is the message itself).

A node answers a null fee (or a null result) for a message whose recent blockhash has expired:
that is not evidence. ``doubt`` refuses it (never confirmable), so the poll counts as failed
with the reason "the message needs a fresh blockhash": the daemon's log and ``watcher status``
(the source's failed polls) say so, and the episode stays as it was.

State: ``{"v": 1, "episodes": {rule: {"fee": Episode}}, "slot": context slot}``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from watcher.alerting import formatting, messages
from watcher.alerting.lifecycle import Assessment, step_episodes
from watcher.config import rule_models
from watcher.config.rule_models import PositiveDuration
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.alert_samples import episode_samples
from watcher.kinds.toolkit.metric_values import Sample
from watcher.ledger.plausibility import Doubt, SlotTip, picture_of

SUBJECT = "fee"  # one episode per rule: its message's fee
FRESH_BLOCKHASH = (
    "the message needs a fresh blockhash: getFeeForMessage answered a null fee "
    "(its recent blockhash has expired)"
)


def _base64_message(value: str) -> str:
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not a base64 message") from None
    if not raw:
        raise ValueError("empty message")
    return value


class FeeAboveRule(rule_models.StateRule):
    kind: Literal["fee_above"] = "fee_above"
    message: Annotated[str, AfterValidator(_base64_message)]
    max_lamports: Annotated[int, Field(ge=0)]
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return (SUBJECT,)

    @property
    def targets(self) -> tuple[str, ...]:
        return (self.message,)


@dataclass(frozen=True)
class FeeObservation:
    fee: int | None  # lamports; None: the blockhash expired (or the block is unknown)
    slot: int | None


def fee_assessment(rule: FeeAboveRule, observation: FeeObservation) -> Assessment:
    if observation.fee is None:
        return None, {}  # not evidence
    facts = {"fee": observation.fee, "max_lamports": rule.max_lamports, "slot": observation.slot}
    return observation.fee > rule.max_lamports, facts


def fee_samples(
    rules: Sequence[Any], target: str, observation: FeeObservation
) -> tuple[Sample, ...]:
    """Source ``fees``: the sample message's fee, labelled by each rule sending it (the target
    is the message itself: long, and telling an operator nothing)."""
    if observation.fee is None:
        return ()
    names = dict.fromkeys(rule.name for rule in rules if getattr(rule, "message", None) == target)
    return tuple(Sample("solana_fee_lamports", (name,), observation.fee, name) for name in names)


class FeesSource(base.ContextSlotted[FeeObservation]):
    metric_values = staticmethod(fee_samples)  # what /metrics shows of an answer
    name = "fees"
    facts = base.SourceFacts(("getFeeForMessage",))
    rule_kinds: tuple[str, ...] = ("fee_above",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> FeeObservation:
        answer = await ledger.get_fee_for_message(target)
        if answer is None:
            return FeeObservation(None, None)
        return FeeObservation(answer.value, answer.context.slot)

    def doubt(
        self,
        state: TargetState | None,
        observation: FeeObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        if observation.fee is None:
            return Doubt(FRESH_BLOCKHASH, picture_of("null fee"), confirmable=False)
        return super().doubt(state, observation, now, tip)

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: FeeObservation,
        now: float,
    ) -> StepOutcome:
        watching = [rule for rule in base.rules_of(rules, FeeAboveRule) if rule.message == target]

        def assess(rule: FeeAboveRule) -> Mapping[str, Assessment]:
            return {SUBJECT: fee_assessment(rule, observation)}

        outcome = step_episodes(watching, state, now, assess)
        slot = observation.slot if observation.slot is not None else (state or {}).get("slot")
        return StepOutcome({**outcome.state, "slot": slot}, outcome.alerts)


SOURCE = FeesSource()


# -- wording ---------------------------------------------------------------------------------


def fee_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    fee, limit = f"{facts['fee']} lamports", f"{facts['max_lamports']} lamports"
    if facts["reason"] == "resolved":
        title = f"{messages.rule_head(facts)} fee back to {fee}"
        summary = f"Resolved after {facts['duration']}: at or under the {limit} maximum again."
    elif facts["reason"] == "repeat":
        title = f"{messages.rule_head(facts)} fee still above {limit} ({facts['duration']})"
        summary = f"Still above {limit}: for {facts['duration']}, since {facts['firing_since']}."
    else:
        title = f"{messages.rule_head(facts)} fee {fee}, above {limit}"
        summary = f"The fee of the watched message is above the {limit} maximum."
    body = formatting.lines(
        messages.rule_line(facts),
        summary,
        f"Fee: {fee} (getFeeForMessage at slot {facts['slot']})",
    )
    return title, body


def samples(rule: FeeAboveRule) -> list[AlertMessage]:
    def step(state: TargetState | None, bad: bool, now: float) -> StepOutcome:
        fee = rule.max_lamports + 1 if bad else rule.max_lamports
        return SOURCE.step([rule], rule.message, state, FeeObservation(fee, 100), now)

    return episode_samples(rule, step)


KIND = base.Kind(model=FeeAboveRule, source=SOURCE, wording=fee_text, samples=samples)
