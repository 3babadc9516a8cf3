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

# Path segments shown as they are: a version prefix (v1, v2, v3 ...) and these well-known route
# names. Every other segment of an RPC URL's path is taken for a secret, whatever its length or
# place (``https://host/KEY/solana`` -> ``https://host/***/solana``).
_VERSION_SEGMENT = re.compile(r"v\d+")
PUBLIC_SEGMENTS = frozenset(
    {"api", "rpc", "jsonrpc", "http", "solana", "mainnet", "mainnet-beta", "devnet", "testnet"}
)

# A secret this long is masked wherever it appears. A shorter one could be an ordinary word
# (``abc``, ``main``): it is masked only as a whole token right after ``/``, ``=``, ``:`` or ``@``,
# that is where a URL puts it (a path segment, a query value, userinfo).
SHORT_SECRET = 8
_TOKEN_CHAR = r"[A-Za-z0-9_.~-]"


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
        alternatives = [
            re.escape(secret)
            if len(secret) >= SHORT_SECRET
            else rf"(?<=[/=:@]){re.escape(secret)}(?!{_TOKEN_CHAR})"
            for secret in ordered
        ]
        self._pattern = re.compile("|".join(alternatives)) if ordered else None

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

    Secret parts: every path segment after a version segment (``https://host/v3/KEY`` ->
    ``https://host/v3/***``); without a version segment, every path segment but the well-known
    route names of ``PUBLIC_SEGMENTS`` (``https://host/KEY/solana`` -> ``https://host/***/solana``);
    the user name and password of a userinfo; every query value; a fragment.
    """
    parts = urlsplit(url)
    secrets: list[str] = []

    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        secrets += [s for s in (user, password) if s]
        netloc = f"{MASK if user else ''}{colon}{MASK if password else ''}@{hostport}"

    path, path_secrets = _split_path(parts.path)
    secrets += path_secrets

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


def _split_path(path: str) -> tuple[str, list[str]]:
    """(path to show, the secret segments of the path)."""
    segments = path.split("/")
    versions = [i for i, segment in enumerate(segments) if _VERSION_SEGMENT.fullmatch(segment)]
    shown_until = versions[0] if versions else -1
    secrets: list[str] = []
    shown: list[str] = []
    for index, segment in enumerate(segments):
        public = index <= shown_until or (shown_until < 0 and segment.lower() in PUBLIC_SEGMENTS)
        if segment and not public:
            secrets.append(segment)
            segment = MASK
        shown.append(segment)
    return "/".join(shown), secrets
