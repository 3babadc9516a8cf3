"""Plain accounts and fees of the simulated ledger, and the methods reading them:
getMultipleAccounts, getAccountInfo and getFeeForMessage.

``AccountBook`` holds accounts set by tests (``set_account``: lamports, owner, data,
executable) and the fee schedule (lamports per signature; whether recent blockhashes have
expired). getMultipleAccounts answers one element per key (getAccountInfo: the one key's): a
plain account, else a mint or token account of the ledger's mints, else a program's account,
else null. getFeeForMessage reads a legacy or v0 message (base64): its fee is the number of
required signatures times the fee per signature; its value is null once blockhashes have
expired (``expire_blockhashes``).
"""

from __future__ import annotations

import base64
import binascii
import threading
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

import base58

from watcher.core.lamports import LAMPORTS_PER_SIGNATURE
from watcher.simulator.keys import pubkey_problem
from watcher.simulator.params import _config, _pubkey, invalid_params

SYSTEM_PROGRAM: Final = "11111111111111111111111111111111"
# A node refuses more keys in one getMultipleAccounts call.
MAX_MULTIPLE_ACCOUNTS: Final = 100


@dataclass(frozen=True)
class PlainAccount:
    lamports: int
    owner: str = SYSTEM_PROGRAM
    data: bytes = b""
    executable: bool = False


class AccountBook:
    """Accounts and fees; thread-safe. ``lock``: the ledger's, so that a change made under it
    (a transfer) shows whole to a reader holding it (getMultipleAccounts)."""

    def __init__(self, lock: threading.RLock | None = None) -> None:
        self._lock = lock if lock is not None else threading.RLock()
        self._accounts: dict[str, PlainAccount] = {}
        self.lamports_per_signature = LAMPORTS_PER_SIGNATURE
        self.blockhashes_expired = False

    def set_account(
        self,
        address: str,
        *,
        lamports: int | None = None,
        owner: str | None = None,
        data: bytes | None = None,
        executable: bool | None = None,
    ) -> None:
        """Creates the account (0 lamports, system-owned, no data) or changes what is given."""
        with self._lock:
            account = self._accounts.get(address, PlainAccount(0))
            changes: dict[str, Any] = {
                "lamports": lamports,
                "owner": owner,
                "data": data,
                "executable": executable,
            }
            given = {key: value for key, value in changes.items() if value is not None}
            self._accounts[address] = replace(account, **given)

    def remove_account(self, address: str) -> None:
        with self._lock:
            if self._accounts.pop(address, None) is None:
                raise KeyError(f"no account {address}")

    def account(self, address: str) -> PlainAccount | None:
        with self._lock:
            return self._accounts.get(address)

    def set_fee(self, lamports_per_signature: int, *, expired: bool = False) -> None:
        with self._lock:
            self.lamports_per_signature = lamports_per_signature
            self.blockhashes_expired = expired


def _encoded(raw: bytes, encoding: Any) -> Any:
    if encoding == "base64":
        return [base64.b64encode(raw).decode(), "base64"]
    if encoding == "base58":
        return [base58.b58encode(raw).decode(), "base58"]
    return base58.b58encode(raw).decode()  # binary, the legacy default


def plain_account_json(account: PlainAccount, encoding: Any) -> dict[str, Any]:
    return {
        "data": _encoded(account.data, encoding),
        "executable": account.executable,
        "lamports": account.lamports,
        "owner": account.owner,
        "rentEpoch": 2**64 - 1,
        "space": len(account.data),
    }


# -- the methods (one line each in ``RpcMethods``' table) --------------------------------------


class _BookKeeper(Protocol):
    @property
    def accounts(self) -> AccountBook: ...

    @property
    def lock(self) -> threading.RLock: ...

    def vote_account(self, vote_pubkey: str) -> PlainAccount | None: ...


class MethodsContext(Protocol):
    """What the two methods ask of ``watcher.simulator.methods.RpcMethods``."""

    @property
    def ledger(self) -> _BookKeeper: ...

    def context(self) -> dict[str, Any]: ...

    def check_min_context_slot(self, config: dict[str, Any]) -> None: ...

    def account_json(self, address: str, encoding: Any) -> dict[str, Any] | None: ...


