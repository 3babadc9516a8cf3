"""Vote accounts and gossip nodes on the fake cluster (a part of ``Ledger``): who votes, how
far behind, and what version each node reports, answered as getVoteAccounts and
getClusterNodes."""

from __future__ import annotations

import copy
import hashlib
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from watcher.simulator import recorded
from watcher.simulator.accounts import PlainAccount

# A validator is delinquent when its last vote is this many slots or more behind (agave
# DELINQUENT_VALIDATOR_SLOT_DISTANCE); mark_delinquent() freezes its vote further back than that.
DELINQUENT_SLOT_DISTANCE: Final = 128
_DELINQUENT_FREEZE_BEHIND: Final = 150
_ROOT_BEHIND_LAST_VOTE: Final = 31  # how far rootSlot usually trails lastVote (recording)
VOTE_PROGRAM: Final = "Vote111111111111111111111111111111111111111"
VOTE_ACCOUNT_SIZE: Final = 3762  # a VoteStateV4
# A vote account's balance unless a test sets it: its rent-exempt minimum and 5 SOL.
DEFAULT_VOTE_BALANCE: Final = 27_074_400 + 5_000_000_000


class _Keep:
    """Marker for "leave this field as it is" (``None`` is a real value: a null version)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = _Keep()


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
    balance: int = DEFAULT_VOTE_BALANCE  # the vote account's lamports (getMultipleAccounts)


def _node_address(pubkey: str, port: int) -> str:
    digest = hashlib.sha256(pubkey.encode()).digest()
    return f"10.{digest[0]}.{digest[1]}.{digest[2] or 1}:{port}"


def _new_node(pubkey: str) -> dict[str, Any]:
    ports = {
        "gossip": 8001,
        "serveRepair": 8012,
        "tpu": 8003,
        "tpuForwards": 8004,
        "tpuForwardsQuic": 8010,
        "tpuQuic": 8009,
        "tpuVote": 8005,
        "tvu": 8002,
    }
    node: dict[str, Any] = {name: _node_address(pubkey, port) for name, port in ports.items()}
    node.update(
        featureSet=None,
        pubkey=pubkey,
        pubsub=None,
        rpc=None,
        shredVersion=recorded.MAINNET_SHRED_VERSION,
        version=None,
    )
    return dict(sorted(node.items()))


class Validators:
    """The vote accounts and gossip nodes of one ledger, in epoch ``epoch``; ``current_slot``
    reads the cluster's tip (called with the lock held). Every public method takes ``lock``
    (the ledger's) and calls ``changed`` after a change."""

    def __init__(
        self,
        lock: threading.RLock,
        changed: Callable[[], None],
        *,
        current_slot: Callable[[], int],
        epoch: int,
    ) -> None:
        self._lock = lock
        self._changed = changed
        self._current_slot = current_slot
        self._epoch = epoch
        self._validators: dict[str, _Validator] = {}  # by vote pubkey, in insertion order
        self._nodes: dict[str, dict[str, Any]] = {}  # by node pubkey, in insertion order

    def load_recorded(self, tip: int) -> None:
        """Replaces every vote account and gossip node with the recorded mainnet ones
        (``recorded.vote_accounts``, ``recorded.cluster_nodes``), recorded at slot ``tip``."""
        votes = recorded.vote_accounts()
        with self._lock:
            self._validators = {}
            for account in votes["current"] + votes["delinquent"]:
                delinquent = tip - account["lastVote"] >= DELINQUENT_SLOT_DISTANCE
                self._validators[account["votePubkey"]] = _Validator(
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
            self._nodes = {node["pubkey"]: dict(node) for node in recorded.cluster_nodes()}
            self._changed()

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
                credits = [
                    [self._epoch - 4 + i, 6_900_000 * (i + 1), 6_900_000 * i] for i in range(5)
                ]
                found = _Validator(
                    vote_pubkey, node_pubkey, stake, commission, credits, True, 0, None
                )
                self._validators[vote_pubkey] = found
            found.node_pubkey, found.stake, found.commission = node_pubkey, stake, commission
            self._set_voting(found, voting=not delinquent)
            self._changed()

    def mark_delinquent(self, pubkey: str) -> None:
        """Stops the vote account(s) of ``pubkey`` (vote or node pubkey) voting: its last vote
        freezes more than 128 slots behind the tip."""
        with self._lock:
            for validator in self.matching(pubkey):
                self._set_voting(validator, voting=False)
            self._changed()

    def mark_current(self, pubkey: str) -> None:
        """Makes the vote account(s) of ``pubkey`` (vote or node pubkey) vote at the tip again."""
        with self._lock:
            for validator in self.matching(pubkey):
                self._set_voting(validator, voting=True)
            self._changed()

    def remove_validator(self, pubkey: str) -> None:
        with self._lock:
            for validator in self.matching(pubkey):
                del self._validators[validator.vote_pubkey]
            self._changed()

    def _set_voting(self, validator: _Validator, *, voting: bool) -> None:
        if voting:
            validator.lag, validator.frozen_last_vote = 0, None
        elif validator.frozen_last_vote is None:
            validator.frozen_last_vote = self._current_slot() - _DELINQUENT_FREEZE_BEHIND

    def matching(self, pubkey: str) -> list[_Validator]:
        """The vote accounts whose vote or node pubkey is ``pubkey`` (the caller holds the
        lock and may change them); ``KeyError`` when there is none."""
        found = [v for v in self._validators.values() if pubkey in (v.vote_pubkey, v.node_pubkey)]
        if not found:
            raise KeyError(f"no vote account with vote or node pubkey {pubkey}")
        return found

    def vote_account(self, vote_pubkey: str) -> PlainAccount | None:
        """The vote account as getMultipleAccounts shows it (owned by the vote program, its
        data zeros of a VoteStateV4's size); None: no such vote account."""
        with self._lock:
            validator = self._validators.get(vote_pubkey)
            if validator is None:
                return None
            return PlainAccount(validator.balance, VOTE_PROGRAM, bytes(VOTE_ACCOUNT_SIZE))

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
            tip = self._current_slot()  # one tip for the whole answer (a wall-clock slot moves on)
            answer: dict[str, list[dict[str, Any]]] = {"current": [], "delinquent": []}
            for validator in self._validators.values():
                if vote_pubkey is not None and validator.vote_pubkey != vote_pubkey:
                    continue
                last_vote = validator.frozen_last_vote
                if last_vote is None:
                    last_vote = tip - validator.lag
                is_delinquent = tip - last_vote >= delinquent_distance
                if is_delinquent and validator.stake == 0 and not keep_unstaked_delinquents:
                    continue
                answer["delinquent" if is_delinquent else "current"].append(
                    {
                        "activatedStake": validator.stake,
                        "commission": validator.commission,
                        "epochCredits": copy.deepcopy(validator.epoch_credits),
                        "epochVoteAccount": validator.epoch_vote_account,
                        "lastVote": last_vote,
                        "nodePubkey": validator.node_pubkey,
                        "rootSlot": max(0, last_vote - validator.root_behind),
                        "votePubkey": validator.vote_pubkey,
                    }
                )
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
