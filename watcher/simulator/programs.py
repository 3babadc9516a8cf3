"""The simulator's program accounts: getProgramAccounts with filters, encodings and dataSlice.

``[program, config]``; config: commitment, encoding (``base64``, ``base58``, ``binary``;
``jsonParsed`` answers base64 for the programs it cannot parse, as a node does), dataSlice
``{offset, length}``, filters (at most 4: ``{dataSize: N}`` or ``{memcmp: {offset, bytes}}``,
bytes in base58), withContext (``{context, value}``).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from typing import Any, Final

import base58

from watcher.simulator.params import (
    _checked_pubkey,
    _config,
    _positional,
    invalid_params,
)

MAX_FILTERS: Final = 4
RENT_PER_BYTE: Final = 6960  # lamports per byte-year, twice: rent exemption
_BASE_LAMPORTS: Final = 890_880


class ProgramAccounts:
    def __init__(self, context: Callable[[], dict[str, Any]]) -> None:
        self._lock = threading.RLock()
        self._context = context
        self._accounts: dict[str, dict[str, bytes]] = {}  # program -> pubkey -> data

    def set_program_account(self, program: str, account: str, data: bytes) -> None:
        with self._lock:
            for other, accounts in self._accounts.items():
                if other != program and account in accounts:
                    raise ValueError(f"account {account} is owned by program {other}")
            self._accounts.setdefault(program, {})[account] = data

    def close_program_account(self, program: str, account: str) -> None:
        with self._lock:
            if self._accounts.get(program, {}).pop(account, None) is None:
                raise KeyError(f"no account {account} under program {program}")

    def data_of(self, program: str, account: str) -> bytes | None:
        with self._lock:
            return self._accounts.get(program, {}).get(account)

    def account_json(self, account: str, encoding: str) -> dict[str, Any] | None:
        """A program's account as getMultipleAccounts and getAccountInfo show it (None: no
        program holds it): a program account is an account like any other."""
        with self._lock:
            held = [
                (program, accounts[account])
                for program, accounts in self._accounts.items()
                if account in accounts
            ]
        if not held:
            return None
        program, data = held[0]
        shown = "base64" if encoding == "jsonParsed" else encoding
        return _account(program, data, data, shown)

    def get_program_accounts(self, params: list[Any]) -> Any:
        program = _checked_pubkey(_positional(params, 0, required=True))
        config = _config(params, 1)
        encoding = config.get("encoding", "binary")
        if encoding not in ("base64", "base58", "binary", "jsonParsed"):
            raise invalid_params(f"Invalid params: unknown variant `{encoding}`")
        offset, length = _slice(config.get("dataSlice"))
        filters = config.get("filters") or []
        if not isinstance(filters, list):
            raise invalid_params("Invalid params: filters must be a list")
        if len(filters) > MAX_FILTERS:
            raise invalid_params(f"Too many filters provided; max {MAX_FILTERS}")
        checks = [_filter(item) for item in filters]
        with self._lock:
            accounts = sorted(self._accounts.get(program, {}).items())
        value = []
        for pubkey, data in accounts:
            if all(check(data) for check in checks):
                shown = data[offset : offset + length] if length is not None else data
                account = _account(program, data, shown, encoding)
                value.append({"pubkey": pubkey, "account": account})
        if config.get("withContext"):
            return {"context": self._context(), "value": value}
        return value

    def handlers(self) -> dict[str, Callable[[list[Any]], Any]]:
        return {"getProgramAccounts": self.get_program_accounts}


def _slice(value: Any) -> tuple[int, int | None]:
    if value is None:
        return 0, None
    if not isinstance(value, dict) or not all(
        isinstance(value.get(key), int) and value[key] >= 0 for key in ("offset", "length")
    ):
        raise invalid_params("Invalid params: dataSlice needs offset and length (u64)")
    return int(value["offset"]), int(value["length"])


def _filter(item: Any) -> Callable[[bytes], bool]:
    if isinstance(item, dict) and set(item) == {"dataSize"}:
        size = item["dataSize"]
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise invalid_params("Invalid params: dataSize must be a u64")
        return lambda data: len(data) == size
    if isinstance(item, dict) and set(item) == {"memcmp"} and isinstance(item["memcmp"], dict):
        memcmp = item["memcmp"]
        offset, text = memcmp.get("offset"), memcmp.get("bytes")
        if not isinstance(offset, int) or offset < 0 or not isinstance(text, str):
            raise invalid_params("Invalid params: memcmp needs offset (u64) and bytes")
        if memcmp.get("encoding", "base58") != "base58":
            raise invalid_params("Invalid params: the simulator takes memcmp bytes in base58")
        try:
            wanted = base58.b58decode(text)
        except ValueError:
            raise invalid_params("Invalid params: memcmp bytes are not base58") from None
        return lambda data: data[offset : offset + len(wanted)] == wanted
    raise invalid_params(f"Invalid params: unknown filter {item!r}")


def _account(program: str, data: bytes, shown: bytes, encoding: str) -> dict[str, Any]:
    if encoding == "base58":
        encoded: Any = [base58.b58encode(shown).decode(), "base58"]
    elif encoding == "binary":
        encoded = base58.b58encode(shown).decode()
    else:
        encoded = [base64.b64encode(shown).decode(), "base64"]
    return {
        "data": encoded,
        "executable": False,
        "lamports": _BASE_LAMPORTS + RENT_PER_BYTE * len(data),
        "owner": program,
        "rentEpoch": 2**64 - 1,
        "space": len(data),
    }
