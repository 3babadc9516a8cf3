"""Where a channel that watcher posts to itself sends (``alertmanager://``, ``webhook://``):
the HTTP URL without credentials, and the basic-auth credentials kept apart, out of ``repr``,
so that neither the URL posted to nor an error about it carries the password."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

import httpx

from watcher.delivery.notifier import ACCEPTED, Outcome, refused


@dataclass(frozen=True)
class PostEndpoint:
    """The URL posted to (no credentials in it) and the basic-auth credentials."""

    url: str
    auth: tuple[str, str] | None = field(default=None, repr=False)

    def headers(self) -> dict[str, str]:
        if self.auth is None:
            return {}
        token = base64.b64encode(f"{self.auth[0]}:{self.auth[1]}".encode()).decode("ascii")
        return {"Authorization": f"Basic {token}"}

    def post(
        self,
        content: Any,
        words: PostWords,
        *,
        headers: dict[str, str] | None = None,
        client: httpx.Client | None = None,
        timeout: float,
    ) -> Outcome:
        """``content`` posted as JSON (through ``client``, else a client of its own): accepted
        on a 2xx; a 4xx but 408 and 429 is final (sent again, it would be refused again); a
        timeout, an unreachable receiver, 408, 429 or a 5xx is retried. The error texts
        (``words``) name no URL and no credential."""
        sent = {**self.headers(), **(headers or {})}
        try:
            if client is None:
                with httpx.Client(timeout=timeout) as own:
                    answer = own.post(self.url, json=content, headers=sent)
            else:
                answer = client.post(self.url, json=content, headers=sent)
        except httpx.TimeoutException:
            return refused(f"{words.who} did not answer in time")
        except httpx.HTTPError as exc:
            return refused(f"{words.unreachable} ({type(exc).__name__})")
        if answer.is_success:
            return ACCEPTED
        status = answer.status_code
        if 400 <= status < 500 and status not in (408, 429):
            return refused(f"{words.refusing}: HTTP {status}", final=True)
        return refused(f"{words.who} answered HTTP {status}")


@dataclass(frozen=True)
class PostWords:
    """How a channel's errors name its receiver (no URL: it may hold a credential)."""

    who: str  # "Alertmanager"
    unreachable: str  # "Alertmanager unreachable"
    refusing: str  # "Alertmanager refused the alerts"


def post_endpoint(
    url: str,
    schemes: Mapping[str, str],
    path: Callable[[SplitResult], str],
    *,
    query: bool,
) -> PostEndpoint | None:
    """The endpoint of ``url``, or None when its scheme is not one of ``schemes`` (each mapped
    to ``http`` or ``https``) or it cannot be read. ``path``: the path posted to, from the
    URL's parts; ``query``: whether a query string is kept (else the URL is refused)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    http = schemes.get(parts.scheme.lower())
    if http is None or not parts.hostname or parts.fragment or (parts.query and not query):
        return None
    host = parts.hostname
    if ":" in host:  # IPv6
        host = f"[{host}]"
    where = host if port is None else f"{host}:{port}"
    kept = f"?{parts.query}" if parts.query else ""
    auth = None
    if parts.username is not None:
        auth = (unquote(parts.username), unquote(parts.password or ""))
    return PostEndpoint(f"{http}://{where}{path(parts)}{kept}", auth)
