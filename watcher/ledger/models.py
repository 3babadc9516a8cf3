"""Pydantic models of the Ledger Data Query Service's answers.

Only the fields the daemon reads are declared; unknown fields are ignored (nodes add fields
such as ``transactionIndex``, ``clientId`` or ``inflationRewardsCommissionBps`` over time), but a
declared field with the wrong type makes the whole answer invalid: an answer that does not fit
is an error, never data.

Values outside the documented ranges make the answer invalid too (``BadResponse``: retried,
counted as a failed call, never evidence): slots, amounts and stakes are u64; a slot beyond
``MAX_PLAUSIBLE_SLOT`` or a stake beyond ``MAX_LAMPORTS`` (more than all the SOL there is) cannot
come from a real cluster; ``blockTime`` is in seconds (a value in milliseconds is refused);
pubkeys are base58 of 32 bytes, signatures of 64. Whether an answer that fits is *plausible*
against what came before (a slot far ahead, an empty cluster) is ``watcher.ledger.plausibility``'s
call.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from watcher.core.base58check import is_base58_of

U64_MAX = 2**64 - 1
# 2^40 slots is 14,000 years of 400 ms slots: no real cluster is there (mainnet: ~4e8 in 2025).
MAX_PLAUSIBLE_SLOT = 2**40
# All the SOL there is is under 6e17 lamports: a stake (or a sum of stakes) above 10^18 is wrong.
MAX_LAMPORTS = 10**18
# blockTime is unix seconds: 2^33 s is the year 2242; a time in milliseconds (1.7e12) is beyond.
MAX_BLOCK_TIME = 2**33


def _base58_of(size: int) -> AfterValidator:
    def check(value: str) -> str:
        if not is_base58_of(value, size):
            raise ValueError(f"not base58 of {size} bytes")
        return value

    return AfterValidator(check)


Pubkey = Annotated[str, _base58_of(32)]
Signature = Annotated[str, _base58_of(64)]
# Strict: a JSON true is not 1, and 5.0 is not a slot.
Slot = Annotated[int, Field(strict=True, ge=0, le=MAX_PLAUSIBLE_SLOT)]
U64 = Annotated[int, Field(strict=True, ge=0, le=U64_MAX)]
Lamports = Annotated[int, Field(strict=True, ge=0, le=MAX_LAMPORTS)]
BlockTime = Annotated[int, Field(strict=True, ge=0, le=MAX_BLOCK_TIME)]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Context(_Answer):
    slot: Slot
    api_version: str | None = Field(default=None, alias="apiVersion")


class SignatureEntry(_Answer):
    """One entry of getSignaturesForAddress (newest first in the answer)."""

    signature: Signature
    slot: Slot
    err: Any = None
    memo: str | None = None
    block_time: BlockTime | None = Field(default=None, alias="blockTime")
    confirmation_status: Literal["processed", "confirmed", "finalized"] | None = Field(
        default=None, alias="confirmationStatus"
    )
    transaction_index: U64 | None = Field(default=None, alias="transactionIndex")


# Validation context of answers read from the wire (``watcher.ledger.wire.validate``): stricter
# than values built in code.
FROM_WIRE = "from_wire"


class TokenAmount(_Answer):
    """One entry of getTokenLargestAccounts' value (also the value of getTokenAccountBalance)."""

    address: Pubkey | None = None
    amount: U64
    decimals: int = Field(strict=True, ge=0, le=255)
    ui_amount_string: str | None = Field(default=None, alias="uiAmountString")

    @field_validator("amount", mode="before")
    @classmethod
    def _amount_is_a_u64_string(cls, value: Any, info: ValidationInfo) -> Any:
        # The wire carries a string holding a u64; refuse floats that would lose precision.
        if isinstance(value, str) and value.isdigit():
            return int(value)
        # A bare number is not what a node sends (an answer that changed type is not evidence);
        # code building a value (samples, tests) may pass an int.
        from_wire = bool(info.context and info.context.get(FROM_WIRE))
        if isinstance(value, int) and not isinstance(value, bool) and not from_wire:
            return value
        raise ValueError("amount must be a string of digits")


class LargestAccount(TokenAmount):
    """One entry of getTokenLargestAccounts: the token account's address is always there (an
    entry without one would look like a holder that left the top)."""

    address: Pubkey


def _unique(keys: list[str], what: str) -> None:
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise ValueError(f"{what} {key} is listed twice")
        seen.add(key)


class TokenLargestAccounts(_Answer):
    context: Context
    value: list[LargestAccount] = Field(max_length=20)

    @model_validator(mode="after")
    def _each_account_once(self) -> TokenLargestAccounts:
        _unique([account.address for account in self.value], "token account")
        return self


def _credits_add_up(entries: tuple[tuple[int, int, int], ...]) -> tuple[tuple[int, int, int], ...]:
    # Credits are cumulative: an epoch's count is never below the previous one, and epochs rise.
    for epoch_credits in entries:
        if epoch_credits[1] < epoch_credits[2]:
            raise ValueError(f"epoch {epoch_credits[0]}: credits below the previous credits")
    epochs = [epoch for epoch, _, _ in entries]
    if epochs != sorted(set(epochs)):
        raise ValueError("epochCredits epochs are not rising")
    return entries


EpochCredits = Annotated[
    tuple[tuple[U64, U64, U64], ...], Field(max_length=64), AfterValidator(_credits_add_up)
]


class VoteAccount(_Answer):
    vote_pubkey: Pubkey = Field(alias="votePubkey")
    node_pubkey: Pubkey = Field(alias="nodePubkey")
    activated_stake: Lamports = Field(alias="activatedStake")
    commission: int | None = Field(default=None, strict=True, ge=0, le=100)
    last_vote: Slot = Field(alias="lastVote")
    root_slot: Slot | None = Field(default=None, alias="rootSlot")
    epoch_vote_account: bool | None = Field(default=None, alias="epochVoteAccount")
    # [epoch, credits, previous credits] of the last epochs (at most 5), oldest first.
    epoch_credits: EpochCredits = Field(default=(), alias="epochCredits")


class VoteAccounts(_Answer):
    current: list[VoteAccount]
    delinquent: list[VoteAccount]

    @model_validator(mode="after")
    def _stake_fits_the_supply(self) -> VoteAccounts:
        # One vote account in both lists (or twice in one) contradicts itself.
        _unique([acc.vote_pubkey for acc in (*self.current, *self.delinquent)], "vote account")
        total = sum(account.activated_stake for account in (*self.current, *self.delinquent))
        if total > MAX_LAMPORTS:
            raise ValueError(f"activated stakes add up to {total} lamports, more than all SOL")
        return self


class ClusterNode(_Answer):
    # Only what the drift kind reads: 6,455 nodes a poll, each field validated costs.
    pubkey: Pubkey
    version: str | None = None
    feature_set: Annotated[int, Field(strict=True, ge=0, le=2**32 - 1)] | None = Field(
        default=None, alias="featureSet"
    )


def _each_node_once(nodes: list[ClusterNode]) -> list[ClusterNode]:
    # Gossip holds one contact info per identity: a node listed twice contradicts itself.
    _unique([node.pubkey for node in nodes], "node")
    return nodes


ClusterNodes = Annotated[list[ClusterNode], AfterValidator(_each_node_once)]
