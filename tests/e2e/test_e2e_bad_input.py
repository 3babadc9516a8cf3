"""Hostile input to the command line: every case is one clear line naming the file or path,
a non-zero exit, no traceback, and it ends at once (the per-test timeout is the only clock).

The real ``watcher`` process runs, as a user starts it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from watcher.state.database import MIGRATIONS
from watcher.state.store import SqliteStore

TREASURY = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"

SETTINGS = """
rpc_url: "http://127.0.0.1:9/v3/k3y"
state_path: {state_path}
rules: [rules/]
channels:
  ops: ["json://127.0.0.1:9/"]
"""

RULE = f"""
rules:
  - name: treasury
    kind: new_transactions
    addresses: [{TREASURY}]
    every: {{every}}
    notify: [ops]
"""

pytestmark = pytest.mark.e2e


def watcher(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WATCHER_")}
    return subprocess.run(
        [sys.executable, "-m", "watcher.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def one_clear_line(result: subprocess.CompletedProcess[str], *names: str) -> str:
    """The run failed with exactly one line of output naming each of ``names``."""
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    for name in names:
        assert name in lines[0], output
    return lines[0]


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    (tmp_path / "rules").mkdir()
    write(tmp_path / "rules" / "a.yaml", RULE.format(every="30s"))
    write(tmp_path / "watcher.yaml", SETTINGS.format(state_path="state/watcher.db"))
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


# -- durations --------------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", ["check", "run"])
def test_a_duration_beyond_the_limit_is_refused(conf: Path, command: str) -> None:
    write(conf / "rules" / "a.yaml", RULE.format(every="2000000000d"))
    result = watcher(command, "--config", "watcher.yaml", cwd=conf)
    line = one_clear_line(result, "rules/a.yaml:5:", "every")
    assert "365d" in line


# -- the state database -----------------------------------------------------------------------


def a_database(conf: Path) -> Path:
    """A real state database with some history in it, as the daemon leaves it."""
    path = conf / "state" / "watcher.db"
    store = SqliteStore(path)
    with store.transaction():
        for number in range(300):
            store.db.execute(
                "INSERT INTO targets (source, target, state, updated_at) VALUES (?, ?, ?, ?)",
                ["sigs", f"target-{number}", "x" * 200, 0.0],
            )
    store.close()
    return path


def corrupted(conf: Path) -> Path:
    path = a_database(conf)
    data = bytearray(path.read_bytes())
    data[:100] = b"\x00" * 100  # the header
    path.write_bytes(bytes(data))
    return path


def truncated(conf: Path) -> Path:
    path = a_database(conf)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def future(conf: Path) -> Path:
    path = a_database(conf)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("INSERT INTO schema_migrations VALUES (?, 0)", [len(MIGRATIONS) + 5])
    return path


def garbage(conf: Path) -> Path:
    path = conf / "state" / "watcher.db"
    path.parent.mkdir()
    path.write_bytes(b"this is not a database\n" * 100)
    return path


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["check", "run", "alerts"])
@pytest.mark.parametrize("damage", [corrupted, truncated, future, garbage])
def test_an_unusable_state_database_is_one_line(
    conf: Path, command: str, damage: Callable[[Path], Path]
) -> None:
    damage(conf)
    result = watcher(command, "--config", "watcher.yaml", cwd=conf)
    one_clear_line(result, "state/watcher.db")


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` cannot be written, even by root (who ignores permission bits: the file is made
    immutable then)."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(mode)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["check", "run"])
def test_a_read_only_state_database_is_one_line(conf: Path, command: str) -> None:
    path = a_database(conf)
    with read_only(path):
        result = watcher(command, "--config", "watcher.yaml", cwd=conf)
    one_clear_line(result, "watcher.yaml:2:", "state/watcher.db", "not writable")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["check", "run", "alerts"])
def test_a_state_path_that_is_a_folder_is_one_line(conf: Path, command: str) -> None:
    (conf / "state" / "watcher.db").mkdir(parents=True)
    result = watcher(command, "--config", "watcher.yaml", cwd=conf)
    one_clear_line(result, "state/watcher.db")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["check", "run"])
def test_a_state_path_under_a_file_is_one_line(conf: Path, command: str) -> None:
    (conf / "state").write_text("a file, not a folder\n")
    result = watcher(command, "--config", "watcher.yaml", cwd=conf)
    one_clear_line(result, "watcher.yaml:2:", "state/watcher.db")


@pytest.mark.timeout(60)
def test_check_does_not_create_the_state_database(conf: Path) -> None:
    result = watcher("check", "--config", "watcher.yaml", cwd=conf)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (conf / "state").exists()


# -- channel URLs -----------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["check", "run"])
def test_a_channel_url_apprise_cannot_read_names_the_channel_not_the_url(
    conf: Path, command: str
) -> None:
    secret = "T0k3nTh4tMustN0tSh0w"
    settings = SETTINGS.format(state_path="state/watcher.db")
    write(conf / "watcher.yaml", settings.replace("json://127.0.0.1:9/", f"nosuch://{secret}/x"))
    result = watcher(command, "--config", "watcher.yaml", cwd=conf)
    line = one_clear_line(result, "watcher.yaml:5:", "channels.ops[0]", "Apprise")
    assert secret not in line
    assert not (conf / "state").exists()  # run did not start


# -- YAML limits ------------------------------------------------------------------------------

ALIAS_BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def deep_rules(conf: Path) -> str:
    (conf / "rules" / "a.yaml").write_text("rules: " + "[" * 20_000 + "]" * 20_000 + "\n")
    return "rules/a.yaml:1:"


def deep_settings(conf: Path) -> str:
    text = (conf / "watcher.yaml").read_text()
    (conf / "watcher.yaml").write_text(text + "x: " + "{a: " * 20_000 + "1" + "}" * 20_000)
    return "watcher.yaml:6:"


def bomb_rules(conf: Path) -> str:
    (conf / "rules" / "a.yaml").write_text(ALIAS_BOMB)
    return "rules/a.yaml:"


def bomb_settings(conf: Path) -> str:
    text = (conf / "watcher.yaml").read_text()
    (conf / "watcher.yaml").write_text(text + "x:\n" + textwrap.indent(ALIAS_BOMB, "  "))
    return "watcher.yaml:"


def huge_rules(conf: Path) -> str:
    with (conf / "rules" / "a.yaml").open("w") as out:
        out.write("rules:\n  - name: big\n    kind: new_transactions\n    addresses:\n")
        line = f"      - {TREASURY}\n"
        out.write(line * (17 * 1024 * 1024 // len(line)))
    return "rules/a.yaml:"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize("make", [deep_rules, deep_settings, bomb_rules, bomb_settings, huge_rules])
def test_hostile_yaml_is_one_line(conf: Path, command: str, make: Callable[[Path], str]) -> None:
    where = make(conf)
    result = watcher(command, "--config", "watcher.yaml", cwd=conf)
    one_clear_line(result, where)


@pytest.mark.timeout(60)
def test_a_10_mb_rules_file_is_checked_in_linear_time(conf: Path) -> None:
    """100,000 lines of the same address (10 MB of YAML): read, then refused as duplicates."""
    with (conf / "rules" / "a.yaml").open("w") as out:
        out.write("rules:\n  - name: big\n    kind: new_transactions\n    notify: [ops]\n")
        out.write("    addresses:\n")
        line = f"      - {TREASURY}{' ' * 40}# a comment to make the file big\n"
        out.write(line * (10 * 1024 * 1024 // len(line)))
    result = watcher("check", "--config", "watcher.yaml", cwd=conf)
    assert result.returncode != 0
    assert "Traceback" not in result.stdout + result.stderr
    assert "rules/a.yaml:" in result.stderr
