"""The RPC methods the simulator answers, with a real node's parameter checks and errors.

``RpcMethods.answer(method, params)`` returns the result as compact JSON text with keys in
alphabetical order (what a node sends), or raises ``RpcError``.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Final

import base58

from watcher.simulator import accounts
from watcher.simulator.das import das_methods, das_of
from watcher.simulator.keys import derived_pubkey
from watcher.simulator.ledger import Ledger
from watcher.simulator.params import (
    RpcError,
    _checked_pubkey,
    _config,
    _int_option,
    _pubkey,
    _signature,
    invalid_params,
)
from watcher.simulator.recorded import API_VERSION
from watcher.simulator.tokens import token_amount
from watcher.simulator.validators import DELINQUENT_SLOT_DISTANCE

MAX_SIGNATURES_LIMIT: Final = 1000
TOKEN_PROGRAM: Final = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
# Answers this big are worth keeping between polls at the same ledger revision.
_CACHED_METHODS: Final = frozenset({"getClusterNodes", "getVoteAccounts"})
_RENT_EXEMPT = {82: 1_461_600, 165: 2_039_280}  # lamports of a mint / token account


def encode_result(result: Any) -> str:
    return json.dumps(result, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class RpcMethods:
    """Answers calls against one ledger. Thread-safe (the ledger locks; the cache locks)."""

    def __init__(self, ledger: Ledger, *, ignore_until: Callable[[], bool] | None = None) -> None:
        self._ledger = ledger
        self._ignore_until = ignore_until or (lambda: ledger.faults.ignore_until)
        self._cache: dict[tuple[str, str], tuple[int, str]] = {}
        self._cache_lock = threading.Lock()
        self._handlers: dict[str, Callable[[list[Any]], Any]] = {
            "getSignaturesForAddress": self._get_signatures_for_address,
            "getTokenLargestAccounts": self._get_token_largest_accounts,
            "getVoteAccounts": self._get_vote_accounts,
            "getClusterNodes": self._get_cluster_nodes,
            "getTokenSupply": self._get_token_supply,
            "getTokenAccountBalance": self._get_token_account_balance,
            "getAccountInfo": partial(accounts.get_account_info, self),
            "getMultipleAccounts": partial(accounts.get_multiple_accounts, self),
            "getFeeForMessage": partial(accounts.get_fee_for_message, self),
        }
        self._handlers.update(das_methods(ledger))

    @property
    def methods(self) -> frozenset[str]:
        return frozenset(self._handlers)

    def answer(self, method: str, params: Any) -> str:
        """The call's result as JSON text, or ``RpcError``."""
        handler = self._handlers.get(method)
        if handler is None:
            raise RpcError(-32601, "Method not found")
        if params is None:
            params = []
        if not isinstance(params, list):
            raise invalid_params("Invalid params: invalid type: expected a sequence")
        if method not in _CACHED_METHODS:
            return encode_result(handler(params))
        key = (method, encode_result(params))
        revision = self._ledger.revision
        with self._cache_lock:
            cached = self._cache.get(key)
        if cached is not None and cached[0] == revision:
            return cached[1]
        text = encode_result(handler(params))
        with self._cache_lock:
            self._cache[key] = (revision, text)
        return text

    def _context(self) -> dict[str, Any]:
        return {"apiVersion": API_VERSION, "slot": self._ledger.slot}

    def _min_context_slot(self, config: dict[str, Any]) -> None:
        wanted = _int_option(config, "minContextSlot")
        slot = self._ledger.slot
        if wanted is not None and wanted > slot:
            raise RpcError(
                -32016, "Minimum context slot has not been reached", {"contextSlot": slot}
            )

    # -- the four methods the daemon uses -------------------------------------------------

    def _get_signatures_for_address(self, params: list[Any]) -> Any:
        address = _pubkey(params)
        config = _config(params, 1)
        if config.get("commitment") == "processed":
            raise invalid_params("Method does not support commitment below `confirmed`")
        limit = config.get("limit")
        if limit is None:
            limit = MAX_SIGNATURES_LIMIT
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise invalid_params("Invalid params: invalid type for `limit`: expected usize")
        if not 1 <= limit <= MAX_SIGNATURES_LIMIT:
            raise invalid_params(f"Invalid limit; max {MAX_SIGNATURES_LIMIT}")
        before = _signature(config.get("before"))
        until = _signature(config.get("until"))
        self._min_context_slot(config)
        if self._ignore_until():
            until = None
        return self._ledger.signatures_page(address, limit=limit, before=before, until=until)

    def _get_token_largest_accounts(self, params: list[Any]) -> Any:
        mint = _pubkey(params)
        _config(params, 1)
        value = self._ledger.largest_accounts(mint)
        if value is None:
            raise invalid_params("Invalid param: could not find mint")
        return {"context": self._context(), "value": value}

    def _get_vote_accounts(self, params: list[Any]) -> Any:
        config = _config(params, 0)
        vote_pubkey = config.get("votePubkey")
        if vote_pubkey is not None:
            _checked_pubkey(vote_pubkey)
        distance = _int_option(config, "delinquentSlotDistance")
        return self._ledger.vote_accounts(
            vote_pubkey=vote_pubkey,
            keep_unstaked_delinquents=bool(config.get("keepUnstakedDelinquents", False)),
            delinquent_distance=DELINQUENT_SLOT_DISTANCE if distance is None else distance,
        )

    def _get_cluster_nodes(self, params: list[Any]) -> Any:
        return self._ledger.cluster_nodes()

    # -- cheap extras: token supply and balances, mint and token accounts -----------------

    def _get_token_supply(self, params: list[Any]) -> Any:
        mint = _pubkey(params)
        _config(params, 1)
        value = self._ledger.token_supply(mint)
        if value is None:
            raise invalid_params("Invalid param: not a Token mint")
        return {"context": self._context(), "value": value}

    def _get_token_account_balance(self, params: list[Any]) -> Any:
        account = _pubkey(params)
        _config(params, 1)
        found = self._ledger.token_account(account)
        if found is None:
            raise invalid_params("Invalid param: could not find account")
        _, amount, decimals = found
        return {"context": self._context(), "value": token_amount(amount, decimals)}

    # For handlers in other modules (watcher.simulator.accounts).
    @property
    def ledger(self) -> Ledger:
        return self._ledger

    def context(self) -> dict[str, Any]:
        return self._context()

    def check_min_context_slot(self, config: dict[str, Any]) -> None:
        self._min_context_slot(config)

    def account_json(self, address: str, encoding: Any) -> dict[str, Any] | None:
        return self._account(address, encoding)

    def _account(self, address: str, encoding: Any) -> dict[str, Any] | None:
        supply = self._ledger.token_supply(address)
        token = self._ledger.token_account(address)
        if supply is not None:
            raw = _mint_bytes(int(supply["amount"]), int(supply["decimals"]))
            parsed = {
                "info": {
                    "decimals": supply["decimals"],
                    "freezeAuthority": None,
                    "isInitialized": True,
                    "mintAuthority": None,
                    "supply": supply["amount"],
                },
                "type": "mint",
            }
        elif token is not None:
            mint, amount, decimals = token
            owner = derived_pubkey(f"owner of {address}")
            raw = _token_account_bytes(mint, owner, amount)
            parsed = {
                "info": {
                    "isNative": False,
                    "mint": mint,
                    "owner": owner,
                    "state": "initialized",
                    "tokenAmount": token_amount(amount, decimals),
                },
                "type": "account",
            }
        else:  # a program's account (getProgramAccounts' own), or none
            return das_of(self._ledger).programs.account_json(address, encoding)
        return {
            "data": _encoded(raw, parsed, encoding),
            "executable": False,
            "lamports": _RENT_EXEMPT[len(raw)],
            "owner": TOKEN_PROGRAM,
            "rentEpoch": 2**64 - 1,
            "space": len(raw),
        }


def _mint_bytes(supply: int, decimals: int) -> bytes:
    # SPL mint layout: COption<authority>, supply u64, decimals u8, initialized, COption<freeze>.
    none = bytes(36)
    return none + struct.pack("<QBB", supply, decimals, 1) + none


def _token_account_bytes(mint: str, owner: str, amount: int) -> bytes:
    # SPL token account layout (165 bytes): mint, owner, amount, delegate, state, is_native,
    # delegated_amount, close_authority.
    head = base58.b58decode(mint) + base58.b58decode(owner) + struct.pack("<Q", amount)
    tail = bytes(36) + bytes([1]) + bytes(12) + bytes(8) + bytes(36)
    return bytes(head) + tail


def _encoded(raw: bytes, parsed: dict[str, Any], encoding: Any) -> Any:
    if encoding == "jsonParsed":
        return {"parsed": parsed, "program": "spl-token", "space": len(raw)}
    if encoding == "base64":
        return [base64.b64encode(raw).decode(), "base64"]
    if encoding == "base58":
        return [base58.b58encode(raw).decode(), "base58"]
    if encoding == "binary":  # the legacy default: a bare base58 string
        return base58.b58encode(raw).decode()
    raise invalid_params(f"Invalid params: unknown variant `{encoding}`")
