"""Health of the RPC endpoint as seen by the pollers: consecutive failed rounds per source.

A round fails when every target of it failed. This is the seam for the built-in
``rpc_unhealthy`` alert, /healthz and /metrics; for now it feeds the logs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import structlog

from watcher.errors import RpcError

log = structlog.get_logger(__name__)


@dataclass
class RoundHealth:
    consecutive_failed_rounds: Counter[str] = field(default_factory=Counter)
    _failed_this_round: Counter[str] = field(default_factory=Counter)
    _ok_this_round: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None

    def failed(self, source: str, target: str, error: RpcError) -> None:
        self._failed_this_round[source] += 1
        self.last_error = f"{type(error).__name__}: {error}"
        log.warning(
            "poll failed; nothing concluded from it",
            source=source,
            target=target,
            error=type(error).__name__,
            detail=str(error),
            transient=error.transient,
        )

    def succeeded(self, source: str, target: str) -> None:
        self._ok_this_round[source] += 1

    def round_done(self, source: str) -> None:
        failed, ok = self._failed_this_round.pop(source, 0), self._ok_this_round.pop(source, 0)
        if failed and not ok:
            self.consecutive_failed_rounds[source] += 1
            log.warning(
                "round failed",
                source=source,
                consecutive=self.consecutive_failed_rounds[source],
            )
        elif ok and self.consecutive_failed_rounds.pop(source, 0):
            log.info("endpoint answering again", source=source)
