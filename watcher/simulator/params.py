"""Reading a JSON-RPC call's parameters as a node does, with its messages: ``RpcError`` and
the checks that every method module of the simulator shares (``methods``, ``accounts``,
``assets``, ``das``, ``editions``, ``programs``)."""

from __future__ import annotations

from typing import Any, Final

from watcher.simulator.keys import pubkey_problem, signature_problem

_COMMITMENTS: Final = frozenset({"processed", "confirmed", "finalized"})


class RpcError(Exception):
    """A JSON-RPC error object: code, message and optional data."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def invalid_params(message: str) -> RpcError:
    return RpcError(-32602, message)


def _positional(params: list[Any], index: int, *, required: bool) -> Any:
    if index < len(params):
        return params[index]
    if required:
        raise invalid_params(f"Invalid params: expected at least {index + 1} argument(s)")
    return None


def _pubkey(params: list[Any], index: int = 0) -> str:
    value = _positional(params, index, required=True)
    return _checked_pubkey(value)


def _checked_pubkey(value: Any) -> str:
    problem = pubkey_problem(value)
    if problem is not None:
        raise invalid_params(f"Invalid param: {problem}")
    return str(value)


def _signature(value: Any) -> str | None:
    if value is None:
        return None
    problem = signature_problem(value)
    if problem is not None:
        raise invalid_params(f"Invalid param: {problem}")
    return str(value)


def _config(params: list[Any], index: int) -> dict[str, Any]:
    value = _positional(params, index, required=False)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_params("Invalid params: invalid type: expected a config object")
    commitment = value.get("commitment")
    if commitment is not None and commitment not in _COMMITMENTS:
        raise invalid_params(f"Invalid params: unknown variant `{commitment}`")
    return value


def _int_option(config: dict[str, Any], name: str) -> int | None:
    value = config.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise invalid_params(f"Invalid params: invalid type for `{name}`: expected u64")
    return value
