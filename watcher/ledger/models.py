"""Pydantic models of the Ledger Data Query Service's answers.

Only the fields the daemon reads are declared; unknown fields are ignored (nodes add fields
such as ``transactionIndex``, ``clientId`` or ``inflationRewardsCommissionBps`` over time), but a
declared field with the wrong type makes the whole answer invalid: an answer that does not fit
is an error, never data.

Values outside the documented ranges make the answer invalid too (``BadResponse``: retried,
counted as a failed call, never evidence): slots, amounts and stakes are u64; a slot beyond
``MAX_PLAUSIBLE_SLOT`` or a stake beyond ``MAX_LAMPORTS`` (more than all the SOL there is) cannot
come from a real cluster; pubkeys are base58 of 32 bytes, signatures of 64.

Except for fields that only inform (``Unknowable``: a ``blockTime``, a memo, a commission, a
version...): one of those out of its range or of the wrong type (a ``blockTime`` in milliseconds)
is that field unknown, as if the node had sent null, and the rest of the answer stands; the
wire's reader hands it (``UNKNOWN_FIELDS``) to ``UNKNOWN_FIELDS_LOG``, which says each once (a
warning), never the answer refused: once per method, target, entry and field, in a bounded
memory (an odd entry stays in an address's history and comes back in later answers, and
repeating it each poll would drown the log). An entry stays in an address's history: refusing the
whole answer for it would refuse every later answer too. Likewise a signature entry whose own
identity (signature, slot) is unreadable is left out of its page (``SignaturePage``), not the
page refused. Whether an answer that fits is *plausible* against what came before (a slot far
ahead, an empty cluster) is ``watcher.ledger.plausibility``'s call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import structlog
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)

from watcher.core.base58check import is_base58_of
from watcher.core.redact import REDACTOR

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

# Validation context of answers read from the wire (``watcher.ledger.wire.validate``): stricter
# than values built in code.
FROM_WIRE = "from_wire"
# Validation context key of a list the models append an ``UnknownField`` to, for each field
# they took as unknown (the wire's reader logs them).
UNKNOWN_FIELDS = "unknown_fields"
# The fields naming an entry, in the order they are looked for (to say which entry was odd).
_ENTRY_KEYS = ("signature", "vote_pubkey", "pubkey", "address", "id", "mint")


@dataclass(frozen=True)
class UnknownField:
    """A field the node sent out of its range, taken as unknown: ``entry`` names the entry it
    was in (its signature, pubkey...) when known, ``field`` is the wire's name. ``left_out``:
    the field is the entry's identity, so the entry itself was left out."""

    field: str
    value: Any
    entry: str | None = None
    left_out: bool = False


def note_unknown(info: ValidationInfo, unknown: UnknownField) -> None:
    said = info.context.get(UNKNOWN_FIELDS) if isinstance(info.context, dict) else None
    if isinstance(said, list):
        said.append(unknown)


def Unknowable(wire_name: str, unknown: Any = None) -> WrapValidator:
    """A field that only informs: out of its range or of the wrong type, it is ``unknown``
    (None: as if the node had sent null) instead of the whole answer bad."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        try:
            return handler(value)
        except ValidationError:
            data = info.data if isinstance(info.data, dict) else {}
            entry = next((str(data[key]) for key in _ENTRY_KEYS if key in data), None)
            note_unknown(info, UnknownField(wire_name, value, entry))
            return unknown

    return WrapValidator(validate)


log = structlog.get_logger("watcher.ledger")

REMEMBERED = 10_000  # odd fields remembered as said; the oldest is forgotten first
_VALUE_CHARS = 80


class UnknownFieldLog:
    """Says each field taken as unknown once (see the module), forgetting the oldest first."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._said: OrderedDict[tuple[str, str | None, str | None, str], None] = OrderedDict()
        self._remembered = remembered

    def report(self, method: str, target: str | None, fields: Iterable[UnknownField]) -> None:
        for unknown in fields:
            key = (method, target, unknown.entry, unknown.field)
            if key in self._said:
                self._said.move_to_end(key)
                continue
            self._said[key] = None
            if len(self._said) > self._remembered:
                self._said.popitem(last=False)
            shown = repr(unknown.value)
            if len(shown) > _VALUE_CHARS:
                shown = shown[: _VALUE_CHARS - 1] + "…"
            log.warning(
                "entry left out: its identity is unreadable"
                if unknown.left_out
                else "field out of its range taken as unknown",
                method=method,
                target=target,
                entry=unknown.entry,
                field=unknown.field,
                value=REDACTOR.redact(shown),
            )

    def clear(self) -> None:
        self._said.clear()


