"""The library face: what a program embedding the daemon imports from ``watcher``."""

from __future__ import annotations

import asyncio
import importlib.metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

import watcher
from watcher import (
    ConfigError,
    Daemon,
    RpcError,
    RuleSet,
    Settings,
    StateError,
    WatcherError,
    load_config,
    load_rules,
)
from watcher.app import Daemon as DaemonItself
from watcher.cli import app
from watcher.kinds.ruleset import RuleSet as RuleSetItself
from watcher.simulator import Ledger, SimulatorServer
from watcher.state.store import SqliteStore

from support.imports import imported_modules

TREASURY = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"


def test_the_package_exports_what_an_embedding_program_needs() -> None:
    assert (Daemon, RuleSet) == (DaemonItself, RuleSetItself)
    assert all(issubclass(error, WatcherError) for error in (ConfigError, RpcError, StateError))
    assert callable(load_config)
    assert watcher.__version__ == importlib.metadata.version("watcher")  # the package's own
    with pytest.raises(AttributeError):
        _ = watcher.NoSuchName


def test_the_version_is_the_installed_packages_everywhere() -> None:
    installed = importlib.metadata.version("watcher")
    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.output) == (0, f"watcher {installed}\n")
    # The root re-exports names for embedding programs: the package's own modules import each
    # name where it lives (the version from watcher.core.version), never from the root.
    package = Path(watcher.__file__).parent
    modules = sorted(set(package.rglob("*.py")) - {package / "__init__.py"})
    imports = imported_modules(modules)
    assert [str(p.relative_to(package)) for p in modules if "watcher" in imports[p]] == []


def test_a_daemon_built_in_code_sweeps_the_ledger(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(
        f"rules:\n  - name: treasury\n    kind: new_transactions\n"
        f"    addresses: [{TREASURY}]\n    notify: [ops]\n"
    )
    with SimulatorServer(Ledger(seed=1)) as server:
        settings = Settings.build(
            base=tmp_path,
            rpc_url=server.url,
            rules=["rules.yaml"],
            channels={"ops": ["json://127.0.0.1:9/"]},
        )
        rules = load_rules(settings.rules, channels=set(settings.channels))
        daemon = Daemon(settings, RuleSet(rules))

        async def one_round() -> None:
            try:
                for job in daemon.ruleset.jobs():
                    await daemon.sweep(job)
            finally:
                await daemon.close()

        asyncio.run(one_round())
    assert settings.state_path == tmp_path / "state" / "watcher.db"
    with SqliteStore(
        settings.state_path
    ) as store:  # the sweep observed the treasury, kept its state
        assert store.load_state("signatures", TREASURY) is not None


def test_every_exported_name_is_there() -> None:
    assert all(getattr(watcher, name) is not None for name in watcher.__all__)
