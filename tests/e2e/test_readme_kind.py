"""CONTRIBUTING.md's "Adding a kind" section is true: its module, its one registry line, its rule
file and its rule test, copied out of it into a copy of the package, pass `watcher test`; the
module passes the checks `make test` holds the package to (ruff, mypy strict), and the kind
rides the ``votes`` source, adding no source (no second getVoteAccounts call)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from watcher.kinds import SOURCES

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def _blocks(section: str) -> dict[str, str]:
    """Each fenced block of the section, by the file its first comment line names."""
    found: dict[str, str] = {}
    for body in re.findall(r"```(?:python|yaml)\n(.*?)```", section, flags=re.S):
        first, _, rest = body.partition("\n")
        found[first.lstrip("# ").split(":")[0].strip()] = rest
    return found


# Run in the copy: the source the kind is polled by, then every source (the same as without it).
RIDES = """
from watcher.kinds import KINDS, SOURCES, source_of
assert "low_stake" in KINDS and source_of("low_stake") is SOURCES["votes"]
assert "low_stake" in SOURCES["votes"].rule_kinds
print(source_of("low_stake").name, *sorted(SOURCES))
"""
MYPY_INI = """[mypy]
strict = True
python_version = 3.11
plugins = pydantic.mypy

[mypy-apscheduler.*]
ignore_missing_imports = True
"""


def _checked(root: Path, module: Path, env: dict[str, str]) -> None:
    """The module as ``make test`` checks the package: formatted, linted, typed (strict)."""
    tools = Path(sys.executable).parent
    config = str(ROOT / "pyproject.toml")
    for command in (
        [str(tools / "ruff"), "format", "--check", "--config", config, str(module)],
        [str(tools / "ruff"), "check", "--config", config, str(module)],
    ):
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    (root / "mypy.ini").write_text(MYPY_INI)
    typed = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", str(module.relative_to(root))],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert typed.returncode == 0, typed.stdout + typed.stderr


def test_the_contributing_example_kind_works_end_to_end(tmp_path: Path) -> None:
    guide = (ROOT / "CONTRIBUTING.md").read_text()
    section = guide[guide.index("## Adding a kind") :]
    section = section[: section.index("\n## ")] if "\n## " in section else section
    blocks = _blocks(section)
    module = blocks["watcher/kinds/low_stake.py"]
    registry_line = blocks["watcher/kinds/__init__.py"]

    package = tmp_path / "watcher"
    shutil.copytree(ROOT / "watcher", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "kinds" / "low_stake.py").write_text(module)
    registry = package / "kinds" / "__init__.py"
    text = registry.read_text()
    anchor = "        version_drift.KIND,\n"
    assert anchor in text
    text = text.replace(anchor, anchor + registry_line.strip("\n") + "\n")
    opening = "from watcher.kinds import (\n"
    assert opening in text
    text = text.replace(opening, opening + "    low_stake,\n")
    registry.write_text(text)
    (tmp_path / "low_stake.yaml").write_text(blocks["low_stake.yaml"])
    (tmp_path / "low_stake.test.yaml").write_text(blocks["low_stake.test.yaml"])

    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    _checked(tmp_path, package / "kinds" / "low_stake.py", env)
    rides = subprocess.run(
        [sys.executable, "-c", RIDES],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rides.returncode == 0, rides.stdout + rides.stderr
    assert rides.stdout.split() == ["votes", *sorted(SOURCES)], rides.stdout
    done = subprocess.run(
        [sys.executable, "-m", "watcher", "test", "low_stake.test.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "low_stake.test.yaml" in done.stdout and "FAIL" not in done.stdout
    # The copy, not the installed package, ran: without the registry line the kind is unknown.
    registry.write_text(registry.read_text().replace(registry_line.strip("\n") + "\n", ""))
    refused = subprocess.run(
        [sys.executable, "-m", "watcher", "test", "low_stake.test.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0 and "low_stake" in refused.stdout + refused.stderr
