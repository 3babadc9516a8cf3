"""A PostgreSQL ``state_url`` checked before use (``check_database``, ``watcher check`` and
``run``), on a real server: the schema version, and every way the database can refuse this
watcher told in one line naming the masked URL, never the password."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner, Result

from watcher.cli import app
from watcher.core.errors import StateUnusable
from watcher.state.database import SchemaTooNewError
from watcher.state.pg_connect import (
    SchemaReport,
    check_database,
    check_database_sync,
    connect_problem,
)
from watcher.state.postgresql_schema import migrate, migrations
from watcher.testing.postgres import Postgres

from support.settings_files import KEY, RULE, settings_file, write

LATEST = len(migrations())
PASSWORD = "pg-Pa55w0rd-n0t-t0-sh0w"
WRONG = "wr0ng-Pa55w0rd-n0t-t0-sh0w"


@pytest.fixture
def dbname(postgres: Postgres) -> Iterator[str]:
    """A new empty database's name."""
    with postgres.database() as conninfo:
        yield conninfo.rsplit("dbname=", 1)[1]


def conninfo(postgres: Postgres, dbname: str) -> str:
    return f"host={postgres.folder} port=5432 user=postgres dbname={dbname}"


def migrated(postgres: Postgres, dbname: str, *, version: int | None = None) -> None:
    """Set up the schema; ``version``: then record that (newer) version too."""

    async def setup() -> None:
        conn = await psycopg.AsyncConnection.connect(conninfo(postgres, dbname), autocommit=True)
        async with conn:
            await migrate(conn)
            if version is not None:
                await conn.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, 0)",
                    [version],
                )

    asyncio.run(setup())


@pytest.fixture
def password_role(postgres: Postgres) -> str:
    """A role that must log in with ``PASSWORD``: the test server trusts local connections,
    so a pg_hba.conf line for this role alone (the first that matches wins) asks it for one."""
    role = f"pw_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(PASSWORD)
            )
        )
        hba = postgres.data / "pg_hba.conf"
        hba.write_text(f"local all {role} scram-sha-256\n{hba.read_text()}")
        conn.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 10
    while True:  # the server reloads its pg_hba.conf a moment later
        try:
            psycopg.connect(f"host={postgres.folder} port=5432 user={role} dbname=postgres").close()
        except psycopg.OperationalError as exc:
            assert "password" in str(exc)
            return role
        assert time.monotonic() < deadline, "pg_hba.conf not reloaded"
        time.sleep(0.05)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- check_database --------------------------------------------------------------------------


def test_a_fresh_database_is_at_version_0(postgres: Postgres, dbname: str) -> None:
    report = check_database_sync(postgres.url(dbname))
    assert (report.version, report.latest) == (0, LATEST)
    assert report.server_version.split(".")[0].isdigit()
    assert report.describe() == f"schema version 0 of {LATEST}: created at the first start"


def test_a_migrated_database_is_at_the_latest_version(postgres: Postgres, dbname: str) -> None:
    migrated(postgres, dbname)
    report = asyncio.run(check_database(postgres.url(dbname), timeout=5))
    assert report == SchemaReport(LATEST, LATEST, report.server_version)
    assert report.describe() == f"schema version {LATEST} of {LATEST}"
    assert (
        SchemaReport(1, 3, "16.4").describe() == "schema version 1 of 3: upgraded at the next start"
    )


def test_a_newer_schema_is_refused(postgres: Postgres, dbname: str) -> None:
    migrated(postgres, dbname, version=LATEST + 4)
    url = postgres.url(dbname)
    with pytest.raises(SchemaTooNewError) as caught:
        check_database_sync(url)
    assert str(caught.value) == (
        f"{url}: schema version {LATEST + 4} is newer than this watcher knows ({LATEST}): "
        "upgrade the watcher"
    )


def test_a_missing_database(postgres: Postgres) -> None:
    url = postgres.url("no_such_db")
    with pytest.raises(StateUnusable) as caught:
        check_database_sync(url)
    assert str(caught.value) == f"{url}: no such database: no_such_db"


def test_a_wrong_password(postgres: Postgres, password_role: str) -> None:
    url = f"postgresql://{password_role}:{WRONG}@/postgres?host={postgres.folder}"
    with pytest.raises(StateUnusable) as caught:
        check_database_sync(url)
    assert str(caught.value) == (
        f"postgresql://{password_role}:***@/postgres?host={postgres.folder}: "
        f"password authentication failed for user {password_role}"
    )
    right = f"postgresql://{password_role}:{PASSWORD}@/postgres?host={postgres.folder}"
    assert check_database_sync(right).version == 0


def test_an_unreachable_server() -> None:
    port = closed_port()
    url = f"postgresql://watcher:{PASSWORD}@127.0.0.1:{port}/watcher"
    with pytest.raises(StateUnusable) as caught:
        check_database_sync(url, timeout=3)
    assert str(caught.value) == (
        f"postgresql://watcher:***@127.0.0.1:{port}/watcher: "
        f"cannot connect to 127.0.0.1:{port}: connection refused"
    )


