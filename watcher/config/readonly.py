"""Settings for the commands that only use the state database (``alerts``, ``status``,
``silence add`` / ``list`` / ``expire``): they never call the RPC endpoint nor send anything, so a
``${VAR}`` that is not set in their environment (the RPC key, a channel token) must not refuse
them. Each unset variable is read as a placeholder; every other check stays as strict."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from watcher.config.reading import VARIABLE_PATTERN, load_settings
from watcher.config.settings import Settings

# Stands for a variable that is not set; never used to reach anything.
UNSET = "unset"


def load_readonly_settings(path: Path, env: Mapping[str, str] | None = None) -> Settings:
    """``load_settings`` with every unset ``${VAR}`` of the file read as a placeholder."""
    return load_settings(path, readonly_environ(path, env))


def readonly_environ(path: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment (``os.environ`` by default) with every ``${VAR}`` the settings file
    names but the environment does not set read as a placeholder."""
    environ = dict(os.environ if env is None else env)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""  # load_settings reports the unreadable file
    for match in VARIABLE_PATTERN.finditer(text):
        escaped, name = match.groups()
        if not escaped:
            environ.setdefault(name, UNSET)
    return environ
