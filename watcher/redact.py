"""Keeping secrets (the RPC API key first of all) out of everything a person can read.

``split_rpc_url`` tells which parts of an RPC URL are secret and gives the form to show;
``REDACTOR`` is the one process-wide registry of secrets that logs, errors and the RPC client
pass their text through.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import quote, unquote, urlsplit, urlunsplit

MASK = "***"

# A single path segment is taken for a key only when it is long enough to be one: short ones
# such as `/solana` or `/rpc` name a route, and masking them would mangle every log line.
_MIN_LONE_SEGMENT_KEY = 16
_VERSION_SEGMENT = re.compile(r"v\d+")


class Redactor:
    """A set of secrets; ``redact`` replaces each occurrence of any of them with ``***``."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, *secrets: str) -> None:
        """Register secrets (empty strings are ignored). Their URL-quoted and unquoted forms too,
        since a URL may show a key either way."""
        for secret in secrets:
            for form in (secret, quote(secret, safe=""), unquote(secret)):
                if form:
                    self._secrets.add(form)
        # Longest first, so a secret that contains another is masked whole.
        ordered = sorted(self._secrets, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def redact(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)

    def __contains__(self, secret: object) -> bool:
        return secret in self._secrets

    def __len__(self) -> int:
        return len(self._secrets)


# The process-wide registry: the RPC client adds its key here, logs and errors read from it.
REDACTOR = Redactor()


class SplitUrl(NamedTuple):
    public_url: str  # safe to show: every secret part replaced by ***
    secrets: tuple[str, ...]  # the secret parts, as they appear in the URL


def split_rpc_url(url: str) -> SplitUrl:
    """Split an RPC URL into the form to show and its secret parts.

    Secret parts: everything after a version segment (``https://host/v3/KEY`` ->
    ``https://host/v3/***``); otherwise the last path segment when the path has two or more
    segments, or one long (>= 16 characters) segment; the user name and password of a userinfo;
    every query value; a fragment.
    """
    parts = urlsplit(url)
    secrets: list[str] = []

    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        secrets += [s for s in (user, password) if s]
        netloc = f"{MASK if user else ''}{colon}{MASK if password else ''}@{hostport}"

    path, path_secret = _split_path(parts.path)
    if path_secret:
        secrets.append(path_secret)

    query_fields = []
    for field in parts.query.split("&") if parts.query else []:
        name, eq, value = field.partition("=")
        if eq and value:
            secrets.append(value)
            value = MASK
        query_fields.append(f"{name}{eq}{value}")

    fragment = parts.fragment
    if fragment:
        secrets.append(fragment)
        fragment = MASK

    public = urlunsplit((parts.scheme, netloc, path, "&".join(query_fields), fragment))
    return SplitUrl(public, tuple(secrets))


def _split_path(path: str) -> tuple[str, str | None]:
    """(path to show, secret part of the path or None)."""
    segments = path.split("/")
    for index, segment in enumerate(segments):
        if _VERSION_SEGMENT.fullmatch(segment):
            rest = "/".join(segments[index + 1 :])
            key = rest.rstrip("/")
            if key:
                shown = "/".join([*segments[: index + 1], MASK]) + rest[len(key) :]
                return shown, key
    filled = [i for i, segment in enumerate(segments) if segment]
    if not filled:
        return path, None
    last = filled[-1]
    if len(filled) >= 2 or len(segments[last]) >= _MIN_LONE_SEGMENT_KEY:
        key = segments[last]
        return "/".join([*segments[:last], MASK, *segments[last + 1 :]]), key
    return path, None
