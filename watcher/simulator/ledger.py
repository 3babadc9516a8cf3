"""The scripted, mutable state of a fake cluster, read by the simulator's RPC methods.

Every public method takes the ledger's lock, so a scenario thread may script changes while the
HTTP server answers. Query methods return fresh plain data (dicts and lists) the caller owns.
"""

from __future__ import annotations

import copy
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from watcher.core.clock import Clock
from watcher.simulator import recorded
from watcher.simulator.accounts import AccountBook
from watcher.simulator.faults import FaultPlan
from watcher.simulator.keys import random_pubkey, random_signature
from watcher.simulator.tokens import TokenControls, _Mint
from watcher.simulator.validators import (
    DELINQUENT_SLOT_DISTANCE,
    ValidatorControls,
    _Validator,
)
from watcher.simulator.votes import VoteControls


@dataclass(frozen=True)
class _Transaction:
    signature: str
    slot: int
    index: int  # position inside its slot (transactionIndex)
    block_time: int
    err: Any
    memo: str | None
    # Fields this entry shows wrong, every time it is listed (a node bug seen in the wild: a
    # blockTime in milliseconds): wire name -> the value shown.
    odd: tuple[tuple[str, Any], ...] = ()

    def entry(self) -> dict[str, Any]:
        return {
            "blockTime": self.block_time,
            "confirmationStatus": "finalized",
            "err": copy.deepcopy(self.err),
            "memo": self.memo,
            "signature": self.signature,
            "slot": self.slot,
            "transactionIndex": self.index,
            **{name: copy.deepcopy(value) for name, value in self.odd},
        }


@dataclass
class _AddressHistory:
    transactions: list[_Transaction] = field(default_factory=list)  # oldest first
    position: dict[str, int] = field(default_factory=dict)  # signature -> index in transactions


def memo_text(memo: str) -> str:
    """The memo as a node reports it: ``"[byte length] text"``."""
    return f"[{len(memo.encode())}] {memo}"


