"""Answers of the account, token-amount and fee methods (getMultipleAccounts,
getTokenAccountBalance, getTokenSupply, getFeeForMessage), strict like ``watcher.ledger.models``:
a declared field of the wrong type, or out of its range, makes the whole answer invalid
(``BadResponse``: never evidence), except a field that only informs (``Unknowable``), which is
then unknown.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from watcher.ledger.models import (
    U64,
    Context,
    Lamports,
    Pubkey,
    TokenAmount,
    Unknowable,
    UnknownField,
    _Answer,
    note_unknown,
)

# Account data is asked for base64; a node answers [data, encoding].
DATA_ENCODING = "base64"
# The most keys one getMultipleAccounts call asks for (the usual provider cap).
MAX_KEYS_PER_CALL = 100
# Accounts hold at most 10 MiB of data.
MAX_ACCOUNT_SPACE = 10 * 1024 * 1024


class Account(_Answer):
    """One account of getMultipleAccounts' value (asked with ``encoding: base64``)."""

    data: tuple[str, str]
    executable: bool = Field(strict=True)
    lamports: Lamports
    owner: Pubkey
    rent_epoch: Annotated[U64 | None, Unknowable("rentEpoch")] = Field(
        default=None, alias="rentEpoch"
    )
    space: Annotated[
        Annotated[int, Field(strict=True, ge=0, le=MAX_ACCOUNT_SPACE)] | None, Unknowable("space")
    ] = None

    @field_validator("data")
    @classmethod
    def _base64(cls, value: tuple[str, str]) -> tuple[str, str]:
        encoded, encoding = value
        if encoding != DATA_ENCODING:
            raise ValueError(f"data in {encoding!r}, asked for {DATA_ENCODING}")
        try:
            base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("data is not valid base64") from None
        return value

    @model_validator(mode="before")
    @classmethod
    def _space_fits_data(cls, value: Any, info: ValidationInfo) -> Any:
        # A space that is not the data's length is that space unknown: it only informs.
        if not isinstance(value, dict) or not isinstance(value.get("space"), int):
            return value
        data = value.get("data")
        if not isinstance(data, list | tuple) or not data or not isinstance(data[0], str):
            return value  # the data's own check says what is wrong with it
        try:
            size = len(base64.b64decode(data[0], validate=True))
        except (binascii.Error, ValueError):
            return value
        if value["space"] == size:
            return value
        note_unknown(info, UnknownField("space", value["space"]))
        return {**value, "space": None}

    @property
    def raw_data(self) -> bytes:
        return base64.b64decode(self.data[0])

    @property
    def data_hash(self) -> str:
        """SHA-256 of the data, hex: what is compared and stored (never the data itself)."""
        return hashlib.sha256(self.raw_data).hexdigest()


class MultipleAccounts(_Answer):
    context: Context
    value: list[Account | None] = Field(max_length=MAX_KEYS_PER_CALL)


class TokenAmountAnswer(_Answer):
    """getTokenAccountBalance and getTokenSupply: a token amount with its context."""

    context: Context
    value: TokenAmount

    @model_validator(mode="after")
    def _no_address(self) -> TokenAmountAnswer:
        if self.value.address is not None:
            raise ValueError("a token amount here carries no address")
        return self


class FeeForMessage(_Answer):
    """getFeeForMessage: ``value`` None when the message's blockhash has expired."""

    context: Context
    value: Lamports | None


class _TokenAccountInfo(_Answer):
    owner: Pubkey
    mint: Pubkey


class _ParsedTokenAccount(_Answer):
    info: _TokenAccountInfo
    type: Literal["account"]


class _ParsedData(_Answer):
    parsed: _ParsedTokenAccount


class ParsedTokenAccount(_Answer):
    """A token account as getMultipleAccounts shows it with ``encoding: jsonParsed``."""

    data: _ParsedData

    @property
    def owner(self) -> str:
        return self.data.parsed.info.owner


class ParsedTokenAccounts(_Answer):
    """getMultipleAccounts (jsonParsed) of token accounts: None for a missing account or one
    that is not a token account (its data not parsed as one)."""

    context: Context
    value: list[ParsedTokenAccount | None] = Field(max_length=MAX_KEYS_PER_CALL)

    @field_validator("value", mode="before")
    @classmethod
    def _token_accounts_only(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [
            item
            if isinstance(item, dict) and _is_token_account(item)
            else None
            if item is None or isinstance(item, dict)
            else item
            for item in value
        ]


def _is_token_account(item: dict[str, Any]) -> bool:
    data = item.get("data")
    parsed = data.get("parsed") if isinstance(data, dict) else None
    return isinstance(parsed, dict) and parsed.get("type") == "account"
