"""One `watcher run` per state file: the first holds an exclusive lock on ``<state>.lock`` (its
PID inside) until it exits; a second one exits 1 naming that PID before it touches the database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from watcher.state.lock import StateInUse, lock_path, lock_state
from watcher.testing.daemon import write_config


def test_the_lock_is_exclusive_names_its_holder_and_is_let_go(tmp_path: Path) -> None:
    state = tmp_path / "state" / "watcher.db"
    with lock_state(state) as held:
        assert held.path == lock_path(state) == tmp_path / "state" / "watcher.db.lock"
        assert held.path.read_text() == f"{os.getpid()}\n"
        # flock locks belong to the open file: a second open in this process is refused too.
        with pytest.raises(StateInUse) as refused:
            lock_state(state)
        assert refused.value.pid == os.getpid()
        assert str(refused.value) == (
            f"state database {state} is in use by another `watcher run` "
            f"(pid {os.getpid()}; lock {held.path})"
        )
    assert not state.exists()  # the lock is beside the database, never the database itself
    with lock_state(state):  # released: free again
        pass


def test_a_second_run_on_the_same_state_file_exits_naming_the_holder(tmp_path: Path) -> None:
    """The held lock stands for a running daemon: `watcher run` refuses before it creates,
    upgrades or requeues anything in the database."""
    config = write_config(
        tmp_path,
        rpc_url="http://127.0.0.1:9/v3/key",
        channels={"hooks": ["json://127.0.0.1:9/"]},
        rules=[
            {
                "name": "treasury",
                "kind": "new_transactions",
                "every": "1m",
                "notify": ["hooks"],
                "addresses": ["9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"],
            }
        ],
    )
    state = tmp_path / "state" / "watcher.db"
    with lock_state(state) as held:
        done = subprocess.run(
            [sys.executable, "-m", "watcher", "run", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"watcher: refusing to start: state database {state} is in use by another "
        f"`watcher run` (pid {os.getpid()}; lock {held.path})\n"
    )
    assert not state.exists()
