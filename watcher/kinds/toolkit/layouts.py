"""Account layouts the "who can move the funds" kinds decode themselves (pure, ``struct``).

Each decoder takes an account's owner and raw data and returns what it holds, or raises
``NotDecodable`` saying why the account is not what the rule says it is (wrong owner, size,
tag or discriminator): the kind then reports it as "cannot be verified", never as a quiet
baseline. ``solders`` is not a dependency: the few fixed layouts below do not need it.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any, Final

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


def _option_key(tag: int, raw: bytes, what: str) -> str | None:
    if tag == 0:
        return None
    if tag != 1:
        raise NotDecodable(f"unknown {what} option tag {tag}")
    return _key(raw)


def _nonzero_key(raw: bytes) -> str | None:
    """An ``OptionalNonZeroPubkey``: all zeros is none."""
    return None if raw == bytes(32) else _key(raw)


# -- spl-token mints ---------------------------------------------------------------------------
#
# solana-program-library `token/program/src/state.rs`, `impl Pack for Mint` (82 bytes,
# `array_refs![src, 36, 8, 1, 1, 36]`): mint_authority COption<Pubkey> (u32 tag 0/1, then 32
# bytes), supply u64, decimals u8, is_initialized bool, freeze_authority COption<Pubkey>.
# Token-2022 (`token/program-2022/src/extension/mod.rs`) keeps the same 82 bytes, pads to 165, and
# a mint with extensions carries an AccountType byte at 165 (1: Mint), then TLV entries (u16 type,
# u16 length, value); `ExtensionType::PermanentDelegate` = 12 (`permanent_delegate.rs`:
# `delegate: OptionalNonZeroPubkey`), `ExtensionType::TransferHook` = 14 (`transfer_hook/mod.rs`:
# `authority: OptionalNonZeroPubkey, program_id: OptionalNonZeroPubkey`).

TOKEN_PROGRAM: Final = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
TOKEN_2022_PROGRAM: Final = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb"
MINT_SIZE: Final = 82
_ACCOUNT_TYPE_OFFSET: Final = 165
_ACCOUNT_TYPE_MINT: Final = 1
_MINT = struct.Struct("<I32sQBBI32s")
EXTENSION_PERMANENT_DELEGATE: Final = 12
EXTENSION_TRANSFER_HOOK: Final = 14


def decode_mint(owner: str, data: bytes) -> dict[str, str | None]:
    """A mint's powers: ``mint_authority``, ``freeze_authority`` and, for a Token-2022 mint,
    ``permanent_delegate`` and ``transfer_hook_program`` (None: none)."""
    if owner not in (TOKEN_PROGRAM, TOKEN_2022_PROGRAM):
        raise NotDecodable(f"owned by {owner}, not a token program")
    if len(data) < MINT_SIZE:
        raise NotDecodable(f"{len(data)} bytes of data, a mint has {MINT_SIZE}")
    if owner == TOKEN_PROGRAM and len(data) != MINT_SIZE:
        raise NotDecodable(f"{len(data)} bytes of data, a mint has {MINT_SIZE}")
    mint_tag, mint_key, _supply, _decimals, initialized, freeze_tag, freeze_key = _MINT.unpack(
        data[:MINT_SIZE]
    )
    if initialized != 1:
        raise NotDecodable("an uninitialized mint")
    powers: dict[str, str | None] = {
        "mint_authority": _option_key(mint_tag, mint_key, "mint authority"),
        "freeze_authority": _option_key(freeze_tag, freeze_key, "freeze authority"),
    }
    if owner == TOKEN_2022_PROGRAM:
        powers.update(_mint_extensions(data))
    return powers


def mint_decimals(owner: str, data: bytes) -> int:
    """A mint's decimals (``NotDecodable`` when the account is not an initialized mint)."""
    if owner not in (TOKEN_PROGRAM, TOKEN_2022_PROGRAM):
        raise NotDecodable(f"owned by {owner}, not a token program")
    if len(data) < MINT_SIZE:
        raise NotDecodable(f"{len(data)} bytes of data, a mint has {MINT_SIZE}")
    _tag, _key, _supply, decimals, initialized, _ftag, _fkey = _MINT.unpack(data[:MINT_SIZE])
    if initialized != 1:
        raise NotDecodable("an uninitialized mint")
    return int(decimals)


def _mint_extensions(data: bytes) -> dict[str, str | None]:
    found: dict[str, str | None] = {"permanent_delegate": None, "transfer_hook_program": None}
    if len(data) == MINT_SIZE:
        return found  # no extensions
    if len(data) <= _ACCOUNT_TYPE_OFFSET or any(data[MINT_SIZE:_ACCOUNT_TYPE_OFFSET]):
        raise NotDecodable(f"{len(data)} bytes of data: not a Token-2022 mint's layout")
    if data[_ACCOUNT_TYPE_OFFSET] != _ACCOUNT_TYPE_MINT:
        raise NotDecodable(f"account type {data[_ACCOUNT_TYPE_OFFSET]}, a mint's is 1")
    at = _ACCOUNT_TYPE_OFFSET + 1
    while at + 4 <= len(data):
        kind, length = struct.unpack_from("<HH", data, at)
        value = data[at + 4 : at + 4 + length]
        if len(value) != length:
            raise NotDecodable(f"extension {kind} runs past the data")
        if kind == EXTENSION_PERMANENT_DELEGATE:
            if length != 32:
                raise NotDecodable(f"a permanent delegate of {length} bytes")
            found["permanent_delegate"] = _nonzero_key(value)
        elif kind == EXTENSION_TRANSFER_HOOK:
            if length != 64:
                raise NotDecodable(f"a transfer hook of {length} bytes")
            found["transfer_hook_program"] = _nonzero_key(value[32:])
        elif kind == 0 and length == 0:
            break  # Uninitialized: the rest is padding
        at += 4 + length
    return found


