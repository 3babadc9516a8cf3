"""The calls a simulator received, for tests to read and wait on (thread-safe: the server's
threads add while a test waits)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RecordedRequest:
    """One JSON-RPC call the server received (a batch of N records N calls)."""

    method: str  # "" when the body was not a readable call
    params: Any
    path_ok: bool  # False when the key in the path was wrong or missing
    at: float  # unix seconds
    batch_size: int = 1  # calls in the HTTP request that carried this call


class RequestLog:
    def __init__(self) -> None:
        self._items: list[RecordedRequest] = []
        self._changed = threading.Condition()

    def add(self, items: list[RecordedRequest]) -> None:
        with self._changed:
            self._items.extend(items)
            self._changed.notify_all()

    def snapshot(self) -> list[RecordedRequest]:
        with self._changed:
            return list(self._items)

    def count(self, method: str | None = None) -> int:
        with self._changed:
            return sum(1 for item in self._items if method is None or item.method == method)

    def clear(self) -> None:
        with self._changed:
            self._items.clear()

    def wait_for(self, method: str | None, count: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(
                lambda: (
                    sum(1 for i in self._items if method is None or i.method == method) >= count
                ),
                timeout,
            )
