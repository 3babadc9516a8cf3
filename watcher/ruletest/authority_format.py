"""Rule-test ledger seeds and actions for the accounts that hold powers over funds: durable
nonce accounts (``nonce_accounts``).

```yaml
ledger:
  nonce_accounts: [{account: NONCE_ACCOUNT, authority: SIGNER}]
steps:
  - actions:
      - set_nonce_account: {account: NONCE_ACCOUNT, authority: SIGNER}   # creates one
      - set_nonce_account: {account: NONCE_ACCOUNT, advance: true}       # a transaction ran
      - set_nonce_account: {account: NONCE_ACCOUNT, authority: OTHER}    # authority moved
      - close_nonce_account: NONCE_ACCOUNT
```

Mints (``token_authorities``), upgradeable programs (``upgrade_authority``) and Squads v4
multisigs (``multisig_changed``); a key left out keeps its value, ``null`` removes a power:

```yaml
ledger:
  mints: [{mint: MINT, mint_authority: KEY, freeze_authority: null, token_2022: false}]
  programs: [{program: PROGRAM, upgrade_authority: KEY}]
  multisigs: [{multisig: MULTISIG, members: {KEY: 7}, threshold: 1, time_lock: 0}]
steps:
  - actions:
      - set_mint: {mint: MINT, mint_authority: OTHER, permanent_delegate: KEY}
      - set_upgradeable_program: {program: PROGRAM, redeploy: true}
      - set_upgradeable_program: {program: PROGRAM, upgrade_authority: null}   # immutable
      - set_multisig: {multisig: MULTISIG, threshold: 2, members: {KEY: 7, OTHER: 3}}
```
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from watcher.config.rule_models import Pubkey
from watcher.ruletest.fields import given
from watcher.simulator import KEEP, Ledger
from watcher.simulator.authorities import set_mint, set_multisig, set_upgradeable_program
from watcher.simulator.nonces import close_nonce_account, set_nonce_account


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NonceAccountChange(_Strict):
    """Creates a nonce account (``authority`` given) or changes it: another authority, its
    nonce advanced (``advance: true``) or set (``nonce``: 32 bytes in base58)."""

    account: Pubkey
    authority: Pubkey | None = None
    advance: bool = False
    nonce: Annotated[str, Field(pattern="^[1-9A-HJ-NP-Za-km-z]{32,44}$")] | None = None


class MintChange(_Strict):
    """Creates a mint or changes the powers given (``null``: nobody holds it)."""

    mint: Pubkey
    token_2022: bool | None = None
    mint_authority: Pubkey | None = None
    freeze_authority: Pubkey | None = None
    permanent_delegate: Pubkey | None = None  # Token-2022 only
    transfer_hook_program: Pubkey | None = None  # Token-2022 only

    def changes(self) -> dict[str, Any]:
        changes = given(self, "mint")
        if changes.get("token_2022") is None:
            changes.pop("token_2022", None)
        return changes


class ProgramChange(_Strict):
    """Deploys an upgradeable program (``upgrade_authority`` given) or changes it."""

    program: Pubkey
    upgrade_authority: Pubkey | None = None  # null: immutable
    redeploy: bool = False


class MultisigChange(_Strict):
    """Creates a Squads v4 multisig (``members`` given) or changes what is given."""

    multisig: Pubkey
    members: dict[Pubkey, Annotated[int, Field(ge=0, le=7)]] | None = None  # key -> mask
    threshold: Annotated[int, Field(ge=1, le=65535)] | None = None
    time_lock: Annotated[int, Field(ge=0, le=2**32 - 1)] | None = None
    config_authority: Pubkey | None = None
    transaction_index: Annotated[int, Field(ge=0)] | None = None  # not a power: a counter

    def changes(self) -> dict[str, Any]:
        return {
            key: value
            for key, value in given(self, "multisig").items()
            if value is not None or key == "config_authority"
        }


def seed_mint(ledger: Ledger, change: MintChange) -> None:
    set_mint(ledger, change.mint, **change.changes())


def seed_program(ledger: Ledger, change: ProgramChange) -> None:
    given = change.model_fields_set
    authority: Any = change.upgrade_authority if "upgrade_authority" in given else KEEP
    set_upgradeable_program(
        ledger, change.program, upgrade_authority=authority, redeploy=change.redeploy
    )


def seed_multisig(ledger: Ledger, change: MultisigChange) -> None:
    set_multisig(ledger, change.multisig, **change.changes())


def seed_nonce_account(ledger: Ledger, seed: NonceAccountChange) -> None:
    set_nonce_account(
        ledger, seed.account, authority=seed.authority, advance=seed.advance, nonce=seed.nonce
    )


def authority_change(ledger: Ledger, action: Any) -> None:
    """Applies the actions of ``action`` (a ``format.Action``) this module knows; the others
    are not its."""
    if action.set_nonce_account is not None:
        seed_nonce_account(ledger, action.set_nonce_account)
    if action.close_nonce_account is not None:
        close_nonce_account(ledger, action.close_nonce_account)
    if action.set_mint is not None:
        seed_mint(ledger, action.set_mint)
    if action.set_upgradeable_program is not None:
        seed_program(ledger, action.set_upgradeable_program)
    if action.set_multisig is not None:
        seed_multisig(ledger, action.set_multisig)
