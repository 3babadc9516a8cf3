"""Source ``holders``: the top-20 token accounts of watched mints (rule kind ``holder_changes``).

State per mint (raw amounts as decimal strings: u64 does not fit a JSON double)::

    {"v": 1, "decimals": 6,
     "top": {token_account: "amount"},                     # the last snapshot
     "refs": {rule_name: {token_account: "amount"}}}       # amount last notified, per rule
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol, cast

from watcher.diff import BalanceChange, Top, diff_holders, holder_changes, ranks
from watcher.events import AlertMessage, StepOutcome, TargetState
from watcher.messages import RuleView, holders_text, make_alert, ui_amount
from watcher.models import TokenAmount
from watcher.sources.base import LedgerReader

STATE_VERSION = 1


class HoldersRule(RuleView, Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def mints(self) -> Sequence[str]: ...

    @property
    def min_change_pct(self) -> float: ...


@dataclass(frozen=True)
class HoldersObservation:
    """getTokenLargestAccounts' value for one mint (at most 20 entries, largest first)."""

    accounts: tuple[TokenAmount, ...]


class HoldersSource:
    name = "holders"
    rule_kinds: tuple[str, ...] = ("holder_changes",)

    def targets(self, rules: Sequence[Any]) -> list[str]:
        return sorted({mint for rule in self._rules(rules) for mint in rule.mints})

    async def observe(
        self, ledger: LedgerReader, target: str, state: TargetState | None
    ) -> HoldersObservation:
        return HoldersObservation(tuple(await ledger.get_token_largest_accounts(target)))

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: HoldersObservation,
        now: float,
    ) -> StepOutcome:
        new_top = {acc.address: acc.amount for acc in observation.accounts if acc.address}
        decimals = (
            observation.accounts[0].decimals
            if observation.accounts
            else int((state or {}).get("decimals", 0))
        )
        stored_refs: Mapping[str, Mapping[str, str]] = (state or {}).get("refs", {})
        refs = {rule: _amounts(by_account) for rule, by_account in stored_refs.items()}
        alerts: list[AlertMessage] = []
        if state and "top" in state:
            prev_top = _amounts(state["top"])
            entered, left = diff_holders(prev_top, new_top)
            for rule in self._rules(rules):
                if target not in rule.mints:
                    continue
                if rule.name not in refs:  # a rule new to this mint baselines silently
                    refs[rule.name] = dict(new_top)
                    continue
                changes, refs[rule.name] = holder_changes(
                    refs[rule.name], new_top, rule.min_change_pct
                )
                report = _report(prev_top, new_top, entered, left, changes, decimals)
                if report:
                    alerts.append(_alert(rule, target, report, new_top, decimals))
        else:
            for rule in self._rules(rules):
                if target in rule.mints:
                    refs[rule.name] = dict(new_top)
        new_state: TargetState = {
            "v": STATE_VERSION,
            "decimals": decimals,
            "top": _strings(new_top),
            "refs": {rule: _strings(by_account) for rule, by_account in refs.items()},
        }
        return StepOutcome(state=new_state, alerts=tuple(alerts))

    def _rules(self, rules: Sequence[Any]) -> list[HoldersRule]:
        return [cast(HoldersRule, rule) for rule in rules if rule.kind in self.rule_kinds]


def _amounts(stored: Mapping[str, str | int]) -> dict[str, int]:
    return {account: int(amount) for account, amount in stored.items()}


def _strings(top: Top) -> dict[str, str]:
    return {account: str(amount) for account, amount in top.items()}


def _report(
    prev_top: Top,
    new_top: Top,
    entered: Sequence[str],
    left: Sequence[str],
    changes: Sequence[BalanceChange],
    decimals: int,
) -> list[dict[str, Any]]:
    """One line of facts per item: entered, left, then changed (each largest first)."""
    new_rank, old_rank = ranks(new_top), ranks(prev_top)

    def item(kind: str, account: str, old: int | None, new: int | None) -> dict[str, Any]:
        pct = _signed_pct(old, new) if kind == "changed" else None
        return {
            "kind": kind,
            "account": account,
            "old": None if old is None else str(old),
            "new": None if new is None else str(new),
            "old_ui": None if old is None else ui_amount(old, decimals),
            "new_ui": None if new is None else ui_amount(new, decimals),
            "pct": pct,
            "rank": new_rank.get(account),
            "old_rank": old_rank.get(account),
        }

    entered_set = set(entered)
    return [
        *(item("entered", account, None, new_top[account]) for account in entered),
        *(item("left", account, prev_top[account], None) for account in left),
        *(
            item("changed", change.account, change.old, change.new)
            for change in changes
            if change.account not in entered_set
        ),
    ]


def _signed_pct(old: int | None, new: int | None) -> str | None:
    if not old or new is None:
        return None
    pct = Decimal(new - old) * 100 / Decimal(old)
    return f"{pct:+.2f}%"


def _alert(
    rule: HoldersRule, mint: str, report: list[dict[str, Any]], new_top: Top, decimals: int
) -> AlertMessage:
    # The same snapshot and changes give the same key: re-running a step is harmless.
    digest = hashlib.sha256(
        json.dumps({"changes": report, "top": _strings(new_top)}, sort_keys=True).encode()
    ).hexdigest()[:16]
    facts = {
        "mint": mint,
        "decimals": decimals,
        "min_change_pct": rule.min_change_pct,
        "count": len(report),
        "changes": report,
    }
    return make_alert(
        rule,
        subject=mint,
        reason="event",
        dedup_key=f"{rule.name}|{mint}|{digest}|event",
        facts=facts,
        wording=holders_text,
    )


SOURCE = HoldersSource()
