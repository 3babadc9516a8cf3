"""Every error the daemon raises on purpose (which ones are worth retrying: ``.transient``), and
the pauses of a loop that retries until it works (``RetryPauses``).

```
WatcherError
 ├─ ConfigError                    settings or rule files are invalid; .problems: list[Problem]
 ├─ DaemonFailed                   `watcher run` cannot go on (a task died, the database is down
 │                                 too long or for good): exit non-zero for the supervisor
 ├─ StateError                     the state database failed; .transient .operation
 │   ├─ TransientStateError        locked/busy past the busy timeout, disk full, I/O error, out of
 │   │                             memory: the operation rolled back; retried with backoff, logged
 │   │                             once per failing stretch, shown in health (``StateHealth``)
 │   ├─ PermanentStateError        corrupt file, not a database, read-only file or folder, schema
 │   │   │                         or constraint errors, a bug: retrying cannot help; the daemon
 │   │   │                         logs one line and exits non-zero for its supervisor
 │   │   └─ StateUnusable          found when opening: the path is a folder or under a file, not a
 │   │                             database, truncated, from a newer watcher; every command says
 │   │                             so in one line naming the path
 │   └─ LeaseLost                  a fenced write found its shard's lease gone (expired, taken
 │                                 over: another owner or epoch); .shard .owner .epoch; it rolled
 │                                 back and wrote nothing: the instance drops the shard
 └─ RpcError                       .transient .method .code .attempts; text never holds the key
     ├─ TransientRpcError          retried with backoff; a failed round, never evidence
     │   ├─ RpcTimeout             connect/read timeout, connection refused/reset
     │   ├─ RateLimited            HTTP 429 or JSON-RPC code 429; .retry_after
     │   ├─ ServerError            HTTP 5xx (HTML bodies from proxies too); .status
     │   ├─ BadResponse            non-JSON body, wrong envelope, result not fitting its model,
     │   │   │                     id mismatch
     │   │   └─ DoubtfulAnswer     fits its model but not what came before: stale, or a picture
     │   │                         turned upside down (``watcher.ledger.plausibility``)
     │   └─ NodeUnhealthy          JSON-RPC -32005 (node behind; .slots_behind), -32004, -32007,
     │                             -32009, -32014, -32016
     └─ PermanentRpcError          not retried
         ├─ InvalidRequest         JSON-RPC -32600/-32601/-32602, -32010 and every other code;
         │                         .rpc_message
         └─ HttpClientError        HTTP 4xx other than 429 (401/403 bad key, 413 too large) and
                                   any other non-2xx status that is not 5xx; .status
```

``StateError`` is what the store raises (``watcher.state.interface``): each engine maps its
driver's errors at its boundary (``watcher.state.database``, ``watcher.state.pg_errors``),
so that callers catch ``StateError`` alone, whatever the engine; a caller names what it was
doing with ``StateError.during``. A stretch of transient state errors longer than
``health.database_down_for`` is fatal too.

When retries are used up the client raises the last transient error itself (so callers still see
e.g. ``RateLimited``), with ``.attempts`` telling how many requests were made.

``RetryPauses`` are the pauses of a loop that retries until it works: ``first`` seconds, then
twice the last, at most ``longest``; a success starts them over (``reset``). Not for RPC calls,
whose rounds of attempts and jittered backoff are ``watcher.ledger.retrying``'s, nor for a
delivery's next try, kept in the outbox (``watcher.delivery.outbox``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import ClassVar

from watcher.core.redact import REDACTOR


class WatcherError(Exception):
    """Base of the errors the daemon raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a settings or rule file, located for the user."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message}"


