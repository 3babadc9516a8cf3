"""Each source is a ``Source`` of its own observation: ``mypy`` checks these assignments (its
``observe`` returns what its ``doubt``, ``tip`` and ``step`` take; a shared source composes
parts of that observation), and the test that every registered source is among them."""

from __future__ import annotations

from typing import Any

from watcher.kinds import (
    SOURCES,
    asset_changed,
    fee_above,
    holder_changes,
    multisig_changed,
    new_assets,
    new_editions,
    new_transactions,
    nonce_accounts,
    program_accounts,
    supply_changed,
    token_accounts,
    token_authorities,
    upgrade_authority,
    vat_eligibility,
    version_drift,
)
from watcher.kinds.asset_changed import AssetObservation
from watcher.kinds.base import SharedSource, Source
from watcher.kinds.fee_above import FeeObservation
from watcher.kinds.holder_changes import HoldersObservation
from watcher.kinds.new_assets import AssetsObservation
from watcher.kinds.new_editions import EditionsObservation
from watcher.kinds.new_transactions import SignaturesObservation
from watcher.kinds.nonce_accounts import NonceObservation
from watcher.kinds.program_accounts import ProgramObservation
from watcher.kinds.sources import accounts, votes
from watcher.kinds.sources.accounts import AccountObservation
from watcher.kinds.sources.powers import PowersObservation
from watcher.kinds.supply_changed import SupplyObservation
from watcher.kinds.token_accounts import TokenAccountsObservation
from watcher.kinds.vat_eligibility import VatObservation
from watcher.kinds.version_drift import ClusterObservation
from watcher.ledger.models import VoteAccounts

VOTES: Source[VoteAccounts] = votes.SOURCE
ACCOUNTS: Source[AccountObservation] = accounts.SOURCE
ASSET: Source[AssetObservation] = asset_changed.SOURCE
ASSETS: Source[AssetsObservation] = new_assets.SOURCE
NODES: Source[ClusterObservation] = version_drift.SOURCE
EDITIONS: Source[EditionsObservation] = new_editions.SOURCE
FEES: Source[FeeObservation] = fee_above.SOURCE
HOLDERS: Source[HoldersObservation] = holder_changes.SOURCE
NONCES: Source[NonceObservation] = nonce_accounts.SOURCE
MINT_POWERS: Source[PowersObservation] = token_authorities.SOURCE
PROGRAM_POWERS: Source[PowersObservation] = upgrade_authority.SOURCE
MULTISIG_POWERS: Source[PowersObservation] = multisig_changed.SOURCE
PROGRAMS: Source[ProgramObservation] = program_accounts.SOURCE
SUPPLY: Source[SupplyObservation] = supply_changed.SOURCE
TOKEN_ACCOUNTS: Source[TokenAccountsObservation] = token_accounts.SOURCE
SIGNATURES: Source[SignaturesObservation] = new_transactions.SOURCE
VAT: Source[VatObservation] = vat_eligibility.SOURCE
SHARED_VOTES: SharedSource[VoteAccounts] = votes.SOURCE
SHARED_ACCOUNTS: SharedSource[AccountObservation] = accounts.SOURCE
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
