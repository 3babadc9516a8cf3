"""Transfers on the simulated ledger: SOL or a token moved from one address to another, as one
transaction listed in both addresses' histories, and dust sent from look-alike addresses
(address poisoning).

Functions taking a ``Ledger``, like ``watcher.simulator.authorities``: a token transfer changes
the token accounts kept beside the ledger (``das_of``), which the core ledger does not import.

What a client sees of a transfer, all at once (under the ledger's lock) in one new slot:

- its signature, in getSignaturesForAddress of the source and of the destination;
- the source's lamports (getMultipleAccounts, getAccountInfo) down by the amount (SOL) and the
  fee, the destination's up by the amount (SOL; a destination without an account gets one; a
  token transfer leaves the destination's lamports as they are);
- for a token, the owners' token accounts of the mint (getTokenAccounts by owner) down and up
  by the raw amount, the destination's created when it has none (its rent is not charged:
  the source pays the fee only). A mint seeded with its holders (``Ledger.set_holders``)
  shows the move among them too (getTokenLargestAccounts, getTokenAccountBalance) when the
  paying account is one of them: its supply stays what it was.
"""

from __future__ import annotations

import random
from decimal import Decimal, localcontext
from typing import Final

import base58

from watcher.core.lamports import LAMPORTS_PER_SIGNATURE
from watcher.simulator.authorities import powers_of
from watcher.simulator.das import TokenAccountEntry, das_of
from watcher.simulator.keys import derived_pubkey, pubkey_problem
from watcher.simulator.ledger import Ledger

_BASE58: Final = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
# Characters kept at each end of a look-alike: what a person checks of an address.
LOOKALIKE_KEPT: Final = 4
_LOOKALIKE_DRAWS: Final = 1000
SOL_DECIMALS: Final = 9  # lamports per SOL: 10^9


def token_account_address(owner: str, mint: str) -> str:
    """The token account a transfer creates for an owner without one (the simulator's stand-in
    for the associated token account)."""
    return derived_pubkey(f"token account of {owner} for {mint}")


def mint_decimals(ledger: Ledger, mint: str) -> int:
    """The decimals of a mint the ledger knows (seeded holders or ``set_mint``);
    ``ValueError`` for a mint it does not know."""
    supply = ledger.token_supply(mint)
    if supply is not None:
        return int(supply["decimals"])
    book = powers_of(ledger)
    with book.lock:
        powers = book.mints.get(mint)
    if powers is None:
        raise ValueError(f"unknown mint {mint}: seed it first (set_holders or set_mint)")
    return powers.decimals


def raw_amount(ledger: Ledger, amount: Decimal, mint: str | None = None) -> int:
    """``amount`` in UI units (SOL, or the mint's by its decimals) as raw units (lamports, or
    the mint's), exactly; ``ValueError`` for more decimals than that or an unknown mint."""
    decimals = SOL_DECIMALS if mint is None else mint_decimals(ledger, mint)
    with localcontext() as exact:
        exact.prec = 80  # far beyond a u64's digits: no rounding
        raw = amount.scaleb(decimals)
        if raw != raw.to_integral_value():
            unit = "SOL" if mint is None else f"mint {mint}"
            raise ValueError(f"{amount:f} has more decimals than {unit} has ({decimals})")
        return int(raw)


def transfer(
    ledger: Ledger,
    source: str,
    destination: str,
    amount: int,
    mint: str | None = None,
    *,
    fee_lamports: int = LAMPORTS_PER_SIGNATURE,
) -> str:
    """Moves ``amount`` lamports (``mint`` None) or raw units of ``mint`` from ``source`` to
    ``destination`` in one transaction; returns its signature. The source pays
    ``fee_lamports``. ``ValueError`` (and nothing changes) when the amount is not positive,
    the source does not hold it (or the fee), or the mint is unknown."""
    for address in (source, destination):
        if pubkey_problem(address) is not None:
            raise ValueError(f"not a pubkey: {address!r}")
    if amount <= 0:
        raise ValueError(f"the amount must be positive, not {amount}")
    if fee_lamports < 0:
        raise ValueError(f"the fee must not be negative, not {fee_lamports}")
    if mint is not None:
        # Before the ledger's lock: the mints' book is locked before it elsewhere.
        mint_decimals(ledger, mint)  # refuses a mint whose decimals nobody knows
    book = ledger.accounts
    with ledger.lock:
        plain = book.account(source)
        lamports = 0 if plain is None else plain.lamports
        spent = fee_lamports + (amount if mint is None else 0)
        if lamports < spent:
            what = "the fee" if mint is not None else f"{amount} lamports and the fee"
            raise ValueError(
                f"{source} holds {lamports} lamports, short of {what} ({spent} lamports)"
            )
        if mint is not None:
            _move_tokens(ledger, source, destination, amount, mint)
        book.set_account(source, lamports=lamports - spent)
        if mint is None:
            received = book.account(destination)
            before = 0 if received is None else received.lamports
            book.set_account(destination, lamports=before + amount)
        return ledger.land_transaction([source, destination])


