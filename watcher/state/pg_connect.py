"""What ``watcher check`` and ``run`` ask a PostgreSQL ``state_url`` before anything else: can
this watcher log in, and is the schema one it knows? ``check_database`` connects once and
answers with a ``SchemaReport``, or raises ``StateUnusable`` whose text is one line naming the
masked URL and the problem in plain words (a refused login, a missing database, an unreachable
server, a schema from a newer watcher), never a driver's multi-line text or the password."""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass

import psycopg
from psycopg.conninfo import conninfo_to_dict

from watcher.config.state_url import masked_url, url_secrets
from watcher.core.errors import StateUnusable
from watcher.core.redact import REDACTOR
from watcher.state.database import SchemaTooNewError
from watcher.state.postgresql_schema import migrations, schema_version

DEFAULT_PORT = "5432"


@dataclass(frozen=True)
class SchemaReport:
    """``version``: the database's schema version (0: no watcher has set it up yet);
    ``latest``: the newest this watcher knows; ``server_version``: e.g. ``16.4``."""

    version: int
    latest: int
    server_version: str

    def describe(self) -> str:
        """``schema version 3 of 3``, saying what the next start does when it is behind."""
        text = f"schema version {self.version} of {self.latest}"
        if self.version == 0:
            return f"{text}: created at the first start"
        if self.version < self.latest:
            return f"{text}: upgraded at the next start"
        return text


# timeout: libpq's connect_timeout needs the number, not just a deadline around the call.
async def check_database(url: str, *, timeout: float = 10.0) -> SchemaReport:  # noqa: ASYNC109
    """Connect to ``url`` once (within ``timeout`` seconds) and read its schema version.
    Changes nothing. Raises ``StateUnusable`` (``SchemaTooNewError`` for a newer schema)."""
    REDACTOR.add(*url_secrets(url))  # also when called with a URL no settings registered
    masked = masked_url(url)
    latest = len(migrations())
    try:
        # libpq's connect_timeout is whole seconds, per host tried; the outer limit also
        # covers resolving the host name.
        async with asyncio.timeout(timeout + 2):
            conn = await psycopg.AsyncConnection.connect(
                url, connect_timeout=max(1, math.ceil(timeout)), autocommit=True
            )
            async with conn:
                version = await schema_version(conn)
                server = _server_version(conn.info.server_version)
    except TimeoutError:
        raise StateUnusable(f"{masked}: {_target(url)}: timed out") from None
    except psycopg.Error as exc:
        raise StateUnusable(f"{masked}: {connect_problem(exc, url)}") from None
    if version > latest:
        raise SchemaTooNewError(
            f"{masked}: schema version {version} is newer than this watcher knows ({latest}): "
            "upgrade the watcher"
        )
    return SchemaReport(version, latest, server)


def check_database_sync(url: str, *, timeout: float = 10.0) -> SchemaReport:
    """``check_database`` for the command line (no event loop running)."""
    return asyncio.run(check_database(url, timeout=timeout))


def _server_version(number: int) -> str:
    # libpq's number: 160004 is 16.4 (10 and later), 90624 is 9.6.24.
    if number >= 100000:
        return f"{number // 10000}.{number % 10000}"
    return f"{number // 10000}.{number // 100 % 100}.{number % 100}"


def _target(url: str) -> str:
    """``cannot connect to HOST:PORT`` as the URL names it (libpq's defaults filled in)."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        params = {}
    host = str(params.get("host") or "localhost")
    port = str(params.get("port") or DEFAULT_PORT)
    if host.startswith("/"):
        return f"cannot connect to the socket in {host} (port {port})"
    return f"cannot connect to {host}:{port}"


_QUOTED = re.compile(r'"([^"]*)"')


def _unquoted(text: str) -> str:
    return _QUOTED.sub(r"\1", text)


def connect_problem(exc: psycopg.Error, url: str) -> str:
    """What ``exc``, raised while connecting to ``url`` or reading its schema version, means to
    a user, in one line (without the URL)."""
    text = " ".join(str(exc).split())
    lower = text.lower()
    login = re.search(r"password authentication failed for user \"?([^\"\s]*)\"?", text, re.I)
    if login:
        return f"password authentication failed for user {login.group(1)}"
    missing = re.search(r"(database|role) \"([^\"]*)\" does not exist", text)
    if missing:
        what = "user" if missing.group(1) == "role" else "database"
        return f"no such {what}: {missing.group(2)}"
    if "no password supplied" in lower:
        return "the server asks for a password and none was given (in the URL or PGPASSWORD)"
    hba = re.search(r"no pg_hba\.conf entry for [^,]*(,.*)?$", text)
    if hba:
        return f"the server refuses this login (pg_hba.conf): {_unquoted(hba.group(0))}"
    if "connection refused" in lower:
        return f"{_target(url)}: connection refused"
    if "timeout expired" in lower or "timed out" in lower:
        return f"{_target(url)}: timed out"
    if "failed to resolve host" in lower or "could not translate host name" in lower:
        return f"{_target(url)}: unknown host name"
    if "no such file or directory" in lower:
        return f"{_target(url)}: no server listens there"
    if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
        # Some other refusal before the login: the last part is the server's reason.
        reason = text.rsplit(" failed: ", 1)[-1].removeprefix("FATAL: ").strip()
        return f"{_target(url)}: {_unquoted(reason)}"
    return f"cannot read the schema version: {_unquoted(text)}"
