"""Every error the daemon raises on purpose.

```
WatcherError
 ├─ ConfigError                    settings or rule files are invalid; .problems: list[Problem]
 └─ RpcError                       .transient .method .code .attempts; text never holds the key
     ├─ TransientRpcError          retried with backoff; a failed round, never evidence
     │   ├─ RpcTimeout             connect/read timeout, connection refused/reset
     │   ├─ RateLimited            HTTP 429 or JSON-RPC code 429; .retry_after
     │   ├─ ServerError            HTTP 5xx (HTML bodies from proxies too); .status
     │   ├─ BadResponse            non-JSON body, wrong envelope, result not fitting its model,
     │   │   │                     id mismatch
     │   │   └─ DoubtfulAnswer     fits its model but not what came before: stale, or a picture
     │   │                         turned upside down (``watcher.plausibility``)
     │   └─ NodeUnhealthy          JSON-RPC -32005 (node behind; .slots_behind), -32004, -32007,
     │                             -32009, -32014, -32016
     └─ PermanentRpcError          not retried
         ├─ InvalidRequest         JSON-RPC -32600/-32601/-32602, -32010 and every other code;
         │                         .rpc_message
         └─ HttpClientError        HTTP 4xx other than 429 (401/403 bad key, 413 too large) and
                                   any other non-2xx status that is not 5xx; .status
```

When retries are used up the client raises the last transient error itself (so callers still see
e.g. ``RateLimited``), with ``.attempts`` telling how many requests were made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from watcher.redact import REDACTOR


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
    evidence (``watcher.plausibility``). Raised by no client: the daemon records it as the
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
