"""Kind ``commission_changed``: any change of a watched validator's commission (source
``votes``; the comparison and its state: ``watcher.kinds.toolkit.vote_changes``)."""

from __future__ import annotations

from typing import Literal

from watcher.alerting import formatting, messages
from watcher.kinds.toolkit.vote_changes import ChangeRule, change_kind, change_text, changes_step

KIND_NAME = "commission_changed"


class CommissionChangedRule(ChangeRule):
    kind: Literal["commission_changed"] = "commission_changed"


step_commission_changed = changes_step(
    KIND_NAME, key="commission", value_of=lambda account: account.commission, moved=lambda *_: True
)


def commission_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    change = f"{facts['old']}% -> {facts['new']}%"
    return change_text(facts, shown, f"commission {change}", f"Commission: {change}")


KIND = change_kind(
    CommissionChangedRule,
    commission_text,
    ("commission change", "commission changes"),
    step_commission_changed,
)
