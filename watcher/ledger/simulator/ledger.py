"""The scripted, mutable state of a fake cluster, read by the simulator's RPC methods.

Every public method takes the ledger's lock, so a scenario thread may script changes while the
HTTP server answers. Query methods return fresh plain data (dicts and lists) the caller owns.
"""

from __future__ import annotations

import copy
import hashlib
import random
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from watcher.core.clock import Clock
from watcher.ledger.simulator import recorded
from watcher.ledger.simulator.accounts import AccountBook
from watcher.ledger.simulator.faults import FaultPlan
from watcher.ledger.simulator.keys import random_signature
from watcher.ledger.simulator.votes import VoteControls

# A validator is delinquent when its last vote is this many slots or more behind (agave
# DELINQUENT_VALIDATOR_SLOT_DISTANCE); mark_delinquent() freezes its vote further back than that.
DELINQUENT_SLOT_DISTANCE: Final = 128
_DELINQUENT_FREEZE_BEHIND: Final = 150
_ROOT_BEHIND_LAST_VOTE: Final = 31  # how far rootSlot usually trails lastVote (recording)


class _Keep:
    """Marker for "leave this field as it is" (``None`` is a real value: a null version)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = _Keep()


@dataclass(frozen=True)
class _Transaction:
    signature: str
    slot: int
    index: int  # position inside its slot (transactionIndex)
    block_time: int
    err: Any
    memo: str | None

    def entry(self) -> dict[str, Any]:
        return {
            "blockTime": self.block_time,
            "confirmationStatus": "finalized",
            "err": copy.deepcopy(self.err),
            "memo": self.memo,
            "signature": self.signature,
            "slot": self.slot,
            "transactionIndex": self.index,
        }


@dataclass
class _AddressHistory:
    transactions: list[_Transaction] = field(default_factory=list)  # oldest first
    position: dict[str, int] = field(default_factory=dict)  # signature -> index in transactions


@dataclass
class _Mint:
    decimals: int
    holders: dict[str, int]  # token account -> raw amount


@dataclass
class _Validator:
    vote_pubkey: str
    node_pubkey: str
    stake: int
    commission: int
    epoch_credits: list[list[int]]
    epoch_vote_account: bool
    lag: int  # slots its last vote trails the tip while it votes
    frozen_last_vote: int | None  # set while it does not vote (delinquent)
    root_behind: int = _ROOT_BEHIND_LAST_VOTE  # slots rootSlot trails lastVote


def memo_text(memo: str) -> str:
    """The memo as a node reports it: ``"[byte length] text"``."""
    return f"[{len(memo.encode())}] {memo}"


def ui_amount_string(amount: int, decimals: int) -> str:
    """Raw amount -> decimal string with trailing zeros trimmed, as a node prints it."""
    if decimals == 0:
        return str(amount)
    digits = str(amount).rjust(decimals + 1, "0")
    whole, fraction = digits[:-decimals], digits[-decimals:].rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def token_amount(amount: int, decimals: int) -> dict[str, Any]:
    return {
        "amount": str(amount),
        "decimals": decimals,
        "uiAmount": amount / 10**decimals,
        "uiAmountString": ui_amount_string(amount, decimals),
    }


def _node_address(pubkey: str, port: int) -> str:
    digest = hashlib.sha256(pubkey.encode()).digest()
    return f"10.{digest[0]}.{digest[1]}.{digest[2] or 1}:{port}"


def _new_node(pubkey: str) -> dict[str, Any]:
    ports = {"gossip": 8001, "serveRepair": 8012, "tpu": 8003, "tpuForwards": 8004,
             "tpuForwardsQuic": 8010, "tpuQuic": 8009, "tpuVote": 8005, "tvu": 8002}
    node: dict[str, Any] = {name: _node_address(pubkey, port) for name, port in ports.items()}
    node.update(featureSet=None, pubkey=pubkey, pubsub=None, rpc=None,
                shredVersion=recorded.MAINNET_SHRED_VERSION, version=None)
    return dict(sorted(node.items()))


class Ledger(VoteControls):
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
        self._slot = slot
        self._epoch = epoch
        self._clock = clock
        self._rng = random.Random(seed)
        self._revision = 0
        self._histories: dict[str, _AddressHistory] = {}
        self._mints: dict[str, _Mint] = {}
        self._validators: dict[str, _Validator] = {}  # by vote pubkey, in insertion order
        self._nodes: dict[str, dict[str, Any]] = {}  # by node pubkey, in insertion order
        self.faults = FaultPlan()
        self.accounts = AccountBook()  # plain accounts and fees (simulator.accounts)

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
    def slot(self) -> int:
        with self._lock:
            return self._slot

    @property
    def revision(self) -> int:
        """Grows with every change: answers computed at the same revision are the same."""
        with self._lock:
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

    # -- transactions ----------------------------------------------------------------------

    def add_transactions(
        self,
        address: str,
        count: int = 1,
        *,
        err: object = None,
        memo: str | None = None,
        same_slot: bool = False,
    ) -> list[str]:
        """Lands ``count`` transactions touching ``address``, each in a new slot (or all in one
        new slot with ``same_slot``). Returns their signatures newest first, as the RPC lists
        them."""
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
                )
                history.position[transaction.signature] = len(history.transactions)
                history.transactions.append(transaction)
            self._changed()
            return [tx.signature for tx in reversed(history.transactions[-count:])]

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

    # -- token holders ---------------------------------------------------------------------

    def set_holders(self, mint: str, holders: Iterable[tuple[str, int]], decimals: int = 6) -> None:
        """Replaces every token account of ``mint`` (token account address -> raw amount)."""
        with self._lock:
            self._mints[mint] = _Mint(decimals, {account: amount for account, amount in holders})
            self._changed()

    def set_holder_amount(self, mint: str, account: str, amount: int) -> None:
        """Sets (or adds) one token account of a known mint."""
        with self._lock:
            self._mint(mint).holders[account] = amount
            self._changed()

    def holder_amount(self, mint: str, account: str) -> int:
        with self._lock:
            return self._mint(mint).holders[account]

    def remove_holder(self, mint: str, account: str) -> None:
        with self._lock:
            del self._mint(mint).holders[account]
            self._changed()

    def _mint(self, mint: str) -> _Mint:
        if mint not in self._mints:
            raise KeyError(f"unknown mint {mint}")
        return self._mints[mint]

    def largest_accounts(self, mint: str, top: int = 20) -> list[dict[str, Any]] | None:
        """The ``top`` largest token accounts, amount descending; None for an unknown mint."""
        with self._lock:
            found = self._mints.get(mint)
            if found is None:
                return None
            ranked = sorted(found.holders.items(), key=lambda item: (-item[1], item[0]))[:top]
            return [{"address": account, **token_amount(amount, found.decimals)}
                    for account, amount in ranked]

    def set_supply(self, mint: str, amount: int) -> None:
        """Mints or burns the difference on the mint's largest token account, so that the
        supply (the sum of its accounts) becomes ``amount``. ``ValueError`` when burning more
        than that account holds."""
        with self._lock:
            holders = self._mint(mint).holders
            if not holders:
                raise ValueError(f"mint {mint} has no token account to mint to or burn from")
            largest = max(holders, key=lambda account: (holders[account], account))
            after = holders[largest] + amount - sum(holders.values())
            if after < 0:
                raise ValueError(f"cannot burn more than the largest account holds ({largest})")
            holders[largest] = after
            self._changed()

    def token_supply(self, mint: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._mints.get(mint)
            if found is None:
                return None
            return token_amount(sum(found.holders.values()), found.decimals)

    def token_account(self, account: str) -> tuple[str, int, int] | None:
        """``(mint, raw amount, decimals)`` of a token account, or None."""
        with self._lock:
            for mint, found in self._mints.items():
                if account in found.holders:
                    return mint, found.holders[account], found.decimals
            return None

    # -- validators (vote accounts) -------------------------------------------------------

    def set_validator(
        self,
        vote_pubkey: str,
        node_pubkey: str,
        *,
        stake: int,
        delinquent: bool = False,
        commission: int = 0,
    ) -> None:
        """Adds or updates a vote account; a new one gets five epochs of plausible credits."""
        with self._lock:
            found = self._validators.get(vote_pubkey)
            if found is None:
                credits = [[self._epoch - 4 + i, 6_900_000 * (i + 1), 6_900_000 * i]
                           for i in range(5)]
                found = _Validator(vote_pubkey, node_pubkey, stake, commission, credits,
                                   True, 0, None)
                self._validators[vote_pubkey] = found
            found.node_pubkey, found.stake, found.commission = node_pubkey, stake, commission
            self._set_voting(found, voting=not delinquent)
            self._changed()

    def mark_delinquent(self, pubkey: str) -> None:
        """Stops the vote account(s) of ``pubkey`` (vote or node pubkey) voting: its last vote
        freezes more than 128 slots behind the tip."""
        with self._lock:
            for validator in self._matching(pubkey):
                self._set_voting(validator, voting=False)
            self._changed()

    def mark_current(self, pubkey: str) -> None:
        """Makes the vote account(s) of ``pubkey`` (vote or node pubkey) vote at the tip again."""
        with self._lock:
            for validator in self._matching(pubkey):
                self._set_voting(validator, voting=True)
            self._changed()

    def remove_validator(self, pubkey: str) -> None:
        with self._lock:
            for validator in self._matching(pubkey):
                del self._validators[validator.vote_pubkey]
            self._changed()

    def _set_voting(self, validator: _Validator, *, voting: bool) -> None:
        if voting:
            validator.lag, validator.frozen_last_vote = 0, None
        elif validator.frozen_last_vote is None:
            validator.frozen_last_vote = self._slot - _DELINQUENT_FREEZE_BEHIND

    def _matching(self, pubkey: str) -> list[_Validator]:
        found = [v for v in self._validators.values() if pubkey in (v.vote_pubkey, v.node_pubkey)]
        if not found:
            raise KeyError(f"no vote account with vote or node pubkey {pubkey}")
        return found

    def vote_accounts(
        self,
        *,
        vote_pubkey: str | None = None,
        keep_unstaked_delinquents: bool = False,
        delinquent_distance: int = DELINQUENT_SLOT_DISTANCE,
    ) -> dict[str, list[dict[str, Any]]]:
        """What getVoteAccounts answers: delinquent when the last vote is ``delinquent_distance``
        slots or more behind the tip; unstaked delinquents left out unless asked for."""
        with self._lock:
            answer: dict[str, list[dict[str, Any]]] = {"current": [], "delinquent": []}
            for validator in self._validators.values():
                if vote_pubkey is not None and validator.vote_pubkey != vote_pubkey:
                    continue
                last_vote = validator.frozen_last_vote
                if last_vote is None:
                    last_vote = self._slot - validator.lag
                is_delinquent = self._slot - last_vote >= delinquent_distance
                if is_delinquent and validator.stake == 0 and not keep_unstaked_delinquents:
                    continue
                answer["delinquent" if is_delinquent else "current"].append({
                    "activatedStake": validator.stake,
                    "commission": validator.commission,
                    "epochCredits": copy.deepcopy(validator.epoch_credits),
                    "epochVoteAccount": validator.epoch_vote_account,
                    "lastVote": last_vote,
                    "nodePubkey": validator.node_pubkey,
                    "rootSlot": max(0, last_vote - validator.root_behind),
                    "votePubkey": validator.vote_pubkey,
                })
            return answer

    def pick_validator(
        self,
        version_prefix: str | None = None,
        *,
        delinquent: bool = False,
        exclude: Iterable[str] = (),
    ) -> tuple[str, str]:
        """``(vote pubkey, node pubkey)`` of a validator whose gossip node reports a version
        starting with ``version_prefix``; the most staked match, current unless ``delinquent``.
        ``exclude`` skips vote or node pubkeys already used."""
        skip = set(exclude)
        with self._lock:
            ranked = sorted(self._validators.values(), key=lambda v: (-v.stake, v.vote_pubkey))
            for validator in ranked:
                node = self._nodes.get(validator.node_pubkey)
                version = node.get("version") if node else None
                if (
                    (validator.frozen_last_vote is not None) == delinquent
                    and not skip & {validator.vote_pubkey, validator.node_pubkey}
                    and node is not None
                    and (version_prefix is None or (version or "").startswith(version_prefix))
                ):
                    return validator.vote_pubkey, validator.node_pubkey
        raise LookupError(f"no validator whose node reports version {version_prefix!r}*")

    # -- gossip nodes ----------------------------------------------------------------------

    def set_node(
        self,
        pubkey: str,
        *,
        version: str | _Keep | None = KEEP,
        feature_set: int | _Keep | None = KEEP,
    ) -> None:
        """Adds or updates a gossip node. A new version without an explicit ``feature_set``
        takes the feature set most other nodes of that version report (as a real upgrade
        would); a new node starts with null version and feature set."""
        with self._lock:
            node = self._nodes.get(pubkey)
            if node is None:
                node = self._nodes[pubkey] = _new_node(pubkey)
            if not isinstance(version, _Keep):
                if isinstance(feature_set, _Keep) and version != node["version"]:
                    feature_set = self._usual_feature_set(version, node["featureSet"])
                node["version"] = version
            if not isinstance(feature_set, _Keep):
                node["featureSet"] = feature_set
            self._changed()

    def _usual_feature_set(self, version: str | None, fallback: int | None) -> int | None:
        sets = Counter(n["featureSet"] for n in self._nodes.values() if n["version"] == version)
        return sets.most_common(1)[0][0] if version is not None and sets else fallback

    def remove_node(self, pubkey: str) -> None:
        with self._lock:
            del self._nodes[pubkey]
            self._changed()

    def node(self, pubkey: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._nodes.get(pubkey)
            return dict(found) if found is not None else None

    def cluster_nodes(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(node) for node in self._nodes.values()]
