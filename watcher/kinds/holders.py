"""Source ``holders``: the top-20 token accounts of watched mints (rule kind ``holder_changes``).

State per mint (raw amounts as decimal strings: u64 does not fit a JSON double)::

    {"v": 1, "decimals": 6,
     "top": {token_account: "amount"},                     # the last snapshot
     "refs": {rule_name: {token_account: "amount"}},       # amount last notified, per rule
     "slot": 361665664, "at": 1790000000.0,                # context slot of that snapshot, when
     "seq": 42}                                            # accepted; snapshots accepted so far

An alert's dedup key names the observation (``seq``), not its content: a balance going back
to an amount seen before is a new move, notified again.

Doubts (``watcher.ledger.plausibility``): an answer older in slots than the snapshot (stale) or far
ahead of it is never taken; one where every holder of the snapshot is gone at once (an empty
list, or a top of which no account was in the snapshot) is taken once seen three polls in a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol, cast

from watcher.alerting.events import AlertMessage, StepOutcome, TargetState
from watcher.alerting.messages import RuleView, holders_text, make_alert, ui_amount
from watcher.kinds.base import LedgerReader
from watcher.kinds.diff import BalanceChange, Top, diff_holders, holder_changes, ranks
from watcher.ledger.models import TokenAmount
from watcher.ledger.plausibility import Doubt, SlotTip, picture_of, slot_allowance

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
    slot: int | None = None  # the answer's context slot


class HoldersSource:
    name = "holders"
    rule_kinds: tuple[str, ...] = ("holder_changes",)

    def targets(self, rules: Sequence[Any]) -> list[str]:
        return sorted({mint for rule in self._rules(rules) for mint in rule.mints})

    async def observe(
        self, ledger: LedgerReader, target: str, state: TargetState | None
    ) -> HoldersObservation:
        answer = await ledger.get_token_largest_accounts_with_context(target)
        return HoldersObservation(tuple(answer.value), answer.context.slot)

    def tip(self, observation: HoldersObservation) -> int | None:
        return observation.slot

    def doubt(
        self,
        state: TargetState | None,
        observation: HoldersObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        if not state or "top" not in state:
            return None  # the baseline: nothing to compare with
        last_slot, new_slot = state.get("slot"), observation.slot
        if last_slot is not None and new_slot is not None:
            if new_slot < last_slot:
                reason = f"stale answer: context slot {new_slot} is older than {last_slot}"
                return Doubt(reason, picture_of("stale", new_slot), confirmable=False)
            allowance = slot_allowance(now - float(state.get("at", now)))
            if new_slot - last_slot > allowance:
                reason = f"context slot {new_slot} is far ahead of {last_slot}"
                return Doubt(reason, picture_of("ahead", new_slot), confirmable=False)
        previous = set(state["top"])
        new_top = {acc.address: acc.amount for acc in observation.accounts if acc.address}
        picture = picture_of(sorted(new_top.items()))
        if previous and not new_top:
            return Doubt(f"no holder at all, where the last snapshot had {len(previous)}", picture)
        if len(previous) > 1 and not previous & set(new_top):
            reason = f"all {len(previous)} holders of the last snapshot gone at once"
            return Doubt(reason, picture)
        return None

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
        state_slot = (state or {}).get("slot")
        seq = int((state or {}).get("seq", 0)) + 1  # this snapshot's number: names its alerts
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
                    alerts.append(_alert(rule, target, report, seq, decimals))
        else:
            for rule in self._rules(rules):
                if target in rule.mints:
                    refs[rule.name] = dict(new_top)
        new_state: TargetState = {
            "v": STATE_VERSION,
            "decimals": decimals,
            "top": _strings(new_top),
            "refs": {rule: _strings(by_account) for rule, by_account in refs.items()},
            "slot": observation.slot if observation.slot is not None else state_slot,
            "at": now,
            "seq": seq,
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
    rule: HoldersRule, mint: str, report: list[dict[str, Any]], seq: int, decimals: int
) -> AlertMessage:
    # The key names the snapshot (its number), not its content: an amount coming back to one
    # seen before is a move of its own. Re-running a step from the same state gives the same
    # number, hence the same key: the outbox drops the copy.
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
        dedup_key=f"{rule.name}|{mint}|snapshot-{seq}|event",
        facts=facts,
        wording=holders_text,
    )


SOURCE = HoldersSource()
