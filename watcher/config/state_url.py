"""``state_url``: the PostgreSQL database several instances share, as a libpq URL
(``postgresql://USER:PASSWORD@HOST[:PORT]/DATABASE``). It is a secret: its password is never
shown; ``masked_url`` is the form to show (user, host, port and database kept)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import SecretStr

from watcher.core.redact import MASK, REDACTOR

SCHEMES = ("postgresql", "postgres")


def postgres_url(value: SecretStr) -> SecretStr:
    """A ``postgresql://`` or ``postgres://`` URL; its secrets registered for scrubbing as soon
    as it is read, so that whatever later connects with it cannot leak it in a log line."""
    url = value.get_secret_value()
    try:
        scheme = urlsplit(url).scheme
    except ValueError:
        scheme = ""
    if scheme not in SCHEMES:
        raise ValueError(
            "must be a postgresql:// or postgres:// URL, e.g. "
            "postgresql://watcher:${PGPASSWORD}@db.example.com/watcher (its value is not shown)"
        )
    REDACTOR.add(*url_secrets(url))
    return value


def _sensitive(name: str) -> bool:
    # password=, sslpassword=: libpq's query parameters that hold a secret.
    return "password" in unquote(name).lower()


def url_secrets(url: str) -> tuple[str, ...]:
    """The parts of ``url`` never to show: its password, the value of a password query
    parameter, and the whole URL when it holds either (a URL without a secret is shown as it
    is: masking it whole would hide the very form ``masked_url`` gives)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return (url,)
    found = [] if masked_url(url) == url else [url]
    userinfo, at, _hostport = parts.netloc.rpartition("@")
    if at:
        _user, _colon, password = userinfo.partition(":")
        found.append(password)
    for field in parts.query.split("&") if parts.query else []:
        name, _eq, value = field.partition("=")
        if _sensitive(name):
            found.append(value)
    return tuple(secret for secret in found if secret)


def masked_url(url: str) -> str:
    """``postgresql://watcher:***@db.example.com/watcher``: user, hosts, port, database and
    query parameters kept; the password, and the value of a password parameter, masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK  # not a URL: nothing of it can be told safely
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        netloc = f"{user}{colon}{MASK if password else ''}@{hostport}"
    query = []
    for field in parts.query.split("&") if parts.query else []:
        name, eq, value = field.partition("=")
        query.append(f"{name}={MASK}" if _sensitive(name) else f"{name}{eq}{value}")
    return urlunsplit((parts.scheme, netloc, parts.path, "&".join(query), ""))
