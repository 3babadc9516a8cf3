"""What the sources ask of the ledger (``watcher.kinds.base.LedgerReader``), as typed methods
over one ``call``: the JSON-RPC client (``watcher.ledger.rpc.RpcClient``) and ``PinnedReader``
(its calls to one endpoint only) share them. The account and DAS methods are mixed in from
``rpc_accounts`` and ``rpc_das``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import TypeAdapter

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
from watcher.ledger.rpc_accounts import AccountMethods
from watcher.ledger.rpc_das import DasMethods

if TYPE_CHECKING:
    from watcher.ledger.rpc import RpcClient  # which imports this module
    from watcher.ledger.transport import Endpoint

T = TypeVar("T")

MAX_SIGNATURES_LIMIT = 1000

_SIGNATURES: TypeAdapter[list[SignatureEntry]] = TypeAdapter(SignaturePageAnswer)
_LARGEST_ACCOUNTS = TypeAdapter(TokenLargestAccounts)
_VOTE_ACCOUNTS = TypeAdapter(VoteAccounts)
_CLUSTER_NODES = TypeAdapter(ClusterNodes)


class LedgerMethods(AccountMethods, DasMethods):
    """The methods sources use (``watcher.kinds.base.LedgerReader``), over ``call``."""

    _signatures_commitment: str  # ``call`` is given by the subclasses (``rpc_call.OverCall``)

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
        if not 1 <= limit <= MAX_SIGNATURES_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_SIGNATURES_LIMIT}: {limit}")
        config: dict[str, Any] = {"commitment": self._signatures_commitment, "limit": limit}
        if before is not None:
            config["before"] = before
        if until is not None:
            config["until"] = until
        page = await self.call("getSignaturesForAddress", [address, config], _SIGNATURES)
        return page if isinstance(page, SignaturePage) else SignaturePage(page)

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


class PinnedReader(LedgerMethods):
    """A reader whose calls go to one endpoint only (retried there, never failed over)."""

    def __init__(self, client: RpcClient, endpoint: Endpoint) -> None:
        self._client, self.endpoint = client, endpoint
        self.public_url = endpoint.public_url
        self.commitment = client.commitment
        self._signatures_commitment = client._signatures_commitment

    async def call(
        self, method: str, params: list[Any] | None, model: type[T] | TypeAdapter[T]
    ) -> T:
        return await self._client.call(method, params, model, only=self.endpoint)
