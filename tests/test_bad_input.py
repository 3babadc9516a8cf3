"""Hostile input to the command line: every case is one clear line naming the file or path,
a non-zero exit, no traceback, and it ends at once (the per-test timeout is the only clock).

The real ``watcher`` process runs, as a user starts it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
