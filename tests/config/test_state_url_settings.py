"""``state_url`` (a PostgreSQL database instead of the SQLite ``state_path``) and ``instance`` in
the settings: what a user sees for each mistake, the URL's password never shown, and what is
read."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from watcher.config.settings import Settings
from watcher.config.state_url import masked_url, url_secrets
from watcher.core.errors import ConfigError
from watcher.core.redact import REDACTOR
from watcher.service.reloading import RESTART_SETTINGS

from support.settings_files import KEY, RULE, load, problems, settings_file, write

PASSWORD = "pg-Pa55w0rd-n0t-t0-sh0w"
ENV = {"RPC_API_KEY": KEY, "PGPASSWORD": PASSWORD}
BASE = """rpc_url: "https://rpc.example.com/v3/${RPC_API_KEY}"
rules: [rules/]
channels:
  ops: ["json://127.0.0.1:8080/"]
"""
STATE_URL = 'state_url: "postgresql://watcher:${PGPASSWORD}@db.example.com/watcher"\n'
BOTH = "give either state_path (SQLite) or state_url (PostgreSQL), not both"


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``conf/`` (seen as such from the working folder) holding ``rules/a.yaml``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf" / "rules").mkdir(parents=True)
    write(tmp_path / "conf" / "rules" / "a.yaml", RULE)
    return tmp_path / "conf"


def test_state_url_is_read_with_the_password_from_the_environment(conf: Path) -> None:
    settings = load(settings_file(conf, BASE + STATE_URL + "instance: box-a\n"), ENV)
    assert settings.state_url is not None
    assert settings.state_url.get_secret_value() == (
        f"postgresql://watcher:{PASSWORD}@db.example.com/watcher"
    )
    assert settings.state_url_masked == "postgresql://watcher:***@db.example.com/watcher"
    assert settings.instance_name == "box-a"
    assert PASSWORD not in repr(settings) and PASSWORD not in str(settings)
    # Registered as soon as read: no log line or error can show it.
    assert PASSWORD not in REDACTOR.redact(f"connecting with {PASSWORD} failed")


def test_without_state_url_the_state_is_the_sqlite_file(conf: Path) -> None:
    settings = load(settings_file(conf, BASE), ENV)
    assert settings.state_url is None and settings.state_url_masked is None
    assert settings.state_path == conf / "state" / "watcher.db"
    assert settings.instance_name == f"{socket.gethostname()}-{os.getpid()}"


def test_state_url_and_instance_can_come_from_the_environment(conf: Path) -> None:
    env = {
        **ENV,
        "WATCHER_STATE_URL": f"postgres://watcher:{PASSWORD}@db:6543/w",
        "WATCHER_INSTANCE": "box_b.2",
    }
    settings = load(settings_file(conf, BASE), env)
    assert settings.state_url_masked == "postgres://watcher:***@db:6543/w"
    assert settings.instance_name == "box_b.2"


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        pytest.param(
            BASE + "state_path: state/w.db\n" + STATE_URL,
            {},
            f"conf/watcher.yaml:6: state_url: {BOTH}",
            id="both-in-the-file",
        ),
        pytest.param(
            BASE + STATE_URL,
            {"WATCHER_STATE_PATH": "state/w.db"},
            f"conf/watcher.yaml:5: state_url: {BOTH}",
            id="state_path-from-the-environment",
        ),
        pytest.param(
            BASE + "state_path: state/w.db\n",
            {"WATCHER_STATE_URL": f"postgresql://watcher:{PASSWORD}@db/w"},
            f"$WATCHER_STATE_URL: state_url: {BOTH}",
            id="state_url-from-the-environment",
        ),
        pytest.param(
            BASE + 'state_url: "mysql://watcher:${PGPASSWORD}@db.example.com/watcher"\n',
            {},
            "conf/watcher.yaml:5: state_url: must be a postgresql:// or postgres:// URL, e.g. "
            "postgresql://watcher:${PGPASSWORD}@db.example.com/watcher (its value is not shown)",
            id="not-postgresql",
        ),
        pytest.param(
            BASE + "instance: box a\n",
            {},
            "conf/watcher.yaml:5: instance: use 1 to 64 letters, digits, ., - and _",
            id="instance-with-a-space",
        ),
        pytest.param(
            BASE + f"instance: {'x' * 65}\n",
            {},
            "conf/watcher.yaml:5: instance: use 1 to 64 letters, digits, ., - and _",
            id="instance-too-long",
        ),
        pytest.param(
            BASE + 'instance: ""\n',
            {},
            "conf/watcher.yaml:5: instance: use 1 to 64 letters, digits, ., - and _",
            id="instance-empty",
        ),
    ],
)
def test_mistakes_name_the_file_and_line(
    conf: Path, text: str, env: dict[str, str], expected: str
) -> None:
    found = problems(settings_file(conf, text), {**ENV, **env})
    assert found == [expected]
    assert not any(PASSWORD in problem for problem in found)


def test_both_given_in_code_is_refused() -> None:
    with pytest.raises(ConfigError, match="state_url: give either state_path"):
        Settings.build(
            rpc_url="https://rpc.example.com/v3/k",
            rules=["rules"],
            state_path="w.db",
            state_url="postgresql://w@db/w",
        )


def test_with_state_url_the_sqlite_file_is_not_checked(conf: Path) -> None:
    # The default state_path would be created; a folder in its way is no problem then.
    (conf / "state" / "watcher.db").mkdir(parents=True)
    assert problems(settings_file(conf, BASE + STATE_URL), ENV) == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://watcher:s3cret@db.example.com/watcher",
            "postgresql://watcher:***@db.example.com/watcher",
        ),
        (
            "postgres://watcher:s3cret@db.example.com:6543/w",
            "postgres://watcher:***@db.example.com:6543/w",
        ),
        (
            "postgresql://watcher@db.example.com/watcher",
            "postgresql://watcher@db.example.com/watcher",
        ),
        ("postgresql://db.example.com", "postgresql://db.example.com"),
        (
            "postgresql://w@/db?host=/run/pg&password=s3cret&sslmode=require",
            "postgresql://w@/db?host=/run/pg&password=***&sslmode=require",
        ),
        ("postgresql://w:p%40ss@h1:5432,h2:5433/db", "postgresql://w:***@h1:5432,h2:5433/db"),
    ],
)
def test_masked_url_keeps_all_but_the_password(url: str, shown: str) -> None:
    assert masked_url(url) == shown
    for secret in url_secrets(url):
        assert secret not in shown


def test_url_secrets_hold_the_password_and_the_whole_url() -> None:
    url = "postgresql://watcher:s3cret@db/w?sslpassword=k3y"
    assert set(url_secrets(url)) == {url, "s3cret", "k3y"}
    # Nothing secret: nothing to scrub (the URL is its own masked form).
    assert url_secrets("postgresql://watcher@db/w") == ()


def test_the_database_settings_wait_for_a_restart() -> None:
    assert {"state_path", "state_url", "instance"} <= set(RESTART_SETTINGS)
