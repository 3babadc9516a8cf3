"""Kind ``stake_changed``: a watched validator's activated stake moved by at least
``min_change_pct`` (default 5) percent from the amount last notified (source ``votes``; the
comparison and its state: ``watcher.kinds.toolkit.vote_changes``). Comparing with the last
*notified* amount, not the last polled one, catches slow creep."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import Field

from watcher.alerting import formatting, messages
from watcher.kinds.toolkit.vote_changes import ChangeRule, change_kind, change_text, changes_step

KIND_NAME = "stake_changed"


class StakeChangedRule(ChangeRule):
    kind: Literal["stake_changed"] = "stake_changed"
    min_change_pct: Annotated[float, Field(gt=0)] = 5.0


def stake_moved(rule: Any, old: int, new: int) -> bool:
    """At least ``min_change_pct`` percent of ``old`` (from 0: any stake at all)."""
    if old == 0:
        return new > 0
    threshold = Fraction(Decimal(str(rule.min_change_pct)))
    return abs(new - old) * 100 >= threshold * old


step_stake_changed = changes_step(
    KIND_NAME, key="stake", value_of=lambda account: account.activated_stake, moved=stake_moved
)


def stake_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    old, new = int(facts["old"]), int(facts["new"])
    pct = f" ({Decimal(new - old) * 100 / Decimal(old):+.2f}%)" if old else ""
    moved = f"{formatting.sol(old)} -> {formatting.sol(new)}{pct}"
    detail = f"Activated stake: {moved}, since it was last notified"
    return change_text(facts, shown, f"stake {moved}", detail)


KIND = change_kind(
    StakeChangedRule, stake_text, ("stake change", "stake changes"), step_stake_changed
)
