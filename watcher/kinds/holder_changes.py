"""Kind ``holder_changes``: the top-20 token accounts of watched mints (source ``holders``).

State per mint (raw amounts as decimal strings: u64 does not fit a JSON double)::

    {"v": 1, "decimals": 6,
     "top": {token_account: "amount"},                     # the last snapshot
     "refs": {rule_name: {token_account: "amount"}},       # amount last notified, per rule
     "slot": 361665664, "at": 1790000000.0,                # context slot of that snapshot, when
     "seq": 42,                                            # accepted; snapshots accepted so far
     "owners": {token_account: owner}}                     # cached (watcher.kinds.toolkit.owners)

An alert's dedup key names the observation (``seq``), not its content: a balance going back
to an amount seen before is a new move, notified again.

Doubts (``watcher.ledger.plausibility``): an answer older in slots than the snapshot (stale) or far
ahead of it is never taken; one where every holder of the snapshot is gone at once (an empty
list, or a top of which no account was in the snapshot) is taken once seen three polls in a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import Field

from watcher.alerting import formatting, messages
from watcher.config.rule_models import Backoff, EventRule, PositiveDuration, Pubkeys
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.alert_samples import change_samples, sample_key
from watcher.kinds.toolkit.metric_values import Sample, ui_units, unique
from watcher.kinds.toolkit.owners import kept_owners, resolve_owners
from watcher.ledger.models import TokenAmount
from watcher.ledger.plausibility import Doubt, SlotTip, older_slot, picture_of, slot_allowance

STATE_VERSION = 1


# -- the diff (pure) -------------------------------------------------------------------------

# A top-holders snapshot: token account address -> raw amount (integer, never a float).
Top = Mapping[str, int]


@dataclass(frozen=True)
class BalanceChange:
    account: str
    old: int  # the amount last notified for this account (or its baseline)
    new: int

    @property
    def pct(self) -> Fraction | None:
        """Signed change in percent of ``old``; None when ``old`` is 0 (no base to compare)."""
        if self.old == 0:
            return None
        return Fraction(self.new - self.old, self.old) * 100


def ranks(top: Top) -> dict[str, int]:
    """1-based rank by amount, largest first (ties by account, to be deterministic)."""
    ordered = sorted(top.items(), key=lambda item: (-item[1], item[0]))
    return {account: rank for rank, (account, _) in enumerate(ordered, start=1)}


def diff_holders(prev_top: Top, new_top: Top) -> tuple[list[str], list[str]]:
    """(accounts that entered the top, accounts that left it), each largest first."""
    entered = [account for account in ranks(new_top) if account not in prev_top]
    left = [account for account in ranks(prev_top) if account not in new_top]
    return entered, left


def holder_changes(
    refs: Top, new_top: Top, min_pct: float
) -> tuple[list[BalanceChange], dict[str, int]]:
    """Balances that moved by at least ``min_pct`` percent from their reference (the amount
    last notified, or the baseline), largest first, and the references after notifying them.

    Comparing with the last *notified* amount, not the last polled one, is what catches slow
    creep. An account without a reference gets its current amount as baseline; accounts no
    longer in the top lose theirs (they come back as "entered").
    """
    threshold = Fraction(Decimal(str(min_pct)))
    changes: list[BalanceChange] = []
    new_refs: dict[str, int] = {}
    for account in ranks(new_top):
        amount = new_top[account]
        if account not in refs:
            new_refs[account] = amount
            continue
        ref = refs[account]
        moved = amount > 0 if ref == 0 else abs(amount - ref) * 100 >= threshold * ref
        if moved and amount != ref:
            changes.append(BalanceChange(account, ref, amount))
            new_refs[account] = amount
        else:
            new_refs[account] = ref
    return changes, new_refs


class HolderChangesRule(EventRule, Backoff):
    kind: Literal["holder_changes"] = "holder_changes"
    mints: Pubkeys
    every: PositiveDuration = 60.0
    min_change_pct: Annotated[float, Field(gt=0)] = 5.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.mints


@dataclass(frozen=True)
class HoldersObservation:
    """getTokenLargestAccounts' value for one mint (at most 20 entries, largest first)."""

    accounts: tuple[TokenAmount, ...]
    slot: int | None = None  # the answer's context slot
    # Owners of token accounts not cached in the state yet (``watcher.kinds.toolkit.owners``).
    owners: Mapping[str, str] = field(default_factory=dict)


def holder_samples(
    rules: Sequence[Any], target: str, observation: HoldersObservation
) -> tuple[Sample, ...]:
    """Source ``holders``: the balance of each of the mint's largest token accounts."""
    return unique(
        Sample(
            "solana_token_largest_account_balance",
            (target, str(account.address)),
            ui_units(account.amount, account.decimals),
        )
        for account in observation.accounts
    )


