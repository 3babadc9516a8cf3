"""Rule-test ledger seeds and actions for token accounts (getTokenAccounts).

```yaml
ledger:
  token_accounts:
    - {address: ACCOUNT, mint: MINT, owner: OWNER, amount: 1000000, frozen: false, delegate: null}
steps:
  - actions:
      - set_token_account: {address: ACCOUNT, frozen: true}        # or create one (mint, owner)
      - set_token_account: {address: ACCOUNT, delegate: DELEGATE}  # delegate: null undelegates
      - set_token_account: {address: ACCOUNT, delegated_amount: 500, close_authority: KEY}
      - close_token_account: ACCOUNT
```

Assets (getAssetsByGroup, getAssetsByCreator, searchAssets), listed in the order they are added:

```yaml
ledger:
  assets:
    - {id: ASSET, owner: OWNER, name: "Mad Lad #1", collection: MINT, interface: V1_NFT,
       creators: [{address: CREATOR, verified: true}], json_uri: "https://...",
       delegate: null, frozen: false, burnt: false}
steps:
  - actions:
      - set_asset: {id: ASSET, owner: OTHER}   # a new id adds an asset (owner required)
```

Program accounts (getProgramAccounts; ``data`` in base58, zero bytes up to ``space``):

```yaml
ledger:
  program_accounts: [{program: PROGRAM, account: ACCOUNT, space: 165, data: BASE58}]
steps:
  - actions:
      - set_program_account: {program: PROGRAM, account: ACCOUNT, space: 165}
      - close_program_account: {program: PROGRAM, account: ACCOUNT}
```

Print editions (getNftEditions), numbered 1, 2, ... in the order printed:

```yaml
ledger:
  editions: [{master: MINT, max_supply: 100, prints: [PRINT_MINT_1, PRINT_MINT_2]}]
steps:
  - actions:
      - print_edition: {master: MINT, mint: PRINT_MINT_3}
```
"""

from __future__ import annotations

from typing import Annotated, Any

import base58
from pydantic import BaseModel, ConfigDict, Field

from watcher.config.rule_models import Pubkey
from watcher.ruletest.fields import given
from watcher.simulator import Ledger
from watcher.simulator.assets import AssetInterface
from watcher.simulator.das import das_of

Amount = Annotated[int, Field(ge=0, le=2**64 - 1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TokenAccountSeed(_Strict):
    """A token account of the ledger before step 1."""

    address: Pubkey
    mint: Pubkey
    owner: Pubkey
    amount: Amount = 0
    frozen: bool = False
    delegate: Pubkey | None = None


class TokenAccountChange(_Strict):
    """Creates a token account (mint and owner given) or changes the keys given."""

    address: Pubkey
    mint: Pubkey | None = None
    owner: Pubkey | None = None
    amount: Amount | None = None
    frozen: bool | None = None
    delegate: Pubkey | None = None  # null: no delegate any more; left out: kept
    delegated_amount: Amount | None = None  # the delegate's allowance (raw)
    close_authority: Pubkey | None = None  # null: none; left out: kept


class Creator(_Strict):
    address: Pubkey
    verified: bool = False


class AssetSeed(_Strict):
    """An asset (every key but ``id`` optional in ``set_asset``: those given change)."""

    id: Pubkey
    owner: Pubkey | None = None
    name: str | None = None
    interface: AssetInterface | None = None
    json_uri: str | None = None
    collection: Pubkey | None = None
    creators: list[Creator] | None = None
    delegate: Pubkey | None = None
    frozen: bool | None = None
    burnt: bool | None = None

    def fields(self) -> dict[str, Any]:
        fields = given(self, "id")
        if "creators" in fields:
            fields["creators"] = tuple((c.address, c.verified) for c in self.creators or ())
        return fields


def seed_asset(ledger: Ledger, seed: AssetSeed) -> None:
    das_of(ledger).assets.set_asset(seed.id, **seed.fields())


class ProgramAccountSeed(_Strict):
    program: Pubkey
    account: Pubkey
    space: Annotated[int, Field(ge=0, le=10 * 2**20)] = 0
    data: Annotated[str, Field(pattern="^[1-9A-HJ-NP-Za-km-z]*$")] = ""  # base58

    def raw(self) -> bytes:
        head = base58.b58decode(self.data) if self.data else b""
        return head + bytes(max(0, self.space - len(head)))


class ProgramAccountKey(_Strict):
    program: Pubkey
    account: Pubkey


def seed_program_account(ledger: Ledger, seed: ProgramAccountSeed) -> None:
    das_of(ledger).programs.set_program_account(seed.program, seed.account, seed.raw())


class EditionsSeed(_Strict):
    master: Pubkey
    max_supply: Annotated[int, Field(ge=0)] | None = None  # null: unlimited
    prints: list[Pubkey] = []


class PrintEdition(_Strict):
    master: Pubkey
    mint: Pubkey


def seed_editions(ledger: Ledger, seed: EditionsSeed) -> None:
    editions = das_of(ledger).editions
    editions.set_master(seed.master, seed.max_supply)
    for mint in seed.prints:
        editions.print_edition(seed.master, mint)


def seed_token_account(ledger: Ledger, seed: TokenAccountSeed) -> None:
    das_of(ledger).set_token_account(
        seed.address,
        mint=seed.mint,
        owner=seed.owner,
        amount=seed.amount,
        frozen=seed.frozen,
        delegate=seed.delegate,
    )


def das_change(ledger: Ledger, action: Any) -> None:
    """Applies the token-account actions of ``action`` (a ``format.Action``); others are not
    this module's."""
    das = das_of(ledger)
    change: TokenAccountChange | None = action.set_token_account
    if change is not None:
        # What is left out is kept (a delegate, close authority: UNSET; null is "none").
        das.set_token_account(change.address, **given(change, "address"))
    if action.close_token_account is not None:
        das.close_token_account(action.close_token_account)
    if action.set_asset is not None:
        seed_asset(ledger, action.set_asset)
    if action.set_program_account is not None:
        seed_program_account(ledger, action.set_program_account)
    if action.close_program_account is not None:
        key: ProgramAccountKey = action.close_program_account
        das.programs.close_program_account(key.program, key.account)
    if action.print_edition is not None:
        printed: PrintEdition = action.print_edition
        das.editions.print_edition(printed.master, printed.mint)