URL = "postgresql://watcher:x@db.example.com/watcher"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: FATAL:  '
            'password authentication failed for user "watcher"',
            "password authentication failed for user watcher",
        ),
        (
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: FATAL:  '
            'role "watcher" does not exist',
            "no such user: watcher",
        ),
        (
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: FATAL:  '
            'no pg_hba.conf entry for host "10.0.0.9", user "watcher", database "watcher", '
            "no encryption",
            "the server refuses this login (pg_hba.conf): no pg_hba.conf entry for host "
            "10.0.0.9, user watcher, database watcher, no encryption",
        ),
        (
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: '
            "fe_sendauth: no password supplied",
            "the server asks for a password and none was given (in the URL or PGPASSWORD)",
        ),
        ("connection timeout expired", "cannot connect to db.example.com:5432: timed out"),
        (
            "failed to resolve host 'db.example.com': [Errno -2] Name or service not known",
            "cannot connect to db.example.com:5432: unknown host name",
        ),
        (
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: '
            "server closed the connection unexpectedly\n\tThis probably means ...",
            "cannot connect to db.example.com:5432: server closed the connection "
            "unexpectedly This probably means ...",
        ),
    ],
)
def test_what_a_refused_connection_says(text: str, said: str) -> None:
    assert connect_problem(psycopg.OperationalError(text), URL) == said


# -- watcher check and run -------------------------------------------------------------------

runner = CliRunner()
BASE = """rpc_url: "https://rpc.example.com/v3/${RPC_API_KEY}"
rules: [rules/]
channels:
  ops: ["json://127.0.0.1:8080/"]
"""


def config(tmp_path: Path, state_url: str) -> Path:
    (tmp_path / "rules").mkdir(exist_ok=True)
    write(tmp_path / "rules" / "a.yaml", RULE)
    return settings_file(tmp_path, f"{BASE}state_url: {state_url!r}\n")


def cli(*args: str, password: str = PASSWORD) -> Result:
    return runner.invoke(app, list(args), env={"RPC_API_KEY": KEY, "PGPASSWORD": password})


def test_check_says_which_database_and_its_version(
    tmp_path: Path, postgres: Postgres, password_role: str
) -> None:
    path = config(
        tmp_path, f"postgresql://{password_role}:${{PGPASSWORD}}@/postgres?host={postgres.folder}"
    )
    result = cli("check", "--config", str(path))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        f"{path}: OK (1 rules)",
        f"state: postgresql://{password_role}:***@/postgres?host={postgres.folder}, "
        f"schema version 0 of {LATEST}: created at the first start",
    ]
    assert PASSWORD not in result.output


def test_check_of_a_migrated_database(tmp_path: Path, postgres: Postgres, dbname: str) -> None:
    migrated(postgres, dbname)
    result = cli("check", "--config", str(config(tmp_path, postgres.url(dbname))))
    assert result.exit_code == 0, result.output
    assert f"state: {postgres.url(dbname)}, schema version {LATEST} of {LATEST}\n" in result.stdout


def test_check_with_a_wrong_password_is_one_line(
    tmp_path: Path, postgres: Postgres, password_role: str
) -> None:
    path = config(
        tmp_path, f"postgresql://{password_role}:${{PGPASSWORD}}@/postgres?host={postgres.folder}"
    )
    result = cli("check", "--config", str(path), password=WRONG)
    assert result.exit_code == 1
    assert result.stderr == (
        f"watcher: postgresql://{password_role}:***@/postgres?host={postgres.folder}: "
        f"password authentication failed for user {password_role}\n"
    )
    assert result.stdout == ""
    assert WRONG not in result.output


def test_check_and_run_refuse_a_newer_schema(
    tmp_path: Path, postgres: Postgres, dbname: str
) -> None:
    migrated(postgres, dbname, version=LATEST + 1)
    path = config(tmp_path, postgres.url(dbname))
    told = (
        f"{postgres.url(dbname)}: schema version {LATEST + 1} is newer than this watcher "
        f"knows ({LATEST}): upgrade the watcher\n"
    )
    checked = cli("check", "--config", str(path))
    assert (checked.exit_code, checked.stderr) == (1, f"watcher: {told}")
    ran = cli("run", "--config", str(path))
    assert (ran.exit_code, ran.stderr) == (1, f"watcher: refusing to start: {told}")


def test_run_with_an_unreachable_database_is_one_line(tmp_path: Path) -> None:
    port = closed_port()
    path = config(tmp_path, f"postgresql://watcher:${{PGPASSWORD}}@127.0.0.1:{port}/watcher")
    result = cli("run", "--config", str(path))
    assert result.exit_code == 1
    assert result.stderr == (
        f"watcher: refusing to start: postgresql://watcher:***@127.0.0.1:{port}/watcher: "
        f"cannot connect to 127.0.0.1:{port}: connection refused\n"
    )
    assert PASSWORD not in result.output
    assert not (tmp_path / "state").exists()  # no SQLite file, no lock beside it


def test_the_commands_work_on_a_shared_database(
    tmp_path: Path, postgres: Postgres, dbname: str
) -> None:
    path = str(config(tmp_path, postgres.url(dbname)))
    fresh = cli("silence", "list", "--config", path)
    assert fresh.exit_code == 1  # no watcher has set the database up yet
    assert "`watcher run` creates and upgrades it" in fresh.stderr
    migrated(postgres, dbname)
    added = cli(
        "silence",
        "add",
        "--rule",
        "treasury",
        "--for",
        "1h",
        "--comment",
        "upgrade",
        "--config",
        path,
    )
    assert added.exit_code == 0, added.output
    assert added.stdout.startswith("silence 1: treasury (every subject) silenced until ")
    listed = cli("silence", "list", "--config", path)
    assert "1  active   treasury  *" in listed.stdout and "upgrade" in listed.stdout
    assert cli("silence", "expire", "1", "--config", path).stdout == "silence 1 expired\n"
    assert cli("silence", "list", "--config", path).stdout == "no active silences\n"
    assert cli("alerts", "--config", path).stdout == "no alerts yet\n"
    status = cli("status", "--health", "--config", path)
    assert "instances: 0, holding 0 of 1024 shards (1024 held by none)" in status.stdout
    assert status.exit_code == 1
    assert "watcher: unhealthy: no instance is running" in status.stderr