def get_multiple_accounts(methods: MethodsContext, params: list[Any]) -> Any:
    """One element per key: a plain account, a mint or token account, or null."""
    keys = params[0] if params else None
    if not isinstance(keys, list):
        raise invalid_params("Invalid params: invalid type: expected a sequence of pubkeys")
    if len(keys) > MAX_MULTIPLE_ACCOUNTS:
        raise invalid_params(f"Too many inputs provided; max {MAX_MULTIPLE_ACCOUNTS}")
    for key in keys:
        problem = pubkey_problem(key)
        if problem is not None:
            raise invalid_params(f"Invalid param: {problem}")
    config = _config(params, 1)
    methods.check_min_context_slot(config)
    encoding = config.get("encoding", "binary")
    if encoding not in ("base64", "base58", "binary", "jsonParsed"):
        raise invalid_params(f"Invalid params: unknown variant `{encoding}`")
    # Under the ledger's lock: every account as of the answer's slot (a transfer shows whole).
    with methods.ledger.lock:
        value = [_any_account_json(methods, key, encoding) for key in keys]
        return {"context": methods.context(), "value": value}


def _any_account_json(methods: MethodsContext, key: str, encoding: Any) -> dict[str, Any] | None:
    """A plain account, a mint or token account, a program's account, or None."""
    plain = methods.ledger.accounts.account(key) or methods.ledger.vote_account(key)
    if plain is None:
        return methods.account_json(key, encoding)
    # No parser for a plain account's data: base64, as a node does.
    shown = "base64" if encoding == "jsonParsed" else encoding
    return plain_account_json(plain, shown)


def get_account_info(methods: MethodsContext, params: list[Any]) -> Any:
    """One account (as getMultipleAccounts shows it) or null."""
    address = _pubkey(params)
    config = _config(params, 1)
    methods.check_min_context_slot(config)
    encoding = config.get("encoding", "binary")
    if encoding not in ("base64", "base58", "binary", "jsonParsed"):
        raise invalid_params(f"Invalid params: unknown variant `{encoding}`")
    with methods.ledger.lock:
        value = _any_account_json(methods, address, encoding)
        return {"context": methods.context(), "value": value}


def get_fee_for_message(methods: MethodsContext, params: list[Any]) -> Any:
    message = params[0] if params else None
    if not isinstance(message, str):
        raise invalid_params("Invalid params: invalid type: expected a base64 message")
    config = _config(params, 1)
    methods.check_min_context_slot(config)
    try:
        raw = base64.b64decode(message, validate=True)
    except (binascii.Error, ValueError):
        raise invalid_params("Invalid param: invalid base64 message") from None
    signatures = required_signatures(raw)
    if signatures is None:
        raise invalid_params("Invalid param: failed to deserialize message")
    book = methods.ledger.accounts
    fee = None if book.blockhashes_expired else signatures * book.lamports_per_signature
    return {"context": methods.context(), "value": fee}


def required_signatures(raw: bytes) -> int | None:
    """A message's number of required signatures, or None when it does not parse (header,
    account keys, recent blockhash)."""
    at = 1 if raw and raw[0] & 0x80 else 0  # a versioned message's prefix
    if len(raw) < at + 3:
        return None
    signatures = raw[at]
    at += 3
    count, shift = 0, 0
    while at < len(raw) and shift <= 14:
        byte = raw[at]
        at += 1
        count |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    else:
        return None
    if signatures == 0 or count < signatures or len(raw) < at + 32 * count + 32:
        return None
    return signatures


def sample_message(signers: int = 1, keys: int = 2, blockhash: bytes = bytes(range(32))) -> str:
    """A legacy message (no instructions), base64: for examples and tests."""
    header = bytes([signers, 0, 0, keys])
    body = b"".join(bytes([index + 1]) * 32 for index in range(keys)) + blockhash
    return base64.b64encode(header + body + bytes([0])).decode()
