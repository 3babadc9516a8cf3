"""The commands that only use the state database (``alerts``, ``status``, ``silence``) need
none of the secrets the settings file names; those that only read it open it read-only (never
creating nor upgrading it) and refuse in one line a missing database or a schema that is not
theirs; the commands that reach the endpoint or a channel still refuse an unset variable."""

from __future__ import annotations

import json
import os
import pwd
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from watcher.cli import app
from watcher.core.events import NewSilence
from watcher.state.database import MIGRATIONS, migrate, open_database
from watcher.state.store import SqliteStore
from watcher.testing.daemon import write_config

runner = CliRunner()
NO_SECRETS = {"RPC_API_KEY": None, "HOOK_TOKEN": None}


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env=NO_SECRETS)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    rule = {
        "name": "treasury",
        "kind": "new_transactions",
        "every": "1m",
        "notify": ["hooks"],
        "addresses": ["9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"],
    }
    path = write_config(
        tmp_path,
        rpc_url="https://rpc.example.com/v3/${RPC_API_KEY}",
        channels={"hooks": ["json://127.0.0.1:9/${HOOK_TOKEN}"]},
        rules=[rule],
    )
    SqliteStore(tmp_path / "state" / "watcher.db").close()
    return path


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["alerts"], "no alerts yet"),
        (["silence", "list"], "no active silences"),
        (["status"], "firing: 0\nsources: none polled yet\ndeliveries: 0 pending, 0 dead"),
    ],
)
def test_a_read_only_command_needs_no_secret(config: Path, command: list[str], shown: str) -> None:
    result = cli(*command, "--config", str(config))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{shown}\n"


def test_silence_expire_needs_no_secret(config: Path) -> None:
    result = cli("silence", "expire", "7", "--config", str(config))
    assert result.exit_code == 1
    assert "no silence 7" in result.stderr
    assert "RPC_API_KEY" not in result.stderr


def test_a_silence_is_added_listed_and_expired_without_any_secret(config: Path) -> None:
    added = runner.invoke(
        app,
        [
            *("silence", "add", "--config", str(config), "--rule", "treasury"),
            *("--for", "2h", "--comment", "wallet migration"),
        ],
        env={**NO_SECRETS, "USER": None, "LOGNAME": None},
    )
    assert added.exit_code == 0, added.output
    assert added.stdout.startswith("silence 1: treasury (every subject) silenced until ")
    listed = cli("silence", "list", "--json", "--config", str(config))
    assert listed.exit_code == 0, listed.output
    [shown] = [json.loads(line) for line in listed.stdout.splitlines()]
    # No $USER nor $LOGNAME (a service account, a container): the uid's name.
    assert (shown["rule"], shown["state"]) == ("treasury", "active")
    assert shown["created_by"] == pwd.getpwuid(os.getuid()).pw_name
    expired = cli("silence", "expire", "1", "--config", str(config))
    assert (expired.exit_code, expired.stdout) == (0, "silence 1 expired\n")


