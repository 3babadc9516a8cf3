"""Settings and rule files for the settings tests, and what loading or checking them says."""

from __future__ import annotations

import textwrap
from pathlib import Path

from watcher.checks import check_config
from watcher.config.reading import load_settings
from watcher.config.settings import Settings

TREASURY = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
KEY = "k3y-0f-the-rpc-s3cret"
MINIMAL = """
rpc_url: "https://rpc.example.com/v3/${RPC_API_KEY}"
rules: [rules/]
channels:
  ops: ["json://127.0.0.1:8080/"]
  oncall: ["json://127.0.0.1:8081/"]
"""


RULE = f"""
rules:
  - name: treasury
    kind: new_transactions
    addresses: [{TREASURY}]
    notify: [ops]
"""


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def settings_file(conf: Path, text: str = MINIMAL) -> Path:
    return write(conf / "watcher.yaml", text)


def problems(path: Path, env: dict[str, str] | None = None) -> list[str]:
    return [str(problem) for problem in check_config(path, {} if env is None else env)]


def load(path: Path, env: dict[str, str] | None = None) -> Settings:
    return load_settings(path, {"RPC_API_KEY": KEY} if env is None else env)
