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
from watcher.simulator.accounts import AccountBook, PlainAccount
from watcher.simulator.faults import FaultPlan
from watcher.simulator.keys import derived_signature, random_pubkey, random_signature
from watcher.simulator.tokens import Tokens
from watcher.simulator.validators import DELINQUENT_SLOT_DISTANCE, KEEP, Validators, _Keep
from watcher.simulator.votes import Votes


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


OLD_BLOCK_TIME = 1_700_000_000  # 2023-11-14: before any watch the simulator serves begins


@dataclass
class _AddressHistory:
    transactions: list[_Transaction] = field(default_factory=list)  # oldest first
    position: dict[str, int] = field(default_factory=dict)  # signature -> index in transactions


def memo_text(memo: str) -> str:
    """The memo as a node reports it: ``"[byte length] text"``."""
    return f"[{len(memo.encode())}] {memo}"


class Ledger:
    """A fake cluster: signature histories, token holders (``tokens``), vote accounts and
    gossip nodes (``validators``, ``votes``) and plain accounts (``accounts``), all under one
    lock."""

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
        self.halted = False  # while true, ``tick`` moves nothing
        self._clock = clock
        self._rng = random.Random(seed)
        self._revision = 0
        self._histories: dict[str, _AddressHistory] = {}
        # True: an address with no history of its own answers one old transaction (a million
        # watched addresses that each have a past, at no cost up front: bench/scale.py).
        self.old_transaction_everywhere = False
        self.tokens = Tokens(self._lock, self._changed)
        self.validators = Validators(
            self._lock, self._changed, current_slot=lambda: self._slot, epoch=epoch
        )
        self.votes = Votes(self._lock, self._changed, validators=self.validators, epoch=epoch)
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
        ledger.validators.load_recorded(recorded.MAINNET_TIP_SLOT)
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
        """Halts the cluster (or lets it run again): no slot passes while it is halted."""
        with self._lock:
            if self._clock_offset is not None and self.halted and not halted:
                # Go on from the slot it stood at, not from where the clock has got to.
                wall = recorded.wall_clock_slot(self._clock())
                self._clock_offset = min(0, self._stored_slot - wall)
            _ = self._slot  # caught up to the moment it halts
            self.halted = halted
            self._changed()

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
        ago: float = 0.0,
    ) -> list[str]:
        """Lands ``count`` transactions touching ``address``, each in a new slot (or all in one
        new slot with ``same_slot``). Returns their signatures newest first, as the RPC lists
        them. ``odd``: fields their entries show wrong whenever listed, e.g.
        ``{"blockTime": 1790000000000}`` (the ledger itself keeps the true ones for paging).
        ``ago``: seconds before the ledger's clock they landed (their blockTime), for a history
        older than any watch started after it (a watch counts the second it began in as after
        it)."""
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._lock:
            history = self._histories.setdefault(address, _AddressHistory())
            block_time = int(self._clock() - ago)
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
            if history is None:
                return self._old_page(address, None, None)
            return [tx.entry() for tx in reversed(history.transactions)]

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
                return self._old_page(address, before, until) if limit > 0 else []
            end = len(history.transactions)
            if before is not None:
                if before not in history.position:
                    return []
                end = history.position[before]
            start = max(0, end - limit)
            if until is not None and until in history.position:
                start = max(start, history.position[until] + 1)
            return [tx.entry() for tx in reversed(history.transactions[start:end])]

    def _old_page(
        self, address: str, before: str | None, until: str | None
    ) -> list[dict[str, Any]]:
        """The one old transaction of an address with no history (``old_transaction_everywhere``),
        unless the page begins or ends at it; else nothing."""
        if not self.old_transaction_everywhere:
            return []
        signature = derived_signature(f"old transaction of {address}")
        if before is not None or until == signature:
            return []
        old = _Transaction(
            signature, recorded.MAINNET_TIP_SLOT - 1_000_000, 0, OLD_BLOCK_TIME, None, None
        )
        return [old.entry()]

    # -- the parts' methods, on the ledger itself (documented on Tokens, Validators, Votes) --

    def set_holders(self, mint: str, holders: Iterable[tuple[str, int]], decimals: int = 6) -> None:
        self.tokens.set_holders(mint, holders, decimals)

    def set_holder_amount(self, mint: str, account: str, amount: int) -> None:
        self.tokens.set_holder_amount(mint, account, amount)

    def holder_amount(self, mint: str, account: str) -> int:
        return self.tokens.holder_amount(mint, account)

    def remove_holder(self, mint: str, account: str) -> None:
        self.tokens.remove_holder(mint, account)

    def largest_accounts(self, mint: str, top: int = 20) -> list[dict[str, Any]] | None:
        return self.tokens.largest_accounts(mint, top)

    def set_supply(self, mint: str, amount: int) -> None:
        self.tokens.set_supply(mint, amount)

    def token_supply(self, mint: str) -> dict[str, Any] | None:
        return self.tokens.token_supply(mint)

    def token_account(self, account: str) -> tuple[str, int, int] | None:
        return self.tokens.token_account(account)

    def set_validator(
        self,
        vote_pubkey: str,
        node_pubkey: str,
        *,
        stake: int,
        delinquent: bool = False,
        commission: int = 0,
    ) -> None:
        self.validators.set_validator(
            vote_pubkey, node_pubkey, stake=stake, delinquent=delinquent, commission=commission
        )

    def mark_delinquent(self, pubkey: str) -> None:
        self.validators.mark_delinquent(pubkey)

    def mark_current(self, pubkey: str) -> None:
        self.validators.mark_current(pubkey)

    def remove_validator(self, pubkey: str) -> None:
        self.validators.remove_validator(pubkey)

    def vote_account(self, vote_pubkey: str) -> PlainAccount | None:
        return self.validators.vote_account(vote_pubkey)

    def vote_accounts(
        self,
        *,
        vote_pubkey: str | None = None,
        keep_unstaked_delinquents: bool = False,
        delinquent_distance: int = DELINQUENT_SLOT_DISTANCE,
    ) -> dict[str, list[dict[str, Any]]]:
        return self.validators.vote_accounts(
            vote_pubkey=vote_pubkey,
            keep_unstaked_delinquents=keep_unstaked_delinquents,
            delinquent_distance=delinquent_distance,
        )

    def pick_validator(
        self,
        version_prefix: str | None = None,
        *,
        delinquent: bool = False,
        exclude: Iterable[str] = (),
    ) -> tuple[str, str]:
        return self.validators.pick_validator(
            version_prefix, delinquent=delinquent, exclude=exclude
        )

    def set_node(
        self,
        pubkey: str,
        *,
        version: str | _Keep | None = KEEP,
        feature_set: int | _Keep | None = KEEP,
    ) -> None:
        self.validators.set_node(pubkey, version=version, feature_set=feature_set)

    def remove_node(self, pubkey: str) -> None:
        self.validators.remove_node(pubkey)

    def node(self, pubkey: str) -> dict[str, Any] | None:
        return self.validators.node(pubkey)

    def cluster_nodes(self) -> list[dict[str, Any]]:
        return self.validators.cluster_nodes()

    def update_validator(
        self,
        pubkey: str,
        *,
        behind: int | None = None,
        credits: int | None = None,
        commission: int | None = None,
        stake: int | None = None,
        balance: int | None = None,
    ) -> None:
        self.votes.update_validator(
            pubkey,
            behind=behind,
            credits=credits,
            commission=commission,
            stake=stake,
            balance=balance,
        )


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
