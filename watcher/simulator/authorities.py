"""Accounts that hold powers over funds, in the simulated ledger, laid out as their programs
write them: spl-token and Token-2022 mints (solana-program-library `token/program/src/state.rs`,
`Mint`; Token-2022's extensions after the account type byte at 165, `extension/mod.rs`),
upgradeable programs and their program data (`UpgradeableLoaderState`, bincode), and Squads v4
multisigs (`state/multisig.rs`, Anchor: discriminator, then Borsh). They live among the program
accounts (``watcher.simulator.programs``): getMultipleAccounts and getProgramAccounts
serve them. These encoders are the simulator's own, apart from the watcher's decoders, so each
checks the other.

What each account holds is kept here (``powers_of(ledger)``) and re-encoded on every change.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Final

import base58

from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey
from watcher.simulator.ledger import Ledger, PerLedger
from watcher.simulator.validators import KEEP

TOKEN_PROGRAM: Final = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
TOKEN_2022_PROGRAM: Final = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb"
UPGRADEABLE_LOADER: Final = "BPFLoaderUpgradeab1e11111111111111111111111"
SQUADS_V4_PROGRAM: Final = "SQDS4ep65T869zMMBKyuUq6aD6EgTu8psMjkvj52pCf"
_ELF: Final = b"\x7fELF" + bytes(60)  # the program's code: not read by anyone


def _raw(key: str | None) -> bytes:
    return bytes(32) if key is None else base58.b58decode(key)


def _coption(key: str | None) -> bytes:
    return struct.pack("<I", 0 if key is None else 1) + _raw(key)


@dataclass(frozen=True)
class MintPowers:
    token_2022: bool = False
    mint_authority: str | None = None
    freeze_authority: str | None = None
    permanent_delegate: str | None = None
    transfer_hook_program: str | None = None
    supply: int = 0
    decimals: int = 6


def mint_bytes(mint: MintPowers) -> bytes:
    base = (
        _coption(mint.mint_authority)
        + struct.pack("<QBB", mint.supply, mint.decimals, 1)
        + _coption(mint.freeze_authority)
    )
    if not mint.token_2022 or (
        mint.permanent_delegate is None and mint.transfer_hook_program is None
    ):
        return base
    extensions = b""
    if mint.permanent_delegate is not None:
        extensions += struct.pack("<HH", 12, 32) + _raw(mint.permanent_delegate)
    if mint.transfer_hook_program is not None:
        hook_authority = _raw(mint.mint_authority)
        extensions += struct.pack("<HH", 14, 64) + hook_authority + _raw(mint.transfer_hook_program)
    return base.ljust(165, b"\0") + b"\x01" + extensions


@dataclass(frozen=True)
class ProgramPowers:
    upgrade_authority: str | None
    deploy_slot: int


def program_data_address(program: str) -> str:
    return derived_pubkey(f"program data of {program}")


def program_bytes(program: str) -> bytes:
    return struct.pack("<I", 2) + _raw(program_data_address(program))


def program_data_bytes(powers: ProgramPowers) -> bytes:
    option = b"\x00" + bytes(32) if powers.upgrade_authority is None else b"\x01"
    if powers.upgrade_authority is not None:
        option += _raw(powers.upgrade_authority)
    return struct.pack("<IQ", 3, powers.deploy_slot) + option + _ELF


@dataclass(frozen=True)
class MultisigPowers:
    members: dict[str, int] = field(default_factory=dict)  # member -> permissions mask
    threshold: int = 1
    time_lock: int = 0
    config_authority: str | None = None
    transaction_index: int = 0


MULTISIG_DISCRIMINATOR: Final = hashlib.sha256(b"account:Multisig").digest()[:8]


def multisig_bytes(multisig: str, powers: MultisigPowers) -> bytes:
    head = (
        MULTISIG_DISCRIMINATOR
        + _raw(derived_pubkey(f"create key of {multisig}"))
        + _raw(powers.config_authority)
        + struct.pack("<HIQQ", powers.threshold, powers.time_lock, powers.transaction_index, 0)
        + b"\x00"  # rent_collector: None
        + b"\xff"  # bump
    )
    members = sorted(powers.members.items(), key=lambda item: base58.b58decode(item[0]))
    body = struct.pack("<I", len(members)) + b"".join(
        _raw(key) + bytes([mask]) for key, mask in members
    )
    return (head + body + b"\x00").ljust(len(head) + 4 + 10 * 33 + 1, b"\0")  # room for 10


class PowerBook:
    """What each mint, program and multisig of one ledger holds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.mints: dict[str, MintPowers] = {}
        self.programs: dict[str, ProgramPowers] = {}
        self.multisigs: dict[str, MultisigPowers] = {}


_BOOKS = PerLedger(lambda _ledger: PowerBook())


def powers_of(ledger: Ledger) -> PowerBook:
    return _BOOKS.of(ledger)


def set_mint(ledger: Ledger, mint: str, **changes: Any) -> None:
    """Creates the mint or changes the powers given (a key None: nobody holds it)."""
    book = powers_of(ledger)
    with book.lock:
        known = book.mints.get(mint)
        if known is not None and changes.get("token_2022", known.token_2022) != known.token_2022:
            raise ValueError(f"mint {mint} is already under another token program")
        now = replace(known or MintPowers(), **changes)
        book.mints[mint] = now
    owner = TOKEN_2022_PROGRAM if now.token_2022 else TOKEN_PROGRAM
    das_of(ledger).programs.set_program_account(owner, mint, mint_bytes(now))


def set_upgradeable_program(
    ledger: Ledger,
    program: str,
    *,
    upgrade_authority: Any = KEEP,
    redeploy: bool = False,
) -> None:
    """Deploys the program (``upgrade_authority`` given) or changes it: another authority
    (None: immutable), redeployed at the current slot (``redeploy``)."""
    book = powers_of(ledger)
    with book.lock:
        known = book.programs.get(program)
        if known is None:
            if upgrade_authority is KEEP:
                raise KeyError(f"no program {program}: name its upgrade_authority to deploy it")
            known = ProgramPowers(None, ledger.slot)
        if upgrade_authority is not KEEP:
            known = replace(known, upgrade_authority=upgrade_authority)
        if redeploy:
            known = replace(known, deploy_slot=max(ledger.slot, known.deploy_slot + 1))
        book.programs[program] = known
    programs = das_of(ledger).programs
    programs.set_program_account(UPGRADEABLE_LOADER, program, program_bytes(program))
    data = program_data_bytes(known)
    programs.set_program_account(UPGRADEABLE_LOADER, program_data_address(program), data)


def set_multisig(ledger: Ledger, multisig: str, **changes: Any) -> None:
    """Creates the multisig (``members`` given) or changes what is given; ``add_transaction``
    (not a change of its powers) moves its transaction counter."""
    book = powers_of(ledger)
    with book.lock:
        known = book.multisigs.get(multisig)
        if known is None and not changes.get("members"):
            raise KeyError(f"no multisig {multisig}: name its members to create it")
        now = replace(known or MultisigPowers(), **changes)
        book.multisigs[multisig] = now
    data = multisig_bytes(multisig, now)
    das_of(ledger).programs.set_program_account(SQUADS_V4_PROGRAM, multisig, data)
