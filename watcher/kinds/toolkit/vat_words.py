"""The words of a ``vat_eligibility`` alert (``watcher.kinds.vat_eligibility``): which condition of
the validator admission ticket fails, by how much, and when the next epoch boundary comes."""

from __future__ import annotations

from collections.abc import Sequence

from watcher.alerting import formatting, messages
from watcher.core.clock import human_duration
from watcher.kinds.toolkit.cluster import validator_lines, validator_title


def vat_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    failing: Sequence[str] = facts.get("failing") or ()
    if facts["reason"] == "resolved":
        title = validator_title(facts, shown, "passes the VAT again")
        summary = f"Resolved after {facts['duration']}: every condition of the ticket passes."
    elif facts.get("escalated"):
        title = validator_title(facts, shown, f"now would miss the VAT: {_short(facts)}")
        summary = (
            "It was near the cut when this alert fired; now it would fail the validator "
            "admission ticket at the next epoch boundary and sit out the epoch after it."
        )
    elif facts["reason"] == "repeat":
        what = "would still miss the VAT" if failing else "is still near the VAT cut"
        title = validator_title(facts, shown, f"{what} ({facts['duration']})")
        summary = f"Still so for {facts['duration']}, {messages.since_text(facts)}."
    elif failing:
        title = validator_title(facts, shown, f"would miss the VAT: {_short(facts)}")
        summary = (
            "It would fail the validator admission ticket at the next epoch boundary and sit "
            "out the epoch after it."
        )
    else:
        title = validator_title(
            facts, shown, f"near the VAT cut: rank {facts['rank']:,} of {facts['max_rank']:,}"
        )
        summary = (
            f"Inside the warning margin of {facts['warn_rank_margin']:,} places: a little "
            "less stake, or a little more for others, and it falls out."
        )
    body = formatting.lines(
        messages.rule_line(facts),
        *validator_lines(facts, shown, summary),
        *_condition_lines(facts),
        _boundary_line(facts),
    )
    return title, body


def _short(facts: messages.Facts) -> str:
    parts = []
    for condition in facts.get("failing") or ():
        if condition == "no_stake":
            parts.append("no activated stake")
        elif condition == "balance":
            parts.append(f"vote account {formatting.sol(facts['balance_short'])} short")
        else:
            parts.append(f"rank {facts['rank']:,} past {facts['max_rank']:,}")
    left = facts.get("seconds_left")
    tail = f" (boundary in {human_duration(float(left))})" if left is not None else ""
    return ", ".join(parts) + tail


def _condition_lines(facts: messages.Facts) -> list[str | None]:
    failing = set(facts.get("failing") or ())
    stake = int(facts.get("activated_stake") or 0)
    out: list[str | None] = []
    if "no_stake" in failing:
        out.append("No activated stake: the ticket takes only vote accounts with stake.")
    else:
        out.append(f"Activated stake: {formatting.sol(stake)}")
    balance = facts.get("balance")
    if balance is not None:
        need = (
            f"{formatting.sol(facts['min_balance'])} "
            f"(the rent-exempt {formatting.sol(facts['rent_exempt'])} plus "
            f"{formatting.sol(int(facts['min_balance']) - int(facts['rent_exempt']))})"
        )
        if "balance" in failing:
            out.append(
                f"Vote account balance: {formatting.sol(balance)}, "
                f"{formatting.sol(facts['balance_short'])} short of {need}"
            )
        else:
            out.append(f"Vote account balance: {formatting.sol(balance)} (needs {need})")
    rank = facts.get("rank")
    if rank is not None:
        among = f"among {facts['staked_accounts']:,} staked vote accounts"
        where = f"Rank by activated stake: {rank:,} {among}, cut at {facts['max_rank']:,}"
        if "rank" in failing:
            where += (
                f": it needs {formatting.sol(facts['stake_gap'])} more to pass the "
                f"{formatting.sol(facts['cut_stake'])} at place {facts['max_rank']:,}"
            )
        out.append(where)
    return out


def _boundary_line(facts: messages.Facts) -> str | None:
    left = facts.get("seconds_left")
    if left is None:
        return None
    return (
        f"Next epoch boundary: epoch {int(facts['epoch']) + 1:,} starts at slot "
        f"{facts['boundary_slot']:,}, {facts['slots_left']:,} slots away (about "
        f"{human_duration(float(left))})"
    )
