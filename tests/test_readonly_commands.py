"""The commands that only read the state database (``alerts``, ``silence list|expire``) work
without the secrets the settings file names (``${RPC_API_KEY}``, channel tokens); the commands
that reach the endpoint or a channel still refuse an unset variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from watcher.cli import app
from watcher.state.store import Store

from support.daemon import write_config

runner = CliRunner()
NO_SECRETS = {"RPC_API_KEY": None, "HOOK_TOKEN": None}


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env=NO_SECRETS)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    rule = {"name": "treasury", "kind": "new_transactions", "every": "1m", "notify": ["hooks"],
            "addresses": ["9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"]}  # fmt: skip
    path = write_config(
        tmp_path,
        rpc_url="https://rpc.example.com/v3/${RPC_API_KEY}",
        channels={"hooks": ["json://127.0.0.1:9/${HOOK_TOKEN}"]},
        rules=[rule],
    )
    Store(tmp_path / "state" / "watcher.db").close()
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


@pytest.mark.parametrize("command", [["check"], ["notify-test", "--channel", "hooks"]])
def test_commands_that_reach_out_still_need_every_variable(
    config: Path, command: list[str]
) -> None:
    result = cli(*command, "--config", str(config))
    assert result.exit_code == 2
    assert "environment variable RPC_API_KEY is not set" in result.stderr
