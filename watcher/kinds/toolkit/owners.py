"""Owners of token accounts, for ``holder_changes``' messages: read once with getMultipleAccounts
(``jsonParsed``) and cached in the mint's state (``"owners"``), so a poll asks only for the
token accounts it has not seen yet (at most the 20 of getTokenLargestAccounts: one call).

Naming owners is a courtesy: a failed call leaves them unknown this poll (asked again at the
next) and never fails the observation of the holders themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import structlog

from watcher.core.errors import RpcError
from watcher.kinds import base
from watcher.ledger.models_accounts import MAX_KEYS_PER_CALL

log = structlog.get_logger(__name__)


def missing_owners(accounts: Iterable[str], known: Mapping[str, str]) -> list[str]:
    """The token accounts whose owner is not cached yet, in order, at most one call's worth."""
    return [account for account in dict.fromkeys(accounts) if account not in known][
        :MAX_KEYS_PER_CALL
    ]


async def resolve_owners(
    ledger: base.LedgerReader, accounts: Iterable[str], known: Mapping[str, str]
) -> dict[str, str]:
    """Owners of ``accounts`` not in ``known`` (the cache); {} when the call fails."""
    wanted = missing_owners(accounts, known)
    if not wanted:
        return {}
    try:
        answer = await ledger.get_parsed_token_accounts(wanted)
    except RpcError as exc:
        log.info("token account owners not resolved this poll", error=str(exc))
        return {}
    return {
        account: parsed.owner
        for account, parsed in zip(wanted, answer.value, strict=True)
        if parsed is not None
    }


def kept_owners(
    cache: Mapping[str, str], found: Mapping[str, str], top: Iterable[str]
) -> dict[str, str]:
    """The cache after a poll: owners of the accounts in the top only (pure)."""
    merged = {**cache, **found}
    return {account: merged[account] for account in top if account in merged}