class Ledger(TokenControls, ValidatorControls, VoteControls):
    """A fake cluster: signature histories, token holders, vote accounts and gossip nodes."""

    def __init__(
        self,
        *,
        slot: int = recorded.MAINNET_TIP_SLOT,
        epoch: int = recorded.MAINNET_EPOCH,
        clock: Clock = time.time,
        seed: int | None = None,
    ) -> None:
        self._lock = threading.RLock()
        self._stored_slot = slot
        # Following the wall clock (``follow_wall_clock``): slots the clock is behind the
        # ledger's own after a halt (<= 0); None while the ledger keeps its own slots.
        self._clock_offset: int | None = None
        self._epoch = epoch
        self._clock = clock
        self._rng = random.Random(seed)
        self._revision = 0
        self._histories: dict[str, _AddressHistory] = {}
        self._mints: dict[str, _Mint] = {}
        self._validators: dict[str, _Validator] = {}  # by vote pubkey, in insertion order
        self._nodes: dict[str, dict[str, Any]] = {}  # by node pubkey, in insertion order
        self.faults = FaultPlan()
        self.accounts = AccountBook(self._lock)  # plain accounts and fees (simulator.accounts)

    @classmethod
    def from_mainnet(
        cls, *, clock: Clock = time.time, seed: int | None = None, holders_mint: str | None = None
    ) -> Ledger:
        """The recorded mainnet cluster of August 2025: 1040 current and 48 delinquent vote
        accounts, 6455 gossip nodes; the slot is the recorded tip. With ``holders_mint``, that
        mint holds the recorded top-20 token accounts (8 decimals)."""
        ledger = cls(clock=clock, seed=seed)
        votes = recorded.vote_accounts()
        tip = recorded.MAINNET_TIP_SLOT
        for account in votes["current"] + votes["delinquent"]:
            delinquent = tip - account["lastVote"] >= DELINQUENT_SLOT_DISTANCE
            ledger._validators[account["votePubkey"]] = _Validator(
                vote_pubkey=account["votePubkey"],
                node_pubkey=account["nodePubkey"],
                stake=account["activatedStake"],
                commission=account["commission"],
                epoch_credits=copy.deepcopy(account["epochCredits"]),
                epoch_vote_account=account["epochVoteAccount"],
                lag=0 if delinquent else tip - account["lastVote"],
                frozen_last_vote=account["lastVote"] if delinquent else None,
                root_behind=account["lastVote"] - account["rootSlot"],
            )
        ledger._nodes = {node["pubkey"]: dict(node) for node in recorded.cluster_nodes()}
        if holders_mint is not None:
            holders, decimals = recorded.top_holders()
            ledger.set_holders(holders_mint, holders, decimals=decimals)
        return ledger

    # -- the clock of the cluster ----------------------------------------------------------

    @property
    def _slot(self) -> int:
        """The current slot (read under the lock): the ledger's own, moved by ``tick`` and
        landed transactions, caught up with the wall clock when it follows it."""
        if self._clock_offset is not None and not self.halted:
            now = recorded.wall_clock_slot(self._clock()) + self._clock_offset
            if now > self._stored_slot:
                self._stored_slot = now
                self._changed()
        return self._stored_slot

    @_slot.setter
    def _slot(self, value: int) -> None:
        self._stored_slot = value

    def follow_wall_clock(self) -> None:
        """From now on the slot is at least the wall-clock slot (``recorded.wall_clock_slot``
        of the ledger's clock), so that a simulator restarted later answers no older slot;
        ``tick`` and landed transactions still move it on, and it never goes back. A halted
        cluster's slot stands still and, running again, goes on from there."""
        with self._lock:
            if self._clock_offset is None:
                self._clock_offset = 0
            _ = self._slot  # catch up now

    def halt(self, halted: bool = True) -> None:
        with self._lock:
            if self._clock_offset is not None and self.halted and not halted:
                # Go on from the slot it stood at, not from where the clock has got to.
                wall = recorded.wall_clock_slot(self._clock())
                self._clock_offset = min(0, self._stored_slot - wall)
            _ = self._slot  # caught up to the moment it halts
            super().halt(halted)

    @property
    def slot(self) -> int:
        with self._lock:
            return self._slot

    @property
    def revision(self) -> int:
        """Grows with every change (a slot passing included): answers computed at the same
        revision are the same."""
        with self._lock:
            _ = self._slot  # a slot the wall clock moved on is a change
            return self._revision

    def tick(self, slots: int = 1) -> None:
        if slots < 0:
            raise ValueError("slots must not be negative")
        with self._lock:
            if self.halted:
                return
            self._slot += slots
            self._revision += 1

    def _changed(self) -> None:
        self._revision += 1

    @property
    def lock(self) -> threading.RLock:
        """The ledger's (reentrant) lock: held, several changes show at once to readers that
        hold it too (a transfer's balances and its signature, getMultipleAccounts' answer)."""
        return self._lock

    def new_pubkey(self) -> str:
        """A fresh random pubkey, from the ledger's seeded generator."""
        with self._lock:
            return random_pubkey(self._rng)

    # -- transactions ----------------------------------------------------------------------

    def add_transactions(
        self,
        address: str,
        count: int = 1,
        *,
        err: object = None,
        memo: str | None = None,
        same_slot: bool = False,
        odd: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Lands ``count`` transactions touching ``address``, each in a new slot (or all in one
        new slot with ``same_slot``). Returns their signatures newest first, as the RPC lists
        them. ``odd``: fields their entries show wrong whenever listed, e.g.
        ``{"blockTime": 1790000000000}`` (the ledger itself keeps the true ones for paging)."""
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._lock:
            history = self._histories.setdefault(address, _AddressHistory())
            block_time = int(self._clock())
            for index in range(count):
                if index == 0 or not same_slot:
                    self._slot += 1
                transaction = _Transaction(
                    signature=random_signature(self._rng),
                    slot=self._slot,
                    index=index if same_slot else 0,
                    block_time=block_time,
                    err=copy.deepcopy(err),
                    memo=None if memo is None else memo_text(memo),
                    odd=tuple((odd or {}).items()),
                )
                history.position[transaction.signature] = len(history.transactions)
                history.transactions.append(transaction)
            self._changed()
            return [tx.signature for tx in reversed(history.transactions[-count:])]

    def land_transaction(
        self, addresses: Iterable[str], *, err: object = None, memo: str | None = None
    ) -> str:
        """Lands one transaction in a new slot, listed in the history of every address it
        touches (a transfer: its source and destination); returns its signature."""
        with self._lock:
            self._slot += 1
            transaction = _Transaction(
                signature=random_signature(self._rng),
                slot=self._slot,
                index=0,
                block_time=int(self._clock()),
                err=copy.deepcopy(err),
                memo=None if memo is None else memo_text(memo),
            )
            for address in dict.fromkeys(addresses):  # each once, in order
                history = self._histories.setdefault(address, _AddressHistory())
                history.position[transaction.signature] = len(history.transactions)
                history.transactions.append(transaction)
            self._changed()
            return transaction.signature

    def addresses(self) -> list[str]:
        """Every address with a transaction, in the order of their first."""
        with self._lock:
            return list(self._histories)

    def signatures(self, address: str) -> list[dict[str, Any]]:
        """Every entry of ``address``, newest first."""
        with self._lock:
            history = self._histories.get(address)
            return [tx.entry() for tx in reversed(history.transactions)] if history else []

    def signatures_page(
        self,
        address: str,
        *,
        limit: int = 1000,
        before: str | None = None,
        until: str | None = None,
    ) -> list[dict[str, Any]]:
        """What getSignaturesForAddress answers: newest first, ``before`` and ``until``
        exclusive; an unknown ``before`` gives nothing, an unknown ``until`` is ignored."""
        with self._lock:
            history = self._histories.get(address)
            if history is None:
                return []
            end = len(history.transactions)
            if before is not None:
                if before not in history.position:
                    return []
                end = history.position[before]
            start = max(0, end - limit)
            if until is not None and until in history.position:
                start = max(start, history.position[until] + 1)
            return [tx.entry() for tx in reversed(history.transactions[start:end])]


Kept = TypeVar("Kept")


class PerLedger(Generic[Kept]):
    """What a simulator module keeps beside each ``Ledger`` (its DAS accounts, its powers):
    made by ``make`` on first use, gone with the ledger."""

    def __init__(self, make: Callable[[Ledger], Kept]) -> None:
        self._make = make
        self._kept: weakref.WeakKeyDictionary[Ledger, Kept] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def of(self, ledger: Ledger) -> Kept:
        with self._lock:
            kept = self._kept.get(ledger)
            if kept is None:
                kept = self._kept[ledger] = self._make(ledger)
            return kept
