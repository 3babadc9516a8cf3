"""Base58 keys and signatures, made and checked the way a node does."""

from __future__ import annotations

import hashlib
import random

import base58

# A node refuses longer strings before decoding them (solana-pubkey / solana-signature).
_MAX_PUBKEY_TEXT = 44
_MAX_SIGNATURE_TEXT = 88


def _encode(raw: bytes) -> str:
    text: str = base58.b58encode(raw).decode("ascii")
    return text


def random_signature(rng: random.Random) -> str:
    """64 random bytes in base58 (86 to 88 characters, like a real transaction signature)."""
    return _encode(rng.randbytes(64))


def derived_signature(label: str) -> str:
    """A stable signature named by ``label`` (an address's old transaction)."""
    return _encode(hashlib.sha512(label.encode()).digest())


def random_pubkey(rng: random.Random) -> str:
    return _encode(rng.randbytes(32))


def derived_pubkey(label: str) -> str:
    """A stable, valid pubkey named by ``label`` (for scripted holders and addresses)."""
    return _encode(hashlib.sha256(label.encode()).digest())


def _decoded_problem(text: object, max_text: int, size: int) -> str | None:
    if not isinstance(text, str):
        return "Invalid"
    if len(text) > max_text:
        return "WrongSize"
    try:
        raw = base58.b58decode(text)
    except ValueError:
        return "Invalid"
    return None if len(raw) == size else "WrongSize"


def pubkey_problem(text: object) -> str | None:
    """None for a valid pubkey, else the node's error name (``Invalid`` or ``WrongSize``)."""
    return _decoded_problem(text, _MAX_PUBKEY_TEXT, 32)


def signature_problem(text: object) -> str | None:
    return _decoded_problem(text, _MAX_SIGNATURE_TEXT, 64)
