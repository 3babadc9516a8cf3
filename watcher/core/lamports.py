"""The ledger's native unit: lamports, and what the ledger charges in them."""

from __future__ import annotations

from typing import Final

LAMPORTS_DECIMALS: Final = 9  # 1 SOL = 10**9 lamports
LAMPORTS_PER_SOL: Final = 10**LAMPORTS_DECIMALS
LAMPORTS_PER_SIGNATURE: Final = 5000  # the base fee of one signature