# -- the upgradeable loader --------------------------------------------------------------------
#
# solana-program `src/bpf_loader_upgradeable.rs` (now the solana-loader-v3-interface crate,
# `state.rs`): `enum UpgradeableLoaderState { Uninitialized, Buffer { authority_address:
# Option<Pubkey> }, Program { programdata_address: Pubkey }, ProgramData { slot: u64,
# upgrade_authority_address: Option<Pubkey> } }`, bincode: u32 tag (2: Program, 36 bytes; 3:
# ProgramData, 45 bytes of metadata: the tag, the deploy slot, a one-byte option tag and the
# authority, then the ELF).

UPGRADEABLE_LOADER: Final = "BPFLoaderUpgradeab1e11111111111111111111111"
PROGRAM_SIZE: Final = 36
PROGRAMDATA_METADATA_SIZE: Final = 45


def decode_program(owner: str, data: bytes) -> str:
    """An upgradeable program account: the address of its program data account."""
    if owner != UPGRADEABLE_LOADER:
        raise NotDecodable(f"owned by {owner}, not the upgradeable loader")
    if len(data) < PROGRAM_SIZE:
        raise NotDecodable(f"{len(data)} bytes of data, a program account has {PROGRAM_SIZE}")
    (tag,) = struct.unpack_from("<I", data)
    if tag != 2:
        raise NotDecodable(f"loader state tag {tag}, a program's is 2")
    return _key(data[4:36])


def decode_program_data(owner: str, data: bytes) -> dict[str, str | int | None]:
    """A program data account: ``deploy_slot`` and ``upgrade_authority`` (None: immutable)."""
    if owner != UPGRADEABLE_LOADER:
        raise NotDecodable(f"owned by {owner}, not the upgradeable loader")
    if len(data) < PROGRAMDATA_METADATA_SIZE:
        raise NotDecodable(f"{len(data)} bytes of data, program data has at least 45")
    tag, slot, option = struct.unpack_from("<IQB", data)
    if tag != 3:
        raise NotDecodable(f"loader state tag {tag}, program data's is 3")
    authority = _option_key(option, data[13:45], "upgrade authority")
    return {"upgrade_authority": authority, "deploy_slot": slot}


# -- Squads v4 multisigs -----------------------------------------------------------------------
#
# Squads-Protocol/v4 `programs/squads_multisig_program/src/state/multisig.rs`, an Anchor account
# (8-byte discriminator sha256("account:Multisig")[:8], then Borsh): create_key Pubkey,
# config_authority Pubkey (Pubkey::default(): none, the multisig is autonomous), threshold u16,
# time_lock u32, transaction_index u64, stale_transaction_index u64, rent_collector
# Option<Pubkey> (one-byte tag, 32 bytes when Some), bump u8, members Vec<Member> (u32 length;
# Member: key Pubkey, permissions u8 mask: 1 Initiate, 2 Vote, 4 Execute); what follows (a hook
# in newer versions, the space kept for more members) is not read.

SQUADS_V4_PROGRAM: Final = "SQDS4ep65T869zMMBKyuUq6aD6EgTu8psMjkvj52pCf"
MULTISIG_DISCRIMINATOR: Final = hashlib.sha256(b"account:Multisig").digest()[:8]
_MULTISIG_HEAD = struct.Struct("<8s32s32sHIQQB")
MAX_MEMBERS: Final = 65535


def decode_multisig(owner: str, data: bytes) -> dict[str, Any]:
    """A multisig's powers: ``threshold``, ``time_lock`` (seconds), ``config_authority`` (None:
    autonomous) and ``members`` ({member: permissions mask}). Transaction counters are left
    out: they move with every transaction."""
    if owner != SQUADS_V4_PROGRAM:
        raise NotDecodable(f"owned by {owner}, not the Squads v4 program")
    if len(data) < _MULTISIG_HEAD.size:
        raise NotDecodable(f"{len(data)} bytes of data, too short for a multisig")
    head = _MULTISIG_HEAD.unpack_from(data)
    discriminator, _create, config, threshold, time_lock, _index, _stale, rent_tag = head
    if discriminator != MULTISIG_DISCRIMINATOR:
        raise NotDecodable("not a Multisig account (its discriminator differs)")
    at = _MULTISIG_HEAD.size
    if rent_tag == 1:
        at += 32
    elif rent_tag != 0:
        raise NotDecodable(f"unknown rent collector option tag {rent_tag}")
    at += 1  # bump
    if len(data) < at + 4:
        raise NotDecodable("the data ends before the members")
    (count,) = struct.unpack_from("<I", data, at)
    at += 4
    if len(data) < at + 33 * count:
        raise NotDecodable(f"{count} members do not fit the data")
    members = {
        _key(data[at + 33 * n : at + 33 * n + 32]): data[at + 33 * n + 32] for n in range(count)
    }
    return {
        "threshold": threshold,
        "time_lock": time_lock,
        "config_authority": _nonzero_key(config),
        "members": members,
    }
