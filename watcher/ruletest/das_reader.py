"""The rule-test reader's methods for the program and asset kinds: each call noted when it
fails, like the others of ``watcher.ruletest.runner._RecordingReader`` (mixed into it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from watcher.ledger.models_das import (
    Asset,
    AssetPage,
    EditionList,
    ProgramAccount,
    TokenAccountPage,
)
from watcher.ledger.rpc import RpcClient


class DasRecording:
    _client: RpcClient

    async def _call(self, what: str, call: Callable[[], Any]) -> Any:
        raise NotImplementedError

    async def get_token_accounts(
        self,
        *,
        mint: str | None = None,
        owner: str | None = None,
        limit: int = 1000,
        cursor: str | None = None,
    ) -> TokenAccountPage:
        result: TokenAccountPage = await self._call(
            f"token accounts of {owner or mint}",
            lambda: self._client.get_token_accounts(
                mint=mint, owner=owner, limit=limit, cursor=cursor
            ),
        )
        return result

    async def get_asset_page(self, method: str, params: list[Any]) -> AssetPage:
        result: AssetPage = await self._call(
            f"{method} {params[:2]}", lambda: self._client.get_asset_page(method, params)
        )
        return result

    async def get_program_accounts(
        self, program: str, filters: Sequence[Mapping[str, Any]] = ()
    ) -> list[ProgramAccount]:
        result: list[ProgramAccount] = await self._call(
            f"accounts of program {program}",
            lambda: self._client.get_program_accounts(program, filters),
        )
        return result

    async def get_assets(self, ids: Sequence[str]) -> list[Asset | None]:
        result: list[Asset | None] = await self._call(
            f"assets {', '.join(ids)}", lambda: self._client.get_assets(ids)
        )
        return result

    async def get_nft_editions(self, mint: str, *, page: int = 1, limit: int = 1000) -> EditionList:
        result: EditionList = await self._call(
            f"editions of {mint}",
            lambda: self._client.get_nft_editions(mint, page=page, limit=limit),
        )
        return result
