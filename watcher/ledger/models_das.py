"""Pydantic models of the service's token-account, asset and program-account answers
(getTokenAccounts, getAssets..., getProgramAccounts).

Same rules as ``watcher.ledger.models``: unknown fields are ignored, a declared field of the
wrong type or out of range makes the whole answer invalid (``BadResponse``: never evidence),
except a field that only informs (``Unknowable``), which is then unknown. getProgramAccounts
with the accounts' data (``ProgramAccountData``) is asked for in base64; a node answers
``[data, "base64"]`` (a bare string, as the service's example shows one, is read as that base64).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from watcher.core.das_interfaces import Interface
from watcher.ledger.models import U64, U64_MAX, Lamports, Pubkey, Unknowable, _Answer, _unique
from watcher.ledger.models_accounts import DATA_ENCODING, Account

# Page sizes and totals: a count of accounts, never negative, never a float.
Count = Annotated[int, Field(strict=True, ge=0, le=2**32)]


class TokenAccount(_Answer):
    """One entry of getTokenAccounts' ``token_accounts``."""

    address: Pubkey
    mint: Pubkey
    owner: Pubkey
    frozen: bool = Field(strict=True)
    amount: U64
    delegate: Pubkey | None = None  # watched: a wrong one is a bad answer, never "undelegated"
    delegated_amount: Annotated[U64 | None, Unknowable("delegated_amount")] = 0
    close_authority: Annotated[Pubkey | None, Unknowable("close_authority")] = None


class TokenAccountPage(_Answer):
    """The result of getTokenAccounts: one page of token accounts."""

    total: Count
    limit: Count
    page: Annotated[Count | None, Unknowable("page")] = None
    token_accounts: list[TokenAccount]
    errors: list[Any] = Field(default_factory=list)
    cursor: str | None = None

    @model_validator(mode="after")
    def _fits_its_limit(self) -> TokenAccountPage:
        if self.limit and len(self.token_accounts) > self.limit:
            raise ValueError(f"{len(self.token_accounts)} accounts on a page of {self.limit}")
        _unique([account.address for account in self.token_accounts], "token account")
        return self


class AssetMetadata(_Answer):
    name: Annotated[str, Unknowable("name", "")] = ""
    symbol: Annotated[str, Unknowable("symbol", "")] = ""


class AssetContent(_Answer):
    json_uri: str = ""
    metadata: AssetMetadata = AssetMetadata()


class AssetGroup(_Answer):
    group_key: str
    group_value: str


class AssetCreator(_Answer):
    address: Pubkey
    share: int = Field(default=0, strict=True, ge=0, le=100)
    verified: bool = Field(default=False, strict=True)


class AssetOwnership(_Answer):
    owner: Pubkey
    frozen: bool = Field(strict=True)
    delegated: bool = Field(default=False, strict=True)
    delegate: Pubkey | None = None


class Asset(_Answer):
    """One asset of getAssets, searchAssets, getAssetsByGroup or getAssetsByCreator."""

    id: Pubkey
    interface: Interface
    content: AssetContent = AssetContent()
    grouping: list[AssetGroup] = Field(default_factory=list)
    creators: list[AssetCreator] = Field(default_factory=list)
    ownership: AssetOwnership
    burnt: bool = Field(strict=True)

    @property
    def collection(self) -> str | None:
        return next((g.group_value for g in self.grouping if g.group_key == "collection"), None)


class AssetPage(_Answer):
    """The result of searchAssets, getAssetsByGroup and getAssetsByCreator."""

    total: Count
    limit: Count
    page: Annotated[Count | None, Unknowable("page")] = None
    items: list[Asset]

    @model_validator(mode="after")
    def _fits_its_limit(self) -> AssetPage:
        if self.limit and len(self.items) > self.limit:
            raise ValueError(f"{len(self.items)} assets on a page of {self.limit}")
        _unique([asset.id for asset in self.items], "asset")
        return self


class AccountInfo(_Answer):
    """An account as getProgramAccounts lists it (its data is not read: asked sliced empty)."""

    lamports: Lamports
    owner: Pubkey
    executable: bool = Field(strict=True)
    space: Annotated[U64 | None, Unknowable("space")] = None


class ProgramAccount(_Answer):
    pubkey: Pubkey
    account: AccountInfo


def _each_account_once(accounts: list[ProgramAccount]) -> list[ProgramAccount]:
    _unique([account.pubkey for account in accounts], "account")
    return accounts


ProgramAccounts = Annotated[list[ProgramAccount], AfterValidator(_each_account_once)]


class ProgramAccountData(_Answer):
    """A program's account with its data (the kinds that decode accounts: ``nonce_accounts``)."""

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


def _each_data_account_once(accounts: list[ProgramAccountData]) -> list[ProgramAccountData]:
    _unique([account.pubkey for account in accounts], "account")
    return accounts


ProgramAccountsData = Annotated[list[ProgramAccountData], AfterValidator(_each_data_account_once)]


class Edition(_Answer):
    mint: Pubkey
    edition_address: Annotated[Pubkey | None, Unknowable("edition_address")] = None
    edition: Annotated[int, Field(strict=True, ge=1, le=U64_MAX)]


class EditionList(_Answer):
    """The result of getNftEditions: one page of a master edition's prints."""

    total: Count
    limit: Count
    page: Annotated[Count | None, Unknowable("page")] = None
    master_edition_address: Annotated[Pubkey | None, Unknowable("master_edition_address")] = None
    supply: U64
    max_supply: U64 | None = None  # None reads "unlimited": a wrong one stays a bad answer
    editions: list[Edition]

    @model_validator(mode="after")
    def _fits(self) -> EditionList:
        if self.limit and len(self.editions) > self.limit:
            raise ValueError(f"{len(self.editions)} editions on a page of {self.limit}")
        _unique([str(edition.edition) for edition in self.editions], "edition number")
        if self.max_supply is not None and self.supply > self.max_supply:
            raise ValueError(f"supply {self.supply} is above max_supply {self.max_supply}")
        return self
