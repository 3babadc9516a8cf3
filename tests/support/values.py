"""Small values the unit tests build: valid pubkeys and signatures from labels, signature
entries and histories, and a clock the test moves by hand."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import base58

from watcher.core.events import AlertMessage, StepOutcome
from watcher.ledger.models import SignatureEntry


def key(label: str | int) -> str:
    """A valid base58 pubkey derived from a label."""
    return base58.b58encode(hashlib.sha256(f"key-{label}".encode()).digest()).decode()


def sig(label: str | int) -> str:
    """A valid base58 transaction signature (64 bytes) derived from a label."""
    return base58.b58encode(hashlib.sha512(f"sig-{label}".encode()).digest()).decode()


def entry(
    label: str | int, slot: int, *, err: object = None, memo: str | None = None
) -> SignatureEntry:
    return SignatureEntry(
        signature=sig(label), slot=slot, err=err, memo=memo, blockTime=1_750_000_000 + slot
    )


def history(count: int, *, first_slot: int = 1000, per_slot: int = 3) -> list[SignatureEntry]:
    """``count`` entries, newest first, ``per_slot`` to a slot."""
    entries = [entry(n, first_slot + n // per_slot) for n in range(count)]
    return list(reversed(entries))


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def step_outcome(*keys: str, episodes: dict[str, Any] | None = None) -> StepOutcome:
    """A step's outcome: one firing alert per dedup key, and the episodes its state keeps (what
    the quorum compares)."""
    alerts = tuple(
        AlertMessage(
            rule="r",
            severity="warning",
            subject="s",
            reason="firing",
            dedup_key=k,
            title="t",
            body="b",
            channels=(),
        )
        for k in keys
    )
    return StepOutcome(state={"episodes": episodes or {}}, alerts=alerts)


def signatures_page(
    entries: Sequence[SignatureEntry],
    *,
    before: str | None = None,
    until: str | None = None,
    limit: int = 1000,
) -> list[SignatureEntry]:
    """What a node answers getSignaturesForAddress over ``entries`` (newest first): ``before``
    and ``until`` exclusive, one it does not know ignored, at most ``limit``."""
    found = [e.signature for e in entries]
    answer = list(entries)
    if before is not None and before in found:
        answer = answer[found.index(before) + 1 :]
    if until is not None and until in found:
        answer = [e for e in answer if found.index(e.signature) < found.index(until)]
    return answer[:limit]