class HoldersSource(base.ContextSlotted[HoldersObservation]):
    metric_values = staticmethod(holder_samples)  # what /metrics shows of an answer
    name = "holders"
    # Activity (a quiet target backs off): a holder in or out of the top, or its amount.
    facts = base.SourceFacts(("getTokenLargestAccounts",), noun="mints", activity_keys=("top",))
    rule_kinds: tuple[str, ...] = ("holder_changes",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> HoldersObservation:
        answer = await ledger.get_token_largest_accounts_with_context(target)
        cached = (state or {}).get("owners", {})
        owners = await resolve_owners(ledger, [acc.address for acc in answer.value], cached)
        return HoldersObservation(tuple(answer.value), answer.context.slot, owners)

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
            stale = older_slot(last_slot, new_slot)
            if stale is not None:
                return stale
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
        owners = {**(state or {}).get("owners", {}), **observation.owners}
        if state and "top" in state:
            prev_top = _amounts(state["top"])
            entered, left = diff_holders(prev_top, new_top)
            for rule in base.rules_of(rules, HolderChangesRule):
                if target not in rule.mints:
                    continue
                if rule.name not in refs:  # a rule new to this mint baselines silently
                    refs[rule.name] = dict(new_top)
                    continue
                changes, refs[rule.name] = holder_changes(
                    refs[rule.name], new_top, rule.min_change_pct
                )
                report = _report(prev_top, new_top, entered, left, changes, decimals, owners)
                if report:
                    alerts.append(_alert(rule, target, report, seq, decimals))
        else:
            for rule in base.rules_of(rules, HolderChangesRule):
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
            "owners": kept_owners(owners, {}, new_top),
        }
        return StepOutcome(state=new_state, alerts=tuple(alerts))


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
    owners: Mapping[str, str],
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
            "old_ui": None if old is None else formatting.ui_amount(old, decimals),
            "new_ui": None if new is None else formatting.ui_amount(new, decimals),
            "pct": pct,
            "rank": new_rank.get(account),
            "old_rank": old_rank.get(account),
            "owner": owners.get(account),
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
    rule: HolderChangesRule, mint: str, report: list[dict[str, Any]], seq: int, decimals: int
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
    return messages.snapshot_event(rule, subject=mint, target=mint, seq=seq, facts=facts)


SOURCE = HoldersSource()


# -- wording ---------------------------------------------------------------------------------


def holders_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    changes: Sequence[Mapping[str, Any]] = facts["changes"]
    noun = formatting.plural(len(changes), "top-holder change")
    mint = facts["mint"]
    title = f"{messages.rule_head(facts)} {noun} on {shown.short(mint)}"
    listed: list[str | None] = []
    for change in changes:
        listed += [_holder_line(change, shown), shown.link("address", change["account"])]
    body = formatting.lines(
        messages.rule_line(facts),
        f"Mint: {shown.name(mint)}",
        shown.link("address", mint),
        f"{noun}; a balance counts from a {float(facts['min_change_pct']):g}% move since it was "
        "last notified",
        "",
        *listed,
    )
    return title, body


def _holder_line(change: Mapping[str, Any], shown: formatting.Presentation) -> str:
    line = _holder_change(change, shown)
    owner = change.get("owner")
    return f"{line}; owner {shown.name(owner)}" if owner else line


def _holder_change(change: Mapping[str, Any], shown: formatting.Presentation) -> str:
    account = shown.name(change["account"])
    if change["kind"] == "entered":
        return f"- entered the top 20 at rank {change['rank']}: {account}  {change['new_ui']}"
    if change["kind"] == "left":
        was = f"(was rank {change['old_rank']}): {account}  was {change['old_ui']}"
        return f"- left the top 20 {was}"
    pct = change["pct"] if change["pct"] is not None else "new balance"
    return f"- rank {change['rank']}: {account}  {change['old_ui']} -> {change['new_ui']} ({pct})"


def samples(rule: HolderChangesRule) -> list[AlertMessage]:
    """A holder enters the top, one leaves it, one's amount changes."""
    mint = rule.mints[0]

    def top(amounts: dict[str, int]) -> HoldersObservation:
        held = (
            TokenAmount(address=account, amount=amount, decimals=6)
            for account, amount in amounts.items()
        )
        return HoldersObservation(tuple(held), 100)

    a, b, c, d = (sample_key(f"holder {n}") for n in range(4))
    first = top({a: 5_000_000, b: 3_000_000, c: 1_000})
    later = top({a: 5_000_000, b: 1_000_000, d: 2_000_000})
    return change_samples(SOURCE, rule, mint, first, later)


KIND = base.Kind(
    model=HolderChangesRule,
    source=SOURCE,
    wording=holders_text,
    samples=samples,
    digest=base.DigestWords(
        ("top-holder change", "top-holder changes"), ("mint", "mints"), base.count_listed("changes")
    ),
)
