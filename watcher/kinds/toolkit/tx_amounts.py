"""What moved across the new transactions of one address (kind ``new_transactions``): the
balances read in the poll that found them, against the read before. Pure.

The ledger service has no call returning a transaction's content, so the amounts are the
address's balances: its lamports (getMultipleAccounts) and, with ``tokens: true``, its token
accounts' amounts by mint (getTokenAccounts by owner). A poll reads them only when it found new
signatures (and once as the baseline), and the last read is kept in the target's state.

Counting rule: a notified change is always the difference between two reads taken one after the
other (``BalanceRead``, in slot order), so the changes notified over any run add up to the
balance's change between the first read and the last, whatever lands between a signature page
and the balance read. A transaction landing in that gap is in the read (its slot is at or below
the read's) but not in the page: its amount is in this poll's change and its signature is
listed by the next poll, whose own change then does not include it again (``counted_before``:
the signatures at or below the previous read's slot). A read that notified no change (a
baseline: the watch's first, or the tokens' first) has no notification to count such a
transaction in: its amount is in the baseline (``baseline_until``), and the next poll notifies it
whatever the thresholds, saying so (``in_baseline``). A read that fails, or answers at a slot
older than the kept one, is not taken: the transactions are notified without amounts, the kept
read stays, and the next read's change covers them too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal

from watcher.alerting import formatting
from watcher.core.lamports import LAMPORTS_DECIMALS

SOL = "SOL"  # the asset key of lamports; any other key is a mint


@dataclass(frozen=True)
class Holding:
    """One asset's raw amount (lamports, or a mint's smallest unit) and its decimals."""

    amount: int
    decimals: int


@dataclass(frozen=True)
class BalanceRead:
    """The balances of one address read at ``slot``: its lamports and, when read, its tokens
    by mint (None: not read; a read of an owner of no token accounts is empty).
    ``baseline_until``: a baseline's read slot (no notification showed its amounts): a
    transaction not listed yet at or below it is in these amounts, never notified as a change."""

    slot: int
    lamports: int
    tokens: Mapping[str, Holding] | None = None
    baseline_until: int | None = None

    def as_baseline(self, until: int | None = None) -> BalanceRead:
        """This read, its amounts a baseline up to ``until`` (its own slot by default)."""
        return replace(self, baseline_until=self.slot if until is None else until)

    def holdings(self) -> dict[str, Holding]:
        found = {SOL: Holding(self.lamports, LAMPORTS_DECIMALS)}
        found.update(self.tokens or {})
        return found

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"slot": self.slot, "lamports": str(self.lamports)}
        if self.tokens is not None:
            data["tokens"] = {
                mint: [str(held.amount), held.decimals]
                for mint, held in sorted(self.tokens.items())
            }
        if self.baseline_until is not None:
            data["baseline_until"] = self.baseline_until
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> BalanceRead | None:
        if not data:
            return None
        tokens = data.get("tokens")
        return cls(
            slot=int(data["slot"]),
            lamports=int(data["lamports"]),
            tokens=None
            if tokens is None
            else {mint: Holding(int(raw), int(dec)) for mint, (raw, dec) in tokens.items()},
            baseline_until=None if (until := data.get("baseline_until")) is None else int(until),
        )


@dataclass(frozen=True)
class ReadOutcome:
    """What the balance read of one poll gave: a read, or why there is none (``error``).
    Neither: the poll did not read (nothing new)."""

    read: BalanceRead | None = None
    error: str | None = None


NOT_READ = ReadOutcome()


@dataclass(frozen=True)
class Change:
    asset: str  # SOL or a mint
    decimals: int
    before: int | None  # None: no read before (the first one, or the asset's first)
    after: int

    @property
    def delta(self) -> int:
        return self.after - (self.before or 0)

    def facts(self) -> dict[str, Any]:
        return {
            "asset": self.asset,
            "decimals": self.decimals,
            "before": None if self.before is None else str(self.before),
            "after": str(self.after),
            "change": None if self.before is None else str(self.delta),
        }


@dataclass(frozen=True)
class Movement:
    """The changes of one poll (every asset that changed; SOL always, changed or not, when it
    was measured) and whether it was measured at all."""

    slot: int | None
    changes: tuple[Change, ...] = ()
    unknown: str | None = None  # why there are no amounts
    counted_before: int = 0  # signatures whose change a previous read already counted
    first_read: bool = False  # no read before: the balances, no change
    in_baseline: int = 0  # signatures whose change is in a baseline read (never notified)

    def facts(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "assets": [change.facts() for change in self.changes],
            "unknown": self.unknown,
            "counted_before": self.counted_before,
            "first_read": self.first_read,
            "in_baseline": self.in_baseline,
        }


def changes(before: BalanceRead | None, after: BalanceRead) -> tuple[Change, ...]:
    """Per asset of ``after`` (and of ``before``, gone to zero), SOL first then by mint: those
    that changed, SOL whatever. A token first read (``before.tokens`` None) has no before."""
    now = after.holdings()
    then = before.holdings() if before is not None else {}
    tokens_known = before is not None and before.tokens is not None
    found: list[Change] = []
    for asset in [SOL, *sorted((set(now) | set(then)) - {SOL})]:
        held = now.get(asset)
        was = then.get(asset)
        if held is None:
            if asset != SOL and after.tokens is None:
                continue  # tokens not read this time
            held = Holding(0, was.decimals if was else 0)  # the account is gone
        if before is None or (asset != SOL and not tokens_known):
            previous = None
        else:
            previous = was.amount if was is not None else 0
        if asset != SOL and previous is not None and previous == held.amount:
            continue
        found.append(Change(asset, held.decimals, previous, held.amount))
    return tuple(found)


def movement(
    kept: BalanceRead | None, outcome: ReadOutcome, fresh_slots: Sequence[int]
) -> tuple[Movement, BalanceRead | None]:
    """The movement a poll notifies and the read to keep, from the kept read and this poll's
    ``outcome`` (``fresh_slots``: the slots of the new signatures)."""
    # A signature at or below a baseline's slot is in that baseline; else at or below the
    # kept read's slot, in the notification that read made.
    until = -1 if kept is None or kept.baseline_until is None else kept.baseline_until
    in_baseline = sum(1 for slot in fresh_slots if slot <= until)
    counted = sum(1 for slot in fresh_slots if kept is not None and until < slot <= kept.slot)
    if outcome.read is None:
        reason = outcome.error or "the balances were not read"
        return Movement(None, unknown=reason, counted_before=counted, in_baseline=in_baseline), kept
    read = outcome.read
    if kept is not None and read.slot < kept.slot:
        reason = (
            f"the balances were read at slot {read.slot}, older than the last read's {kept.slot}"
        )
        return Movement(None, unknown=reason, counted_before=counted, in_baseline=in_baseline), kept
    if kept is not None and read.tokens is None and kept.tokens is not None:
        read = BalanceRead(read.slot, read.lamports, kept.tokens)  # tokens not asked for now
    if kept is None or (kept.tokens is None and read.tokens is not None):
        # Amounts shown with nothing before (the first read, the tokens' first): a baseline.
        read = read.as_baseline()
    return (
        Movement(
            read.slot,
            changes(kept, read),
            counted_before=counted,
            first_read=kept is None,
            in_baseline=in_baseline,
        ),
        read,
    )


def quiet_read(kept: BalanceRead | None, outcome: ReadOutcome) -> BalanceRead | None:
    """The read to keep from a poll with nothing new to notify: a change it shows belongs to
    transactions not listed yet (the next poll's), so only what was never read is taken: the
    tokens' baseline, or the whole read when there was none (the watch's baseline)."""
    read = outcome.read
    if read is None:
        return kept
    if kept is None:
        return read.as_baseline()
    if kept.tokens is None and read.tokens is not None:
        # The tokens' baseline: a transaction landing before this read moved them unnotified.
        return BalanceRead(kept.slot, kept.lamports, read.tokens).as_baseline(read.slot)
    return kept


# -- thresholds --------------------------------------------------------------------------------

Direction = Literal["in", "out", "any"]


@dataclass(frozen=True)
class Threshold:
    """The smallest change that counts, per asset, in UI units (``min_change_sol`` and
    ``min_change``), and the direction that counts."""

    min_sol: Decimal | None = None
    min_by_mint: Mapping[str, Decimal] = field(default_factory=dict)
    direction: Direction = "any"

    @property
    def is_set(self) -> bool:
        return self.min_sol is not None or bool(self.min_by_mint) or self.direction != "any"

    def words(self) -> str:
        parts = [] if self.min_sol is None else [f"min_change_sol {self.min_sol}"]
        parts += [f"min_change {amount} of {mint}" for mint, amount in self.min_by_mint.items()]
        if self.direction != "any":
            parts.append(f"direction {self.direction}")
        return ", ".join(parts)

    def counts(self, change: Change) -> bool:
        if change.before is None:
            return False  # nothing measured: no change to count
        delta = change.delta
        if delta == 0:
            return False
        if self.direction == "in" and delta < 0:
            return False
        if self.direction == "out" and delta > 0:
            return False
        minimum = self.min_sol if change.asset == SOL else self.min_by_mint.get(change.asset)
        if minimum is None:
            return True
        return bool(abs(delta) >= minimum * 10**change.decimals)


# A fall of SOL this large at least is a fee: only the address itself can spend its lamports,
# so a fall says it signed (``signed: notify``).
FEE_LAMPORTS = 5_000


def judge(
    threshold: Threshold,
    moved: Movement | None,
    *,
    failed: Sequence[bool],
    signed: bool,
    failed_notify: bool,
) -> dict[str, str] | None:
    """None: notify; else why the poll stays below the rule's thresholds (``reason``, the
    metric's label; ``detail``, in words). A threshold only suppresses a change it measured:
    amounts unknown (a failed read, a first read, a transaction in a baseline) are always
    notified."""
    if failed_notify and any(failed) and threshold.is_set:
        return None  # the rule asks about failed transactions
    if moved is None or moved.unknown is not None or moved.first_read or moved.in_baseline:
        return None
    if not threshold.is_set:
        if failed and all(failed) and not failed_notify:
            return {"reason": "failed", "detail": "only failed transactions (failed: ignore)"}
        return None
    if any(threshold.counts(change) for change in moved.changes):
        return None
    sol = next((c for c in moved.changes if c.asset == SOL and c.before is not None), None)
    if signed and sol is not None and sol.delta <= -FEE_LAMPORTS:
        return None  # the address signed (signed: notify)
    return {"reason": "below_threshold", "detail": f"every change below {threshold.words()}"}


# -- wording -----------------------------------------------------------------------------------


def signed(raw: int, decimals: int) -> str:
    text = formatting.ui_amount(raw, decimals)
    return text if raw < 0 else f"+{text}"


def change_line(
    asset: Mapping[str, Any], name: str, count: int | None = None, *, sol: bool = False
) -> str:
    """``SOL 1,200.5 -> 200.5 (-1,000) over 3 transactions``; a first read, ``SOL 200.5``."""
    decimals = int(asset["decimals"])
    after = formatting.ui_amount(int(asset["after"]), decimals)
    over = "" if count is None else f" over {formatting.plural(count, 'transaction')}"
    if asset.get("before") is None:
        return f"{name} {after} (no earlier read){over}"
    before = formatting.ui_amount(int(asset["before"]), decimals)
    delta = int(asset["change"])
    change = "no change" if delta == 0 and sol else signed(delta, decimals)
    return f"{name} {before} -> {after} ({change}){over}"


@dataclass(frozen=True)
class Amounts:
    headline: str  # the measured changes in a few words ("SOL -1,000, USDC +25,000")
    lines: tuple[str, ...]


def amounts_lines(facts: Mapping[str, Any], shown: formatting.Presentation) -> Amounts:
    """What moved, per asset (``tx_amounts``), for the body; and the changes for the title."""
    balances = facts.get("balances")
    if not balances:
        return Amounts("", ())
    if balances.get("unknown"):
        return Amounts("", (f"Amounts unknown: {balances['unknown']}",))
    count = int(facts["count"])
    lines: list[str] = [f"Balances read at slot {balances['slot']}:"]
    head: list[str] = []
    for index, asset in enumerate(balances.get("assets") or ()):
        is_sol = asset["asset"] == SOL
        # A mint is named by its label in the address book, else in full (shortened in titles).
        label = None if is_sol else shown.label(asset["asset"])
        name = SOL if is_sol else label or asset["asset"]
        line = change_line(asset, name, count if index == 0 else None, sol=is_sol)
        lines.append(f"  {line}")
        if asset.get("change") is not None and int(asset["change"]) != 0:
            short = SOL if is_sol else label or shown.short(asset["asset"])
            delta = signed(int(asset["change"]), int(asset["decimals"]))
            head.append(f"{short} {delta}")
    counted = int(balances.get("counted_before") or 0)
    if counted:
        lines.append(
            f"  ({formatting.plural(counted, 'transaction')} landed before the last balance read:"
            " counted in the previous notification)"
        )
    in_baseline = int(balances.get("in_baseline") or 0)
    if in_baseline:
        lines.append(
            f"  ({formatting.plural(in_baseline, 'transaction')} landed while the watch's"
            " baseline balances were read: in that baseline, not in the change above)"
        )
    return Amounts(", ".join(head), tuple(lines))
