"""The RpcClient's methods for plain and token accounts, supplies and fees (the account kinds),
over ``call``: mixed into ``watcher.ledger.rpc_methods.LedgerMethods``."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import TypeAdapter

from watcher.core.errors import BadResponse
from watcher.ledger.models_accounts import (
    DATA_ENCODING,
    MAX_KEYS_PER_CALL,
    FeeForMessage,
    MultipleAccounts,
    ParsedTokenAccounts,
    TokenAmountAnswer,
)
from watcher.ledger.rpc_call import OverCall

_MULTIPLE_ACCOUNTS = TypeAdapter(MultipleAccounts)
_TOKEN_AMOUNT = TypeAdapter(TokenAmountAnswer)
_FEE = TypeAdapter(FeeForMessage | None)
_PARSED_TOKEN_ACCOUNTS = TypeAdapter(ParsedTokenAccounts)


class AccountMethods(OverCall):
    async def get_multiple_accounts(self, keys: Sequence[str]) -> MultipleAccounts:
        """One element per key (None: no such account); at most 100 keys per call."""
        if not 1 <= len(keys) <= MAX_KEYS_PER_CALL:
            raise ValueError(f"between 1 and {MAX_KEYS_PER_CALL} keys per call: {len(keys)}")
        config = {"commitment": self.commitment, "encoding": DATA_ENCODING}
        answer = await self.call("getMultipleAccounts", [list(keys), config], _MULTIPLE_ACCOUNTS)
        if len(answer.value) != len(keys):
            got = f"{len(answer.value)} accounts for {len(keys)} keys"
            raise BadResponse(got, method="getMultipleAccounts")
        return answer

    async def get_token_account_balance(self, account: str) -> TokenAmountAnswer:
        params = [account, {"commitment": self.commitment}]
        return await self.call("getTokenAccountBalance", params, _TOKEN_AMOUNT)

    async def get_token_supply(self, mint: str) -> TokenAmountAnswer:
        params = [mint, {"commitment": self.commitment}]
        return await self.call("getTokenSupply", params, _TOKEN_AMOUNT)

    async def get_fee_for_message(self, message: str) -> FeeForMessage | None:
        """The fee in lamports; None (or a None value): the message's blockhash expired."""
        params = [message, {"commitment": self.commitment}]
        return await self.call("getFeeForMessage", params, _FEE)

    async def get_parsed_token_accounts(self, keys: Sequence[str]) -> ParsedTokenAccounts:
        """getMultipleAccounts with jsonParsed: each token account's owner (None: not one)."""
        if not 1 <= len(keys) <= MAX_KEYS_PER_CALL:
            raise ValueError(f"between 1 and {MAX_KEYS_PER_CALL} keys per call: {len(keys)}")
        config = {"commitment": self.commitment, "encoding": "jsonParsed"}
        params = [list(keys), config]
        answer = await self.call("getMultipleAccounts", params, _PARSED_TOKEN_ACCOUNTS)
        if len(answer.value) != len(keys):
            got = f"{len(answer.value)} accounts for {len(keys)} keys"
            raise BadResponse(got, method="getMultipleAccounts")
        return answer
