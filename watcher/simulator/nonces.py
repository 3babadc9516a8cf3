"""Durable nonce accounts of the simulated ledger: System-owned program accounts of 80 bytes,
laid out as the System program writes them (bincode: u32 ``Versions`` tag, u32 ``State`` tag,
authority, durable nonce, lamports per signature; solana-program ``src/nonce/state/mod.rs`` and
``current.rs``). They live among the program accounts (``watcher.simulator.programs``),
so getProgramAccounts of the System program filters them and getMultipleAccounts reads them.
This encoder is the simulator's own, apart from the watcher's decoder, so each checks the
other.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Final

import base58

from watcher.core.lamports import LAMPORTS_PER_SIGNATURE
from watcher.simulator.das import das_of
from watcher.simulator.ledger import Ledger

SYSTEM_PROGRAM: Final = "11111111111111111111111111111111"
NONCE_SIZE: Final = 80


def nonce_bytes(
    authority: str, nonce: bytes, lamports_per_signature: int = LAMPORTS_PER_SIGNATURE
) -> bytes:
    """An initialized nonce account of the current version."""
    data = (
        struct.pack("<II", 1, 1)
        + base58.b58decode(authority)
        + nonce
        + struct.pack("<Q", lamports_per_signature)
    )
    assert len(data) == NONCE_SIZE
    return data


def _fields(data: bytes) -> tuple[str, bytes]:
    return base58.b58encode(data[8:40]).decode(), data[40:72]


def set_nonce_account(
    ledger: Ledger,
    account: str,
    *,
    authority: str | None = None,
    advance: bool = False,
    nonce: str | None = None,
) -> None:
    """Creates the nonce account (``authority`` required) or changes it: another authority,
    its nonce advanced (``advance``) or set (``nonce``, base58 32 bytes). Creating and
    advancing it each land a transaction touching it (getSignaturesForAddress lists them)."""
    programs = das_of(ledger).programs
    known = programs.data_of(SYSTEM_PROGRAM, account)
    if known is None:
        if authority is None:
            raise KeyError(f"no nonce account {account}: name its authority to create it")
        stored = hashlib.sha256(f"nonce of {account}".encode()).digest()
    else:
        old_authority, stored = _fields(known)
        authority = authority or old_authority
    if advance:
        stored = hashlib.sha256(stored + b"advance").digest()
    if nonce is not None:
        stored = base58.b58decode(nonce)
        if len(stored) != 32:
            raise ValueError("a nonce is 32 bytes (base58)")
    programs.set_program_account(SYSTEM_PROGRAM, account, nonce_bytes(authority, stored))
    if known is None or advance:  # the transaction that created it, or one that used it
        ledger.add_transactions(account)


def close_nonce_account(ledger: Ledger, account: str) -> None:
    das_of(ledger).programs.close_program_account(SYSTEM_PROGRAM, account)


# -- the demo (``watcher demo``): what rules/nonces.yaml watches -------------------------------

COUNCIL_SIGNER_1: Final = "8jvsG4nh6MUfw9GLFWXVhC6ZKPor7WnsvZ3wz3aeTNNN"
COUNCIL_SIGNER_2: Final = "GJYDZgtruvFsKFpu5APHPVW7aR4bn7YbzmH19SNd1nfr"
DEMO_EXISTING_NONCE: Final = "6p58abEkRfZpd64X1hoCg8dRBT2e4sxUQjkUdjx6uKuK"
DEMO_STAGED_NONCE: Final = "66Pua1zfapUjH6KW4fr8hnCbzmvtXNHLk7SBvTeM9Dxs"


def nonce_demo_setup(ledger: Ledger) -> None:
    """The council's first signer already holds a durable nonce account (the inventory)."""
    set_nonce_account(ledger, DEMO_EXISTING_NONCE, authority=COUNCIL_SIGNER_1)


def nonce_demo_stage(ledger: Ledger) -> None:
    """A durable nonce account appears on the second signer's key."""
    set_nonce_account(ledger, DEMO_STAGED_NONCE, authority=COUNCIL_SIGNER_2)
