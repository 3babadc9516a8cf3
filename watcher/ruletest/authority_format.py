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
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from watcher.config.rule_models import Pubkey
from watcher.ledger.simulator import Ledger
from watcher.ledger.simulator.nonces import close_nonce_account, set_nonce_account


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NonceAccountChange(_Strict):
    """Creates a nonce account (``authority`` given) or changes it: another authority, its
    nonce advanced (``advance: true``) or set (``nonce``: 32 bytes in base58)."""

    account: Pubkey
    authority: Pubkey | None = None
    advance: bool = False
    nonce: Annotated[str, Field(pattern="^[1-9A-HJ-NP-Za-km-z]{32,44}$")] | None = None


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
