"""Reading what an address holds, for the transactions that moved it (``new_transactions``):
its lamports with getMultipleAccounts, batched with the round's other reads (the accounts
reader's batcher), and with ``tokens`` its token accounts by owner (getTokenAccounts) and the
decimals of their mints. A read that fails says why and never raises: the transactions it was
for are notified all the same (``watcher.kinds.toolkit.tx_amounts``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import structlog

from watcher.core.errors import BadResponse, RpcError
from watcher.core.tally import count_balance_read
from watcher.kinds import base
from watcher.kinds.toolkit.layouts import NotDecodable, mint_decimals
from watcher.kinds.toolkit.tx_amounts import BalanceRead, Holding, ReadOutcome
from watcher.ledger.batching import AccountRead

log = structlog.get_logger(__name__)

TOKEN_PAGE = 1000  # getTokenAccounts' page
MAX_TOKEN_PAGES = 10  # an owner of more token accounts than this reads as a failed read


async def read_balances(
    ledger: base.LedgerReader,
    address: str,
    tokens: bool,
    known: Mapping[str, int] | None = None,
) -> ReadOutcome:
    """The address's lamports (getMultipleAccounts, batched with the other polls of the round)
    and, with ``tokens``, its token accounts' amounts by mint (getTokenAccounts by owner; the
    decimals of a mint not in ``known`` read with its account, in the same batch: a mint's
    decimals never change). A read that fails is said why, never raised: the transactions are
    still notified."""
    count_balance_read(tokens)  # the round's line, /metrics and rpc.budget count it
    known = known or {}
    try:
        amounts = await _token_amounts(ledger, address) if tokens else None
        unknown = sorted(mint for mint in amounts or () if mint not in known)
        batcher = ledger.shared_reads.accounts
        if unknown:
            own, *mints = await asyncio.gather(
                batcher.read(address), *(batcher.read(mint) for mint in unknown)
            )
        else:  # most reads: no task for a gather of one
            own, mints = await batcher.read(address), []
        decimals = {**known, **{m: _decimals(m, r) for m, r in zip(unknown, mints, strict=True)}}
        held = (
            None
            if amounts is None
            else {mint: Holding(amount, decimals[mint]) for mint, amount in amounts.items()}
        )
        lamports = 0 if own.account is None else own.account.lamports
        return ReadOutcome(BalanceRead(own.slot, lamports, held))
    except (TimeoutError, RpcError, NotDecodable) as exc:
        why = _why(exc)
        log.info("balance read failed", target=address, error=why)
        return ReadOutcome(error=why)


def _why(exc: Exception) -> str:
    if isinstance(exc, RpcError) and exc.method:
        return f"the balance read failed ({exc.method}: {type(exc).__name__})"
    return f"the balance read failed ({exc})"


async def _token_amounts(ledger: base.LedgerReader, owner: str) -> dict[str, int]:
    """The owner's raw amounts by mint (its token accounts of one mint added up)."""
    amounts: dict[str, int] = {}
    cursor: str | None = None
    for _ in range(MAX_TOKEN_PAGES):
        page = await ledger.get_token_accounts(
            mint=None, owner=owner, limit=TOKEN_PAGE, cursor=cursor
        )
        for account in page.token_accounts:
            if account.owner != owner:
                raise BadResponse("getTokenAccounts listed another owner's account")
            amounts[account.mint] = amounts.get(account.mint, 0) + account.amount
        cursor = page.cursor
        if not cursor or len(page.token_accounts) < TOKEN_PAGE:
            return amounts
    raise BadResponse(f"more than {MAX_TOKEN_PAGES} pages of token accounts")


def _decimals(mint: str, read: AccountRead) -> int:
    if read.account is None:
        raise NotDecodable(f"mint {mint} not found: its decimals are unknown")
    try:
        return mint_decimals(read.account.owner, read.account.raw_data)
    except NotDecodable as exc:
        raise NotDecodable(f"mint {mint}: {exc}; its decimals are unknown") from None
