"""Token mints on the fake cluster (a part of ``Ledger``): each mint's token accounts and
their raw amounts, answered as getTokenLargestAccounts, getTokenSupply and token account data."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass
class _Mint:
    decimals: int
    holders: dict[str, int]  # token account -> raw amount


def ui_amount_string(amount: int, decimals: int) -> str:
    """Raw amount -> decimal string with trailing zeros trimmed, as a node prints it."""
    if decimals == 0:
        return str(amount)
    digits = str(amount).rjust(decimals + 1, "0")
    whole, fraction = digits[:-decimals], digits[-decimals:].rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def token_amount(amount: int, decimals: int) -> dict[str, Any]:
    return {
        "amount": str(amount),
        "decimals": decimals,
        "uiAmount": amount / 10**decimals,
        "uiAmountString": ui_amount_string(amount, decimals),
    }


class Tokens:
    """The mints of one ledger. Every public method takes ``lock`` (the ledger's) and calls
    ``changed`` after a change."""

    def __init__(self, lock: threading.RLock, changed: Callable[[], None]) -> None:
        self._lock = lock
        self._changed = changed
        self._mints: dict[str, _Mint] = {}

    def set_holders(self, mint: str, holders: Iterable[tuple[str, int]], decimals: int = 6) -> None:
        """Replaces every token account of ``mint`` (token account address -> raw amount)."""
        with self._lock:
            self._mints[mint] = _Mint(decimals, {account: amount for account, amount in holders})
            self._changed()

    def set_holder_amount(self, mint: str, account: str, amount: int) -> None:
        """Sets (or adds) one token account of a known mint."""
        with self._lock:
            self._mint(mint).holders[account] = amount
            self._changed()

    def holder_amount(self, mint: str, account: str) -> int:
        with self._lock:
            return self._mint(mint).holders[account]

    def remove_holder(self, mint: str, account: str) -> None:
        with self._lock:
            del self._mint(mint).holders[account]
            self._changed()

    def _mint(self, mint: str) -> _Mint:
        if mint not in self._mints:
            raise KeyError(f"unknown mint {mint}")
        return self._mints[mint]

    def largest_accounts(self, mint: str, top: int = 20) -> list[dict[str, Any]] | None:
        """The ``top`` largest token accounts, amount descending; None for an unknown mint."""
        with self._lock:
            found = self._mints.get(mint)
            if found is None:
                return None
            ranked = sorted(found.holders.items(), key=lambda item: (-item[1], item[0]))[:top]
            return [
                {"address": account, **token_amount(amount, found.decimals)}
                for account, amount in ranked
            ]

    def set_supply(self, mint: str, amount: int) -> None:
        """Mints or burns the difference on the mint's largest token account, so that the
        supply (the sum of its accounts) becomes ``amount``. ``ValueError`` when burning more
        than that account holds."""
        with self._lock:
            holders = self._mint(mint).holders
            if not holders:
                raise ValueError(f"mint {mint} has no token account to mint to or burn from")
            largest = max(holders, key=lambda account: (holders[account], account))
            after = holders[largest] + amount - sum(holders.values())
            if after < 0:
                raise ValueError(f"cannot burn more than the largest account holds ({largest})")
            holders[largest] = after
            self._changed()

    def token_supply(self, mint: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._mints.get(mint)
            if found is None:
                return None
            return token_amount(sum(found.holders.values()), found.decimals)

    def token_account(self, account: str) -> tuple[str, int, int] | None:
        """``(mint, raw amount, decimals)`` of a token account, or None."""
        with self._lock:
            for mint, found in self._mints.items():
                if account in found.holders:
                    return mint, found.holders[account], found.decimals
            return None
