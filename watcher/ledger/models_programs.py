"""getProgramAccounts with the accounts' data (the kinds that decode accounts: ``nonce_accounts``).

Same rules as ``watcher.ledger.models``: a declared field of the wrong type makes the whole answer
invalid (``BadResponse``: never evidence). The data is asked for in base64; a node answers
``[data, "base64"]`` (a bare string, as the service's example shows one, is read as that base64).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, model_validator

from watcher.ledger.models import Pubkey, _Answer, _unique
from watcher.ledger.models_accounts import DATA_ENCODING, Account


class ProgramAccountData(_Answer):
    pubkey: Pubkey
    account: Account

    @model_validator(mode="before")
    @classmethod
    def _bare_data(cls, value: Any) -> Any:
        if isinstance(value, dict) and isinstance(value.get("account"), dict):
            account = value["account"]
            if isinstance(account.get("data"), str):
                return {**value, "account": {**account, "data": [account["data"], DATA_ENCODING]}}
        return value


def _each_once(accounts: list[ProgramAccountData]) -> list[ProgramAccountData]:
    _unique([account.pubkey for account in accounts], "account")
    return accounts


ProgramAccountsData = Annotated[list[ProgramAccountData], AfterValidator(_each_once)]