def _move_tokens(ledger: Ledger, source: str, destination: str, amount: int, mint: str) -> None:
    das = das_of(ledger)
    held = das.token_accounts(mint, source)
    if not held:
        raise ValueError(f"{source} has no token account of mint {mint}")
    # The largest of the source's accounts pays (ties: by address), as a wallet would pick.
    paying = max(held, key=lambda entry: (entry.amount, entry.address))
    if paying.amount < amount:
        raise ValueError(
            f"{source} holds {paying.amount} raw units of {mint} in {paying.address}, "
            f"short of {amount}"
        )
    receiving = _receiving_account(das.token_accounts(mint, destination), destination, mint)
    das.set_token_account(paying.address, amount=paying.amount - amount)
    received = das.token_accounts(mint, destination)
    before = next((e.amount for e in received if e.address == receiving), 0)
    das.set_token_account(receiving, mint=mint, owner=destination, amount=before + amount)
    # A mint seeded with its holders: the move shows there too when the paying account is
    # one of them (so that the supply, their sum, stays what it was).
    held_there = ledger.token_account(paying.address)
    if held_there is not None and held_there[0] == mint and held_there[1] >= amount:
        ledger.set_holder_amount(mint, paying.address, held_there[1] - amount)
        receiving_there = ledger.token_account(receiving)
        was = 0 if receiving_there is None else receiving_there[1]
        ledger.set_holder_amount(mint, receiving, was + amount)


def _receiving_account(held: list[TokenAccountEntry], owner: str, mint: str) -> str:
    """The destination's account of the mint: its own stand-in ATA when it has it, else the
    first it has, else the stand-in ATA (created)."""
    created = token_account_address(owner, mint)
    addresses = [entry.address for entry in held]
    if created in addresses or not addresses:
        return created
    return addresses[0]


def lookalike(address: str, rng: random.Random) -> str:
    """A valid pubkey other than ``address`` with its first and last four base58 characters
    (what a poisoner grinds for), the middle random."""
    kept = LOOKALIKE_KEPT
    for _ in range(_LOOKALIKE_DRAWS):
        middle = "".join(rng.choice(_BASE58) for _ in range(len(address) - 2 * kept))
        candidate = address[:kept] + middle + address[-kept:]
        # Some middles overflow 32 bytes (or shrink under them): draw again.
        if candidate != address and len(base58.b58decode(candidate)) == 32:
            return candidate
    # Keys of leading zero bytes ("1111...") have no look-alike of this shape.
    raise ValueError(f"no look-alike of {address} keeps its first and last {kept} characters")


def dust(ledger: Ledger, address: str, count: int, *, lamports: int = 1) -> list[str]:
    """Sends ``count`` transfers of ``lamports`` to ``address``, each from a fresh look-alike
    address funded first with the amount and the fee (so that it ends empty); returns their
    signatures newest first, as getSignaturesForAddress lists them."""
    if count < 1:
        raise ValueError("count must be at least 1")
    if pubkey_problem(address) is not None:
        raise ValueError(f"not a pubkey: {address!r}")
    rng = random.Random(ledger.new_pubkey())  # from the ledger's seed: reproducible
    signatures = []
    with ledger.lock:
        for _ in range(count):
            sender = lookalike(address, rng)
            ledger.accounts.set_account(sender, lamports=lamports + LAMPORTS_PER_SIGNATURE)
            signatures.append(transfer(ledger, sender, address, lamports))
    return signatures[::-1]
