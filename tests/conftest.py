"""Shared fixtures: real local receivers for deliveries, a store on a temporary file, waiting."""

from __future__ import annotations

import compileall
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import watcher
from watcher.state.store import SqliteStore
from watcher.testing.postgres import Postgres
from watcher.testing.receivers import JsonReceiver, SmtpReceiver
from watcher.testing.receivers import wait_until as _wait_until

# Hypothesis's per-example deadline (200 ms) measures the machine's load as much as the code: a
# busy CI box made correct properties fail. Speed is measured in bench/, not here.
settings.register_profile("watcher", deadline=None)
settings.load_profile("watcher")


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package's bytecode once, before the workers start. The end-to-end tests
    start hundreds of ``watcher`` processes (the daemon, ``status``, ``alerts``...), and each
    one compiles every module it imports from source when nothing is cached, as happens under
    ``PYTHONDONTWRITEBYTECODE``: a few tenths of a second of CPU each, on every start. (What
    an import writes by itself otherwise; an up-to-date file is left as it is.)"""
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        compileall.compile_dir(Path(watcher.__file__).parent, quiet=1)


@pytest.fixture
def json_receiver() -> Iterator[JsonReceiver]:
    with JsonReceiver() as receiver:
        yield receiver


@pytest.fixture
def smtp_receiver() -> Iterator[SmtpReceiver]:
    with SmtpReceiver() as receiver:
        yield receiver


@pytest.fixture
def tmp_store(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(tmp_path / "state" / "watcher.db")
    yield store
    store.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A throwaway PostgreSQL server (``watcher.testing.postgres``), one per test process, started
    by the first test that asks for it; each test makes its own database (``CREATE DATABASE``)."""
    with Postgres.start() as server:
        yield server


@pytest.fixture
def sqlite_file_bytes() -> Callable[..., bytes]:
    """Everything SQLite wrote for a database: the file and its -wal and -shm companions.
    For a database still open, asserts the -wal exists, so a check on the bytes covers what is
    not checkpointed yet (a clean close checkpoints and removes it: pass ``open_db=False``)."""

    def read(path: Path, *, open_db: bool = True) -> bytes:
        files = [p for p in path.parent.iterdir() if p.name.startswith(path.name)]
        if open_db:
            assert path.with_name(path.name + "-wal") in files
        return b"".join(p.read_bytes() for p in files)

    return read


@pytest.fixture
def wait_until() -> Callable[..., Any]:
    """``wait_until(predicate, timeout=10, what=...)``: poll every 20 ms, fail at the deadline."""
    return _wait_until


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the end-to-end tests first: they are the slow ones, and with several xdist workers
    a slow test started last keeps one worker busy after the others are done. (A stable sort:
    the order within each group stays the collection order.)

    Under xdist, each worker's first share of the collection (``--dist worksteal`` hands each
    an equal run of it, in order) starts with its part of the end-to-end tests: dealt out in
    turn, so that every worker starts on them at once. In one run of them all, the first
    worker alone had them for its first minute or two, one at a time, each mostly waiting."""
    end_to_end = [item for item in items if item.get_closest_marker("e2e") is not None]
    rest = [item for item in items if item.get_closest_marker("e2e") is None]
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    ordered: list[pytest.Item] = []
    remaining = len(items)
    for worker in range(workers):
        share = remaining // (workers - worker)  # as worksteal's first distribution counts
        remaining -= share
        mine = end_to_end[worker::workers]
        others = max(0, share - len(mine))
        ordered += mine + rest[:others]
        del rest[:others]
    items[:] = ordered + rest
