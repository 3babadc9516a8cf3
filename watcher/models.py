"""Pydantic models of the Ledger Data Query Service's answers.

Only the fields the daemon reads are declared; unknown fields are ignored (nodes add fields
such as ``transactionIndex``, ``clientId`` or ``inflationRewardsCommissionBps`` over time), but a
declared field with the wrong type makes the whole answer invalid: an answer that does not fit
is an error, never data.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Context(_Answer):
    slot: int
    api_version: str | None = Field(default=None, alias="apiVersion")


class SignatureEntry(_Answer):
    """One entry of getSignaturesForAddress (newest first in the answer)."""

    signature: str = Field(min_length=32, max_length=100)
    slot: int = Field(ge=0)
    err: Any = None
    memo: str | None = None
    block_time: int | None = Field(default=None, alias="blockTime")
    confirmation_status: Literal["processed", "confirmed", "finalized"] | None = Field(
        default=None, alias="confirmationStatus"
    )
    transaction_index: int | None = Field(default=None, alias="transactionIndex")


class TokenAmount(_Answer):
    """One entry of getTokenLargestAccounts' value (also the value of getTokenAccountBalance)."""

    address: str | None = None
    amount: int = Field(ge=0)
    decimals: int = Field(ge=0, le=255)
    ui_amount_string: str | None = Field(default=None, alias="uiAmountString")

    @field_validator("amount", mode="before")
    @classmethod
    def _amount_is_a_u64_string(cls, value: Any) -> Any:
        # The wire carries a string holding a u64; refuse floats that would lose precision.
        if isinstance(value, str) and value.isdigit():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ValueError("amount must be a string of digits")


class TokenLargestAccounts(_Answer):
    context: Context
    value: list[TokenAmount] = Field(max_length=20)


class VoteAccount(_Answer):
    vote_pubkey: str = Field(alias="votePubkey")
    node_pubkey: str = Field(alias="nodePubkey")
    activated_stake: int = Field(alias="activatedStake", ge=0)
    commission: int | None = None
    last_vote: int = Field(alias="lastVote", ge=0)
    root_slot: int | None = Field(default=None, alias="rootSlot")
    epoch_vote_account: bool | None = Field(default=None, alias="epochVoteAccount")


class VoteAccounts(_Answer):
    current: list[VoteAccount]
    delinquent: list[VoteAccount]


class ClusterNode(_Answer):
    pubkey: str
    gossip: str | None = None
    rpc: str | None = None
    version: str | None = None
    feature_set: int | None = Field(default=None, alias="featureSet")
    shred_version: int | None = Field(default=None, alias="shredVersion")
    client_id: int | str | None = Field(default=None, alias="clientId")
