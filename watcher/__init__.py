"""watcher: monitoring and alerting for a Solana-style ledger.

What a program embedding the daemon needs, importable from ``watcher``::

    from watcher import Daemon, RuleSet, Settings, load_rules

    settings = Settings.build(rpc_url=..., rules=["rules/"], channels={"ops": ["json://..."]})
    rules = load_rules(settings.rules, channels=set(settings.channels))
    daemon = Daemon(settings, RuleSet(rules))

(``load_config(path)`` reads a settings file and its rules together; ``KINDS``, the registry of
watch kinds, is imported where it is read, never passed.) Errors: every error the
daemon raises on purpose is a ``WatcherError``; ``ConfigError`` (settings or rules),
``RpcError`` (the ledger's endpoint), ``StateError`` (the state database) and ``DaemonFailed``.
The names are imported on first use, so that ``import watcher`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watcher.app import Daemon
    from watcher.checks import load_config
    from watcher.config.reading import load_settings
    from watcher.config.settings import Settings
    from watcher.core.errors import (
        ConfigError,
        DaemonFailed,
        RpcError,
        StateError,
        WatcherError,
    )
    from watcher.core.version import __version__
    from watcher.kinds import KINDS
    from watcher.kinds.rule_files import load_rules
    from watcher.kinds.ruleset import RuleSet

_WHERE = {
    "KINDS": "watcher.kinds",
    "Daemon": "watcher.app",
    "RuleSet": "watcher.kinds.ruleset",
    "Settings": "watcher.config.settings",
    "load_settings": "watcher.config.reading",
    "load_config": "watcher.checks",
    "load_rules": "watcher.kinds.rule_files",
    "WatcherError": "watcher.core.errors",
    "ConfigError": "watcher.core.errors",
    "RpcError": "watcher.core.errors",
    "StateError": "watcher.core.errors",
    "DaemonFailed": "watcher.core.errors",
    "__version__": "watcher.core.version",
}

__all__ = [
    "KINDS",
    "ConfigError",
    "Daemon",
    "DaemonFailed",
    "RpcError",
    "RuleSet",
    "Settings",
    "StateError",
    "WatcherError",
    "__version__",
    "load_config",
    "load_rules",
    "load_settings",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'watcher' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