# Process-wide, like the logger it filters: a field is said once per process, whichever reader
# (client, pinned endpoint) or kind's check met it, and a reload does not say it again.
UNKNOWN_FIELDS_LOG = UnknownFieldLog()


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Context(_Answer):
    slot: Slot
    api_version: Annotated[str | None, Unknowable("apiVersion")] = Field(
        default=None, alias="apiVersion"
    )


class SignatureEntry(_Answer):
    """One entry of getSignaturesForAddress (newest first in the answer)."""

    signature: Signature
    slot: Slot
    err: Any = None
    memo: Annotated[str | None, Unknowable("memo")] = None
    block_time: Annotated[BlockTime | None, Unknowable("blockTime")] = Field(
        default=None, alias="blockTime"
    )
    confirmation_status: Annotated[
        Literal["processed", "confirmed", "finalized"] | None, Unknowable("confirmationStatus")
    ] = Field(default=None, alias="confirmationStatus")
    transaction_index: Annotated[U64 | None, Unknowable("transactionIndex")] = Field(
        default=None, alias="transactionIndex"
    )


_ENTRY = TypeAdapter(SignatureEntry)


class SignaturePage(list[SignatureEntry]):
    """One answer of getSignaturesForAddress: its readable entries, newest first. ``left_out``:
    the entries the node listed whose own identity is unreadable (a signature that is not base58
    of 64 bytes, a slot out of range), as sent; they are left out and logged, never the page
    refused: the entry stays in the address's history, so refusing it would refuse every later
    page. ``listed``: how many entries the node listed, those included."""

    # A class default, not an ``__init__``: list's own is a quarter of the cost, and a sweep of
    # quiet addresses makes one page per poll.
    left_out: tuple[Any, ...] = ()

    @classmethod
    def with_left_out(
        cls, entries: list[SignatureEntry], left_out: tuple[Any, ...]
    ) -> SignaturePage:
        page = cls(entries)
        if left_out:
            page.left_out = left_out
        return page

    @property
    def listed(self) -> int:
        return len(self) + len(self.left_out)


def _readable_entries(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, list):
        raise ValueError("a list of signature entries")
    if not value:
        return SignaturePage()  # most answers: nothing since the cursor
    entries: list[SignatureEntry] = []
    left_out: list[Any] = []
    for item in value:
        try:
            entries.append(_ENTRY.validate_python(item, context=info.context))
        except ValidationError as exc:
            left_out.append(item)
            first = exc.errors(include_url=False, include_input=False)[0]
            where = str(first["loc"][0]) if first["loc"] else "entry"
            sent = item.get(where) if isinstance(item, dict) else item
            named = item.get("signature") if isinstance(item, dict) else None
            entry = named if isinstance(named, str) else None
            note_unknown(info, UnknownField(where, sent, entry, left_out=True))
    return SignaturePage.with_left_out(entries, tuple(left_out))


SignaturePageAnswer = Annotated[list[SignatureEntry], PlainValidator(_readable_entries)]


class TokenAmount(_Answer):
    """One entry of getTokenLargestAccounts' value (also the value of getTokenAccountBalance)."""

    address: Pubkey | None = None
    amount: U64
    decimals: int = Field(strict=True, ge=0, le=255)
    ui_amount_string: Annotated[str | None, Unknowable("uiAmountString")] = Field(
        default=None, alias="uiAmountString"
    )

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
    # A commission or root slot out of range is unknown (kinds read None as no evidence).
    commission: Annotated[
        Annotated[int, Field(strict=True, ge=0, le=100)] | None, Unknowable("commission")
    ] = None
    last_vote: Slot = Field(alias="lastVote")
    root_slot: Annotated[Slot | None, Unknowable("rootSlot")] = Field(
        default=None, alias="rootSlot"
    )
    # Strict: lax parsing would read the string "0" (or 1) as a flag the node never sent.
    epoch_vote_account: Annotated[
        Annotated[bool, Field(strict=True)] | None, Unknowable("epochVoteAccount")
    ] = Field(default=None, alias="epochVoteAccount")
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
    version: Annotated[str | None, Unknowable("version")] = None
    feature_set: Annotated[
        Annotated[int, Field(strict=True, ge=0, le=2**32 - 1)] | None, Unknowable("featureSet")
    ] = Field(default=None, alias="featureSet")


def _each_node_once(nodes: list[ClusterNode]) -> list[ClusterNode]:
    # Gossip holds one contact info per identity: a node listed twice contradicts itself.
    _unique([node.pubkey for node in nodes], "node")
    return nodes


ClusterNodes = Annotated[list[ClusterNode], AfterValidator(_each_node_once)]
