"""Account layouts the "who can move the funds" kinds decode themselves (pure, ``struct``).

Each decoder takes an account's owner and raw data and returns what it holds, or raises
``NotDecodable`` saying why the account is not what the rule says it is (wrong owner, size,
tag or discriminator): the kind then reports it as "cannot be verified", never as a quiet
baseline. ``solders`` is not a dependency: the few fixed layouts below do not need it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

import base58

SYSTEM_PROGRAM: Final = "11111111111111111111111111111111"


class NotDecodable(ValueError):
    """The account is not what the rule says it is; ``args[0]`` says why, in a few words."""


def _key(raw: bytes) -> str:
    return base58.b58encode(raw).decode()


# -- durable nonce accounts --------------------------------------------------------------------
#
# The System program's nonce state, serialized with bincode (enum tags are little-endian u32):
#   solana-program `src/nonce/state/mod.rs`: `enum Versions { Legacy(Box<State>),
#     Current(Box<State>) }` (tag 0 legacy, 1 current);
#   solana-program `src/nonce/state/current.rs`: `enum State { Uninitialized,
#     Initialized(Data) }` (tag 0, 1) and `struct Data { authority: Pubkey, durable_nonce:
#     DurableNonce (a Hash), fee_calculator: FeeCalculator { lamports_per_signature: u64 } }`;
#     `State::size()` is 80 (now in anza-xyz/solana-sdk `nonce/src/state.rs`, `versions.rs`).
# So: u32 version @0, u32 state @4, authority @8 (32 bytes), nonce @40 (32 bytes),
# lamports_per_signature u64 @72.

NONCE_SIZE: Final = 80
NONCE_AUTHORITY_OFFSET: Final = 8
_NONCE = struct.Struct("<II32s32sQ")
_NONCE_VERSIONS: Final = {0: "legacy", 1: "current"}


@dataclass(frozen=True)
class NonceState:
    version: str  # "legacy" or "current"
    authority: str
    nonce: str  # the stored durable nonce (a blockhash), base58
    lamports_per_signature: int


def decode_nonce(owner: str, data: bytes) -> NonceState:
    """An initialized durable nonce account (``NotDecodable`` otherwise)."""
    if owner != SYSTEM_PROGRAM:
        raise NotDecodable(f"owned by {owner}, not the System program")
    if len(data) != NONCE_SIZE:
        raise NotDecodable(f"{len(data)} bytes of data, a nonce account has {NONCE_SIZE}")
    version, state, authority, nonce, fee = _NONCE.unpack(data)
    if version not in _NONCE_VERSIONS:
        raise NotDecodable(f"unknown nonce version tag {version}")
    if state == 0:
        raise NotDecodable("an uninitialized nonce account")
    if state != 1:
        raise NotDecodable(f"unknown nonce state tag {state}")
    return NonceState(_NONCE_VERSIONS[version], _key(authority), _key(nonce), fee)
