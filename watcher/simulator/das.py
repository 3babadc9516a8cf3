"""The simulator's token accounts (getTokenAccounts) and their ledger state.

Kept beside the core ``Ledger`` (one ``DasLedger`` per ``Ledger``, found with ``das_of``), so
the asset and program methods add state here without touching the core ledger.

getTokenAccounts takes ``[mint, owner, page, limit, cursor, before, after]``; at least one of
mint and owner. Accounts are listed by address. ``page`` counts from 1; ``cursor`` (the
``cursor`` of the previous page) goes on after it; the two cannot be combined. A page's
``cursor`` is the last address on it, or null when no account comes after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final

from watcher.simulator.assets import AssetStore
from watcher.simulator.editions import Editions
from watcher.simulator.ledger import Ledger, PerLedger
from watcher.simulator.params import (
    _checked_pubkey,
    _positional,
    invalid_params,
)
from watcher.simulator.programs import ProgramAccounts
from watcher.simulator.recorded import API_VERSION

MAX_PAGE_LIMIT: Final = 1000


class _Unset:
    """``UNSET``: a field left as it is (``None`` is a real value: no delegate)."""


UNSET: Final = _Unset


@dataclass(frozen=True)
class TokenAccountEntry:
    address: str
    mint: str
    owner: str
    amount: int = 0
    frozen: bool = False
    delegate: str | None = None
    delegated_amount: int = 0
    close_authority: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "mint": self.mint,
            "owner": self.owner,
            "amount": self.amount,
            "frozen": self.frozen,
            "delegate": self.delegate,
            "delegated_amount": self.delegated_amount,
            "close_authority": self.close_authority,
            "extensions": None,
        }


class DasLedger:
    """Token accounts (and, later, assets and program accounts) of one simulated ledger."""

    def __init__(self, ledger: Ledger) -> None:
        # The ledger's lock: a transfer's token accounts change with its signature, at once.
        self._lock = ledger.lock
        self._token_accounts: dict[str, TokenAccountEntry] = {}
        self.assets = AssetStore()
        self.editions = Editions()
        self.programs = ProgramAccounts(lambda: {"apiVersion": API_VERSION, "slot": ledger.slot})

    # -- token accounts --------------------------------------------------------------------

    def set_token_account(
        self,
        address: str,
        *,
        mint: str | None = None,
        owner: str | None = None,
        amount: int | None = None,
        frozen: bool | None = None,
        delegate: str | type[_Unset] | None = UNSET,
        delegated_amount: int | None = None,
        close_authority: str | type[_Unset] | None = UNSET,
    ) -> None:
        """Creates the account (mint and owner required) or changes the given fields of it.
        ``delegate``: a pubkey, ``None`` (undelegated) or ``UNSET`` (kept); a new delegate's
        allowance is ``delegated_amount`` (default: the whole amount); ``close_authority``: a
        pubkey, ``None`` or ``UNSET`` (kept)."""
        with self._lock:
            known = self._token_accounts.get(address)
            if known is None:
                if mint is None or owner is None:
                    raise ValueError(f"a new token account {address} needs a mint and an owner")
                known = TokenAccountEntry(address, mint, owner)
            changes: dict[str, Any] = {}
            if mint is not None and mint != known.mint:
                raise ValueError(f"token account {address} is of mint {known.mint}")
            if owner is not None:
                changes["owner"] = owner
            if amount is not None:
                changes["amount"] = amount
            if frozen is not None:
                changes["frozen"] = frozen
            if delegate is not UNSET:
                changes["delegate"] = delegate
                changes["delegated_amount"] = 0 if delegate is None else (amount or known.amount)
            if delegated_amount is not None:
                changes["delegated_amount"] = delegated_amount
            if close_authority is not UNSET:
                changes["close_authority"] = close_authority
            self._token_accounts[address] = replace(known, **changes)

    def close_token_account(self, address: str) -> None:
        with self._lock:
            if self._token_accounts.pop(address, None) is None:
                raise KeyError(f"no token account {address}")

    def token_accounts(self, mint: str | None, owner: str | None) -> list[TokenAccountEntry]:
        with self._lock:
            return [
                entry
                for _, entry in sorted(self._token_accounts.items())
                if (mint is None or entry.mint == mint) and (owner is None or entry.owner == owner)
            ]

    # -- the RPC methods -------------------------------------------------------------------

    def get_token_accounts(self, params: list[Any]) -> Any:
        mint = _optional_pubkey(params, 0)
        owner = _optional_pubkey(params, 1)
        if mint is None and owner is None:
            raise invalid_params("Invalid params: either mint or owner is required")
        page = _optional_count(params, 2, "page")
        limit = _optional_count(params, 3, "limit")
        cursor = _positional(params, 4, required=False)
        if page is not None and page < 1:
            raise invalid_params("Invalid params: page starts at 1")
        if limit is None:
            limit = MAX_PAGE_LIMIT
        if not 1 <= limit <= MAX_PAGE_LIMIT:
            raise invalid_params(f"Invalid params: limit must be 1 to {MAX_PAGE_LIMIT}")
        if cursor is not None and (not isinstance(cursor, str) or page is not None):
            raise invalid_params("Invalid params: cursor is a string, not combined with page")
        matching = self.token_accounts(mint, owner)
        if cursor is not None:
            listed = [entry for entry in matching if entry.address > cursor]
        else:
            listed = matching[((page or 1) - 1) * limit :]
        shown = listed[:limit]
        more = len(listed) > limit
        result: dict[str, Any] = {
            "total": len(matching),
            "limit": limit,
            "token_accounts": [entry.to_json() for entry in shown],
            "errors": [],
            "cursor": shown[-1].address if shown and more else None,
        }
        if page is not None or cursor is None:
            result["page"] = page or 1
        return result

    def handlers(self) -> dict[str, Callable[[list[Any]], Any]]:
        """The methods this module answers, for ``RpcMethods``' table."""
        return {
            "getTokenAccounts": self.get_token_accounts,
            **self.assets.handlers(),
            **self.programs.handlers(),
            **self.editions.handlers(),
        }


_LEDGERS = PerLedger(DasLedger)


def das_of(ledger: Ledger) -> DasLedger:
    """The token accounts, assets and program accounts of ``ledger``."""
    return _LEDGERS.of(ledger)


def das_methods(ledger: Ledger) -> dict[str, Callable[[list[Any]], Any]]:
    return das_of(ledger).handlers()


def _optional_pubkey(params: list[Any], index: int) -> str | None:
    value = _positional(params, index, required=False)
    return None if value is None else _checked_pubkey(value)


def _optional_count(params: list[Any], index: int, name: str) -> int | None:
    value = _positional(params, index, required=False)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise invalid_params(f"Invalid params: invalid type for `{name}`: expected u32")
    return value
