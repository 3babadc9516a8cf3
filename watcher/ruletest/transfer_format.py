"""Rule-test actions that land transfers (``watcher.simulator.transfers``): SOL or a token moved
between two addresses, one transaction in both histories; dust from look-alike addresses.

```yaml
steps:
  - actions:
      - transfer: {source: TREASURY, destination: PAYEE, amount: 1000}          # SOL
      - transfer: {source: PAYER, destination: TREASURY, amount: 25000, mint: USDC_MINT}
      - dust: {address: TREASURY, count: 50}                # 1 lamport each, by default
```

``amount`` is in UI units: SOL, or the mint's (by its decimals); written with more decimals than
that, it is refused. The source pays ``fee`` lamports (5000 by default).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from watcher.config.rule_models import Pubkey
from watcher.core.lamports import LAMPORTS_PER_SIGNATURE
from watcher.simulator import Ledger
from watcher.simulator.transfers import dust, raw_amount, transfer

# Shown as written in plain digits ("0.000001", not "1E-6") in the control endpoint's echo.
UiAmount = Annotated[
    Decimal, Field(gt=0), PlainSerializer(lambda value: format(value, "f"), return_type=str)
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Transfer(_Strict):
    """SOL (no ``mint``) or a token moved from ``source`` to ``destination``."""

    source: Pubkey
    destination: Pubkey
    amount: UiAmount  # SOL, or the mint's UI units
    mint: Pubkey | None = None
    fee: Annotated[int, Field(ge=0)] = LAMPORTS_PER_SIGNATURE  # lamports, paid by the source


class Dust(_Strict):
    """``count`` transfers of ``lamports`` each into ``address``, from look-alike addresses."""

    address: Pubkey
    count: Annotated[int, Field(ge=1, le=10_000)] = 1
    lamports: Annotated[int, Field(ge=1)] = 1


def transfer_change(ledger: Ledger, action: Any) -> list[str]:
    """Applies the actions of ``action`` (a ``format.Action``) this module knows; returns the
    signatures landed, newest first (none for the actions that are not its)."""
    if action.transfer is not None:
        move: Transfer = action.transfer
        raw = raw_amount(ledger, move.amount, move.mint)
        signature = transfer(
            ledger, move.source, move.destination, raw, move.mint, fee_lamports=move.fee
        )
        return [signature]
    if action.dust is not None:
        sent: Dust = action.dust
        return dust(ledger, sent.address, sent.count, lamports=sent.lamports)
    return []
