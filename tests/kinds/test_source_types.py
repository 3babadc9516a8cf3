"""Each source is a ``Source`` of its own observation: ``mypy`` checks these assignments (its
``observe`` returns what its ``doubt``, ``tip`` and ``step`` take), and the test that every
registered source is among them."""

from __future__ import annotations

from typing import Any

from watcher.kinds import (
    SOURCES,
    account_source,
    asset_changed,
    assets,
    drift,
    editions,
    fee,
    holders,
    multisig_changed,
    nonce_accounts,
    program_accounts,
    supply,
    token_accounts,
    token_authorities,
    transactions,
    upgrade_authority,
    vat,
    votes_source,
)
from watcher.kinds.account_source import AccountObservation
from watcher.kinds.asset_changed import AssetObservation
from watcher.kinds.assets import AssetsObservation
from watcher.kinds.base import Source
from watcher.kinds.drift import ClusterObservation
from watcher.kinds.editions import EditionsObservation
from watcher.kinds.fee import FeeObservation
from watcher.kinds.holders import HoldersObservation
from watcher.kinds.nonce_accounts import NonceObservation
from watcher.kinds.powers import PowersObservation
from watcher.kinds.program_accounts import ProgramObservation
from watcher.kinds.supply import SupplyObservation
from watcher.kinds.token_accounts import TokenAccountsObservation
from watcher.kinds.transactions import SignaturesObservation
from watcher.kinds.vat import VatObservation
from watcher.ledger.models import VoteAccounts

VOTES: Source[VoteAccounts] = votes_source.SOURCE
ACCOUNTS: Source[AccountObservation] = account_source.SOURCE
ASSET: Source[AssetObservation] = asset_changed.SOURCE
ASSETS: Source[AssetsObservation] = assets.SOURCE
NODES: Source[ClusterObservation] = drift.SOURCE
EDITIONS: Source[EditionsObservation] = editions.SOURCE
FEES: Source[FeeObservation] = fee.SOURCE
HOLDERS: Source[HoldersObservation] = holders.SOURCE
NONCES: Source[NonceObservation] = nonce_accounts.SOURCE
MINT_POWERS: Source[PowersObservation] = token_authorities.SOURCE
PROGRAM_POWERS: Source[PowersObservation] = upgrade_authority.SOURCE
MULTISIG_POWERS: Source[PowersObservation] = multisig_changed.SOURCE
PROGRAMS: Source[ProgramObservation] = program_accounts.SOURCE
SUPPLY: Source[SupplyObservation] = supply.SOURCE
TOKEN_ACCOUNTS: Source[TokenAccountsObservation] = token_accounts.SOURCE
SIGNATURES: Source[SignaturesObservation] = transactions.SOURCE
VAT: Source[VatObservation] = vat.SOURCE
TYPED: list[Source[Any]] = [
    VOTES,
    ACCOUNTS,
    ASSET,
    ASSETS,
    NODES,
    EDITIONS,
    FEES,
    HOLDERS,
    NONCES,
    MINT_POWERS,
]
TYPED += [PROGRAM_POWERS, MULTISIG_POWERS, PROGRAMS, SUPPLY, TOKEN_ACCOUNTS, SIGNATURES, VAT]


def test_every_registered_source_is_typed_here() -> None:
    assert {source.name for source in TYPED} == set(SOURCES)
