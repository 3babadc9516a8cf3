"""The rule-test reader's methods for the account kinds: each call noted when it fails, like
the others of ``watcher.ruletest.runner._RecordingReader`` (mixed into it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from watcher.ledger.models_accounts import (
    FeeForMessage,
    MultipleAccounts,
    ParsedTokenAccounts,
    TokenAmountAnswer,
)
from watcher.ledger.rpc import RpcClient


class AccountRecording:
    _client: RpcClient

    async def _call(self, what: str, call: Callable[[], Any]) -> Any:
        raise NotImplementedError

    async def get_multiple_accounts(self, keys: Sequence[str]) -> MultipleAccounts:
        result: MultipleAccounts = await self._call(
            f"accounts {', '.join(keys)}", lambda: self._client.get_multiple_accounts(keys)
        )
        return result

    async def get_token_account_balance(self, account: str) -> TokenAmountAnswer:
        result: TokenAmountAnswer = await self._call(
            f"balance of {account}", lambda: self._client.get_token_account_balance(account)
        )
        return result

    async def get_token_supply(self, mint: str) -> TokenAmountAnswer:
        result: TokenAmountAnswer = await self._call(
            f"supply of {mint}", lambda: self._client.get_token_supply(mint)
        )
        return result

    async def get_fee_for_message(self, message: str) -> FeeForMessage | None:
        result: FeeForMessage | None = await self._call(
            "fee for message", lambda: self._client.get_fee_for_message(message)
        )
        return result

    async def get_parsed_token_accounts(self, keys: Sequence[str]) -> ParsedTokenAccounts:
        result: ParsedTokenAccounts = await self._call(
            f"token accounts {', '.join(keys)}",
            lambda: self._client.get_parsed_token_accounts(keys),
        )
        return result