def test_a_silence_needs_no_channel_token_even_where_apprise_reads_it(tmp_path: Path) -> None:
    """A token that is the URL's host (Telegram, Slack) unset reads as no URL at all: the
    silence commands do not read the channels' URLs."""
    rule = {"name": "treasury", "kind": "new_transactions", "notify": ["chat"]}
    rule["addresses"] = ["9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"]
    config = write_config(
        tmp_path,
        rpc_url="https://rpc.example.com/v3/${RPC_API_KEY}",
        channels={"chat": ["tgram://${TG_TOKEN}/12345"]},
        rules=[rule],
    )
    SqliteStore(tmp_path / "state" / "watcher.db").close()
    result = runner.invoke(
        app,
        [
            *("silence", "add", "--config", str(config), "--rule", "treasury"),
            *("--for", "1h", "--comment", "bot rotated"),
        ],
        env={"RPC_API_KEY": None, "TG_TOKEN": None},
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("silence 1: treasury (every subject) silenced until ")


def test_a_silence_still_names_only_a_rule_of_the_rule_files(config: Path) -> None:
    result = cli(
        "silence", "add", "--config", str(config), "--rule", "tresury", "--for", "1h",
        "--comment", "typo",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "no rule named 'tresury' in the rule files (rules: treasury;" in result.stderr
    assert "RPC_API_KEY" not in result.stderr


@pytest.mark.parametrize("command", [["check"], ["notify-test", "--channel", "hooks"]])
def test_commands_that_reach_out_still_need_every_variable(
    config: Path, command: list[str]
) -> None:
    result = cli(*command, "--config", str(config))
    assert result.exit_code == 2
    assert "environment variable RPC_API_KEY is not set" in result.stderr


# -- the state database: read-only, never created nor upgraded ----------------------------------

READERS = [["alerts"], ["status"], ["silence", "list"]]
KNOWN = len(MIGRATIONS)


def state_file(config: Path) -> Path:
    return config.parent / "state" / "watcher.db"


def fingerprint(path: Path) -> tuple[bytes, int, int]:
    """The file's bytes, its mtime and the schema version it records."""
    with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as conn:
        version = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
    return path.read_bytes(), path.stat().st_mtime_ns, int(version)


def with_schema(path: Path, version: int) -> Path:
    """A state database at ``version``: an older watcher's (fewer migrations) or a newer one's
    (a migration this watcher does not know), closed cleanly (no -wal left)."""
    path.unlink(missing_ok=True)
    db = open_database(path)
    migrate(db, MIGRATIONS[: min(version, KNOWN)])
    if version > KNOWN:
        db.execute("CREATE TABLE from_the_future (x INTEGER) STRICT")
        db.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)", [version])
    db.close()
    return path


def one_line_refusal(result: Result, line: str) -> None:
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"watcher: {line}\n")
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("command", READERS)
def test_a_read_only_command_refuses_a_newer_schema_and_changes_nothing(
    config: Path, command: list[str]
) -> None:
    path = with_schema(state_file(config), KNOWN + 3)
    before = fingerprint(path)
    result = cli(*command, "--config", str(config))
    one_line_refusal(
        result,
        f"state database {path} was written by a newer watcher (schema {KNOWN + 3}; this one "
        f"knows {KNOWN}): upgrade watcher",
    )
    assert fingerprint(path) == before


@pytest.mark.parametrize("command", [*READERS, ["silence", "expire", "1"]])
def test_no_command_but_run_upgrades_an_older_schema(config: Path, command: list[str]) -> None:
    path = with_schema(state_file(config), 3)
    before = fingerprint(path)
    result = cli(*command, "--config", str(config))
    one_line_refusal(
        result,
        f"state database {path} has an older schema (3; this watcher's is {KNOWN}): restart "
        "`watcher run` with this version first, it upgrades the schema",
    )
    assert fingerprint(path) == before


@pytest.mark.parametrize("command", READERS)
def test_a_read_only_command_never_creates_the_database(config: Path, command: list[str]) -> None:
    path = state_file(config)
    path.unlink()
    result = cli(*command, "--config", str(config))
    one_line_refusal(result, f"no state database at {path}: start `watcher run` first")
    assert not path.exists()


@pytest.mark.parametrize("command", READERS)
def test_a_read_only_command_does_not_set_up_an_empty_file(
    config: Path, command: list[str]
) -> None:
    path = state_file(config)
    path.unlink()
    path.write_bytes(b"")
    result = cli(*command, "--config", str(config))
    one_line_refusal(
        result, f"state database {path} has no watcher schema yet: start `watcher run` first"
    )
    assert path.read_bytes() == b""


def test_a_read_only_command_reads_a_closed_database_without_changing_it(config: Path) -> None:
    """No daemon: the WAL database was closed cleanly (no -wal, no -shm); reading it read-only
    works and leaves the database file as it was."""
    path = state_file(config)
    with SqliteStore(path) as store:
        store.add_silence(NewSilence("treasury", None, 1.0, 4e9, "planned", "alice"), 1.0)
    assert not path.with_name("watcher.db-wal").exists()
    before = fingerprint(path)
    listed = cli("silence", "list", "--config", str(config))
    assert listed.exit_code == 0, listed.output
    assert "treasury  *" in listed.stdout and "by alice: planned" in listed.stdout
    assert fingerprint(path) == before


def test_the_refusal_is_one_line_from_the_real_command(config: Path) -> None:
    """As a user runs it (``python -m watcher``): one line on stderr, exit 1, no traceback."""
    path = with_schema(state_file(config), KNOWN + 1)
    env = {k: v for k, v in os.environ.items() if k not in NO_SECRETS}
    done = subprocess.run(
        [sys.executable, "-m", "watcher", "alerts", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"watcher: state database {path} was written by a newer watcher (schema {KNOWN + 1}; "
        f"this one knows {KNOWN}): upgrade watcher\n"
    )