class ConfigError(WatcherError):
    """Settings or rules that cannot be used; ``str()`` has one ``FILE:LINE: message`` a line."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(map(str, self.problems)))


class DaemonFailed(WatcherError):
    """The daemon stopped because it cannot go on; ``str()`` says why (already logged)."""


class StateError(WatcherError):
    """The state database failed; ``operation`` says what the daemon was doing."""

    transient: ClassVar[bool] = False

    def __init__(self, message: str, *, operation: str) -> None:
        self.message = REDACTOR.redact(message)
        self.operation = operation
        super().__init__(f"{operation}: {self.message}")

    def during(self, operation: str) -> StateError:
        """The same error, told as a failure of the caller's ``operation`` (what the daemon
        was doing: "claim deliveries") rather than of the store call that raised it."""
        if type(self) not in (TransientStateError, PermanentStateError):
            return self  # e.g. StateUnusable: its text is a line of its own
        error = type(self)(self.message, operation=operation)
        error.__cause__ = self.__cause__
        return error


class TransientStateError(StateError):
    """Locked or busy, disk full, I/O error: the transaction rolled back; try again later."""

    transient = True


class PermanentStateError(StateError):
    """Corrupt, read-only, schema or constraint error: trying again gets the same answer."""


class LeaseLost(StateError):
    """A fenced write (``watcher.state.pg_leases.fenced``) found that ``owner`` no longer holds
    ``shard`` at ``epoch``, unexpired: the lease lapsed or another instance took the shard over.
    The transaction rolled back before writing anything; retrying cannot help (the epoch is
    gone for good): the instance drops the shard and may take it again later, at a new epoch."""

    def __init__(self, *, shard: int, owner: str, epoch: int) -> None:
        super().__init__(
            f"shard {shard}: the lease of {owner} at epoch {epoch} is lost (expired or taken "
            "over); the write rolled back",
            operation="fenced write",
        )
        self.shard = shard
        self.owner = owner
        self.epoch = epoch


class RpcError(WatcherError):
    """A call to the ledger's RPC failed. Its text is redacted when built: it never holds a key."""

    transient: ClassVar[bool] = False

    def __init__(self, message: str, *, method: str | None = None, code: int | None = None) -> None:
        self.message = REDACTOR.redact(message)
        self.method = method
        self.code = code  # the JSON-RPC error code, when the error came as one
        self.attempts = 1  # requests made before giving up; set by the client
        super().__init__(self.message)

    def __str__(self) -> str:
        return f"{self.method}: {self.message}" if self.method else self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class TransientRpcError(RpcError):
    """Worth retrying; if retries run out, the round failed (never evidence for a rule)."""

    transient = True


class RpcTimeout(TransientRpcError):
    """Connect or read timeout, connection refused or reset."""


class RateLimited(TransientRpcError):
    def __init__(
        self,
        message: str,
        *,
        method: str | None = None,
        code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, method=method, code=code)
        self.retry_after = retry_after  # seconds from the Retry-After header, when given


class ServerError(TransientRpcError):
    def __init__(self, message: str, *, method: str | None = None, status: int) -> None:
        super().__init__(message, method=method)
        self.status = status


class BadResponse(TransientRpcError):
    """An answer that is not a JSON-RPC answer to our request, or does not fit its model."""


class DoubtfulAnswer(BadResponse):
    """An answer that fits its model but is stale or implausible against what came before; not
    evidence (``watcher.ledger.plausibility``). Raised by no client: the daemon records it as the
    failure of the poll."""


class NodeUnhealthy(TransientRpcError):
    def __init__(
        self,
        message: str,
        *,
        method: str | None = None,
        code: int,
        slots_behind: int | None = None,
    ) -> None:
        super().__init__(message, method=method, code=code)
        self.slots_behind = slots_behind  # from data.numSlotsBehind of -32005


class PermanentRpcError(RpcError):
    """Retrying would get the same answer."""


class InvalidRequest(PermanentRpcError):
    def __init__(
        self,
        message: str,
        *,
        method: str | None = None,
        code: int | None = None,
        rpc_message: str | None = None,
    ) -> None:
        super().__init__(message, method=method, code=code)
        self.rpc_message = None if rpc_message is None else REDACTOR.redact(rpc_message)


class HttpClientError(PermanentRpcError):
    def __init__(self, message: str, *, method: str | None = None, status: int) -> None:
        super().__init__(message, method=method)
        self.status = status


class StateUnusable(PermanentStateError):
    """The state database cannot be used at all (a folder, not a database, corrupted, read-only,
    from a newer watcher ...). Its text is one line for the user, naming the path."""

    def __init__(self, message: str) -> None:
        super().__init__(message, operation="open the state database")
        self.args = (self.message,)  # str(): the line naming the path, nothing more


@dataclass
class RetryPauses:
    """The pauses between the tries of a loop that retries until it works."""

    first: float
    longest: float
    _next: float = field(init=False)

    def __post_init__(self) -> None:
        self._next = self.first

    def next(self) -> float:
        """The pause before the next try (each one twice the last, at most ``longest``)."""
        pause = self._next
        self._next = min(pause * 2, self.longest)
        return pause

    async def sleep(self) -> None:
        await asyncio.sleep(self.next())

    def reset(self) -> None:
        """A try worked: the next failure pauses ``first`` again."""
        self._next = self.first
