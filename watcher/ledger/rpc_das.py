"""The RpcClient's methods for token accounts, assets, editions and program accounts (the
program and asset kinds), over ``call``: mixed into ``watcher.ledger.rpc_methods.LedgerMethods``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter

from watcher.core.errors import BadResponse
from watcher.ledger.models_das import (
    Asset,
    AssetPage,
    EditionList,
    ProgramAccount,
    ProgramAccounts,
    TokenAccountPage,
)
from watcher.ledger.models_programs import ProgramAccountData, ProgramAccountsData
from watcher.ledger.rpc_call import OverCall

_PROGRAM_ACCOUNTS = TypeAdapter(ProgramAccounts)
_PROGRAM_ACCOUNTS_DATA = TypeAdapter(ProgramAccountsData)
_ASSETS = TypeAdapter(list[Asset | None])
ASSET_PAGE_METHODS = frozenset({"getAssetsByGroup", "getAssetsByCreator", "searchAssets"})


class DasMethods(OverCall):
    async def get_token_accounts(
        self,
        *,
        mint: str | None = None,
        owner: str | None = None,
        limit: int = 1000,
        cursor: str | None = None,
    ) -> TokenAccountPage:
        """One page of the token accounts of a mint and/or an owner (``cursor``: the page after
        the one that answered it)."""
        params: list[Any] = [mint, owner, None, limit, cursor]
        return await self.call("getTokenAccounts", params, TokenAccountPage)

    async def get_asset_page(self, method: str, params: list[Any]) -> AssetPage:
        """One page of getAssetsByGroup, getAssetsByCreator or searchAssets (``params`` as the
        method takes them)."""
        if method not in ASSET_PAGE_METHODS:
            raise ValueError(f"{method} does not answer an asset page")
        return await self.call(method, params, AssetPage)

    async def get_program_accounts(
        self, program: str, filters: Sequence[Mapping[str, Any]] = ()
    ) -> list[ProgramAccount]:
        """The accounts of ``program`` matching ``filters``, without their data (sliced empty:
        only their keys, owners and sizes travel)."""
        config = {
            "commitment": self.commitment,
            "encoding": "base64",
            "dataSlice": {"offset": 0, "length": 0},
            "filters": list(filters),
        }
        return await self.call("getProgramAccounts", [program, config], _PROGRAM_ACCOUNTS)

    async def get_program_accounts_data(
        self, program: str, filters: Sequence[Mapping[str, Any]]
    ) -> list[ProgramAccountData]:
        """The accounts of ``program`` matching ``filters``, with their data (base64): for the
        kinds that decode them (``nonce_accounts``)."""
        config = {"commitment": self.commitment, "encoding": "base64", "filters": list(filters)}
        return await self.call("getProgramAccounts", [program, config], _PROGRAM_ACCOUNTS_DATA)

    async def get_assets(self, ids: Sequence[str]) -> list[Asset | None]:
        """One Asset per id, in the order asked (None: no such asset)."""
        answer = await self.call("getAssets", [list(ids)], _ASSETS)
        if len(answer) != len(ids):
            raise BadResponse(
                f"getAssets answered {len(answer)} assets for {len(ids)} ids", method="getAssets"
            )
        return answer

    async def get_nft_editions(self, mint: str, *, page: int = 1, limit: int = 1000) -> EditionList:
        return await self.call("getNftEditions", [mint, page, limit], EditionList)
