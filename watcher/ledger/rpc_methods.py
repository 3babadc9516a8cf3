"""The typed ledger methods sources use (``watcher.kinds.base.LedgerReader``), each one JSON-RPC
call over ``call``.

``LedgerMethods`` is the contract: a subclass gives ``call`` (a method, params, and the model the
result must fit; raises ``RpcError``) and its commitment (getSignaturesForAddress, which refuses
one below confirmed, is asked at ``signatures_commitment``). Each method builds its params,
asks for its model and checks what the model cannot (one answer per key asked).
``PinnedReader``: the same methods, their calls to one endpoint of a client only.
``PrimedReader``: the same methods, one call of which was answered already (made in a batch with
other polls' calls).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from pydantic import TypeAdapter

from watcher.core.errors import BadResponse, RpcError
from watcher.ledger.batching import SharedReads
from watcher.ledger.models import (
    ClusterNode,
    ClusterNodes,
    SignatureEntry,
    SignaturePage,
    SignaturePageAnswer,
    TokenAmount,
    TokenLargestAccounts,
    VoteAccounts,
)
from watcher.ledger.models_accounts import (
    DATA_ENCODING,
    MAX_KEYS_PER_CALL,
    FeeForMessage,
    MultipleAccounts,
    ParsedTokenAccounts,
    TokenAmountAnswer,
)
from watcher.ledger.models_das import (
    Asset,
    AssetPage,
    EditionList,
    ProgramAccount,
    ProgramAccountData,
    ProgramAccounts,
    ProgramAccountsData,
    TokenAccountPage,
)

T = TypeVar("T")

MAX_SIGNATURES_LIMIT = 1000
ASSET_PAGE_METHODS = frozenset({"getAssetsByGroup", "getAssetsByCreator", "searchAssets"})

_SIGNATURES: TypeAdapter[list[SignatureEntry]] = TypeAdapter(SignaturePageAnswer)
_LARGEST_ACCOUNTS = TypeAdapter(TokenLargestAccounts)
_VOTE_ACCOUNTS = TypeAdapter(VoteAccounts)
_CLUSTER_NODES = TypeAdapter(ClusterNodes)
_MULTIPLE_ACCOUNTS = TypeAdapter(MultipleAccounts)
_TOKEN_AMOUNT = TypeAdapter(TokenAmountAnswer)
_FEE = TypeAdapter(FeeForMessage | None)
_PARSED_TOKEN_ACCOUNTS = TypeAdapter(ParsedTokenAccounts)
_PROGRAM_ACCOUNTS = TypeAdapter(ProgramAccounts)
_PROGRAM_ACCOUNTS_DATA = TypeAdapter(ProgramAccountsData)
_ASSETS = TypeAdapter(list[Asset | None])


class Call(NamedTuple):
    """One call known before it is made: its method, its params, and the model its answer must
    fit. (A tuple: a sweep makes one per target.)"""

    method: str
    params: list[Any] | None
    model: Any


def signatures_commitment(commitment: str) -> str:
    """The commitment getSignaturesForAddress is asked at: ``commitment``, confirmed at least."""
    return "confirmed" if commitment == "processed" else commitment


class LedgerMethods:
    """The methods sources use, over ``call`` (given by the subclass), at ``commitment``."""

    def __init__(self, commitment: str) -> None:
        self.commitment = commitment
        self.signatures_commitment = signatures_commitment(commitment)
        self.shared_reads = SharedReads(self)

    async def call(
        self, method: str, params: list[Any] | None, model: type[T] | TypeAdapter[T]
    ) -> T:
        raise NotImplementedError

    # -- signatures, largest holders, votes, nodes -------------------------------------------------

    async def get_signatures_for_address(
        self,
        address: str,
        *,
        before: str | None = None,
        until: str | None = None,
        limit: int = MAX_SIGNATURES_LIMIT,
    ) -> SignaturePage:
        """Newest first; ``before`` and ``until`` are exclusive and left out when None. An entry
        whose signature or slot is unreadable is left out (``SignaturePage.listed`` counts it)."""
        call = self.signatures_call(address, before=before, until=until, limit=limit)
        page = await self.call(call.method, call.params, _SIGNATURES)
        return page if isinstance(page, SignaturePage) else SignaturePage(page)

    def signatures_call(
        self,
        address: str,
        *,
        before: str | None = None,
        until: str | None = None,
        limit: int = MAX_SIGNATURES_LIMIT,
    ) -> Call:
        """The getSignaturesForAddress call ``get_signatures_for_address`` makes with these
        arguments, made elsewhere (a sweep's batch of first calls: ``PrimedReader``)."""
        if not 1 <= limit <= MAX_SIGNATURES_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_SIGNATURES_LIMIT}: {limit}")
        config: dict[str, Any] = {"commitment": self.signatures_commitment, "limit": limit}
        if before is not None:
            config["before"] = before
        if until is not None:
            config["until"] = until
        return Call("getSignaturesForAddress", [address, config], _SIGNATURES)

    async def get_token_largest_accounts(self, mint: str) -> list[TokenAmount]:
        return list((await self.get_token_largest_accounts_with_context(mint)).value)

    async def get_token_largest_accounts_with_context(self, mint: str) -> TokenLargestAccounts:
        """The answer with its context: the slot it was read at tells a stale answer."""
        params = [mint, {"commitment": self.commitment}]
        return await self.call("getTokenLargestAccounts", params, _LARGEST_ACCOUNTS)

    async def get_vote_accounts(self) -> VoteAccounts:
        # Without keepUnstakedDelinquents an unstaked delinquent would look absent, not delinquent.
        config = {"commitment": self.commitment, "keepUnstakedDelinquents": True}
        return await self.call("getVoteAccounts", [config], _VOTE_ACCOUNTS)

    async def get_cluster_nodes(self) -> list[ClusterNode]:
        return await self.call("getClusterNodes", None, _CLUSTER_NODES)

    # -- accounts, supplies, fees ------------------------------------------------------------------
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

    # -- token accounts, assets, editions, program accounts ----------------------------------------
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


class PrimedReader(LedgerMethods):
    """``reader``'s methods, one call of which was made already: ``answer`` is its value or the
    ``RpcError`` it failed with. The first time that call is asked (same method, equal params)
    it gets that answer without waiting; every other call goes to ``reader``."""

    def __init__(self, reader: LedgerMethods, call: Call, answer: Any) -> None:
        # Not LedgerMethods' own: the reads the polls share stay ``reader``'s.
        self.commitment = reader.commitment
        self.signatures_commitment = reader.signatures_commitment
        self.shared_reads = reader.shared_reads
        self._reader = reader
        self._call: Call | None = call
        self._answer = answer

    async def call(
        self, method: str, params: list[Any] | None, model: type[T] | TypeAdapter[T]
    ) -> T:
        made = self._call
        if made is not None and method == made.method and params == made.params:
            self._call = None  # once: a later page asks again
            answer = self._answer
            if isinstance(answer, RpcError):
                raise answer
            value: T = answer
            return value
        return await self._reader.call(method, params, model)
