"""A ledger's balances for the tests of ``new_transactions``' amounts: lamports by address,
token amounts by owner and mint, the mints' decimals, at a slot the test moves; each balance
call is recorded, and ``fail`` makes the next ones raise."""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from typing import Any

from watcher.core.errors import RpcError
from watcher.kinds.toolkit.layouts import TOKEN_PROGRAM
from watcher.ledger.batching import SharedReads
from watcher.ledger.models_accounts import MultipleAccounts
from watcher.ledger.models_das import TokenAccountPage

from support.values import key


def mint_data(decimals: int) -> str:
    """An initialized spl-token mint's 82 bytes, base64."""
    raw = struct.pack("<I32sQBBI32s", 0, bytes(32), 10**12, decimals, 1, 0, bytes(32))
    return base64.b64encode(raw).decode()


class Balances:
    """Mixed into a fake ledger: answers getMultipleAccounts and getTokenAccounts."""

    def __init__(self) -> None:
        self.lamports: dict[str, int] = {}
        self.tokens: dict[str, dict[str, int]] = {}  # owner -> mint -> raw amount
        self.decimals: dict[str, int] = {}  # mint -> decimals
        self.slot = 1_000
        self.balance_calls: list[tuple[str, Any]] = []
        self.fail: RpcError | None = None
        self.shared_reads = SharedReads(self)

    async def get_multiple_accounts(self, keys: Sequence[str]) -> MultipleAccounts:
        self.balance_calls.append(("getMultipleAccounts", list(keys)))
        if self.fail is not None:
            raise self.fail
        value: list[dict[str, Any] | None] = []
        for wanted in keys:
            if wanted in self.decimals:
                data = mint_data(self.decimals[wanted])
                value.append(
                    {"data": [data, "base64"], "executable": False, "lamports": 1_461_600}
                    | {"owner": TOKEN_PROGRAM}
                )
            elif wanted in self.lamports:
                value.append(
                    {"data": ["", "base64"], "executable": False, "lamports": self.lamports[wanted]}
                    | {"owner": "11111111111111111111111111111111"}
                )
            else:
                value.append(None)
        return MultipleAccounts.model_validate({"context": {"slot": self.slot}, "value": value})

    async def get_token_accounts(
        self, *, mint: str | None, owner: str | None, limit: int, cursor: str | None
    ) -> TokenAccountPage:
        self.balance_calls.append(("getTokenAccounts", owner))
        if self.fail is not None:
            raise self.fail
        held = self.tokens.get(owner or "", {})
        accounts = [
            {
                "address": key(f"ta-{owner}-{each}"),
                "mint": each,
                "owner": owner,
                "frozen": False,
                "amount": amount,
            }
            for each, amount in sorted(held.items())
        ]
        page = {"total": len(accounts), "limit": limit, "token_accounts": accounts}
        return TokenAccountPage.model_validate(page)
