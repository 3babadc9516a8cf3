"""Quiet state changes are staged and written together (watcher.state.targets): a sweep of many
first polls costs a few transactions, a staged state is what the next load sees, a step with
alerts supersedes it, and closing the store writes what is staged."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from watcher.state.store import Store
from watcher.state.targets import STAGED_LIMIT


def stored(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT target, state FROM targets WHERE source = 's'"))


def test_a_staged_state_is_loaded_before_it_is_written_then_written_in_one_transaction(
    tmp_store: Store,
) -> None:
    for n in range(5):
        assert tmp_store.stage_state("s", f"t{n}", {"cursor": n}, 1.0) is False
    assert tmp_store.load_state("s", "t3") == {"cursor": 3}
    assert stored(tmp_store.path) == {}
    commits = tmp_store.commits
    assert tmp_store.flush_states() == 5
    assert tmp_store.commits == commits + 1
    assert stored(tmp_store.path) == {f"t{n}": f'{{"cursor":{n}}}' for n in range(5)}
    assert tmp_store.flush_states() == 0  # nothing left staged


def test_staging_asks_for_a_flush_at_the_limit(tmp_store: Store) -> None:
    asks = [tmp_store.stage_state("s", f"t{n}", {"n": n}, 1.0) for n in range(STAGED_LIMIT)]
    assert asks == [False] * (STAGED_LIMIT - 1) + [True]


def test_a_committed_step_supersedes_the_staged_state(tmp_store: Store) -> None:
    tmp_store.stage_state("s", "t", {"cursor": "old"}, 1.0)
    tmp_store.commit_step("s", "t", {"cursor": "new"}, [], lambda alert: [], 2.0)
    tmp_store.flush_states()
    assert tmp_store.load_state("s", "t") == {"cursor": "new"}
    assert stored(tmp_store.path) == {"t": '{"cursor":"new"}'}


def test_closing_the_store_writes_what_is_staged(tmp_path: Path) -> None:
    path = tmp_path / "watcher.db"
    store = Store(path)
    store.stage_state("s", "t", {"cursor": 1}, 1.0)
    store.close()
    with Store(path) as reopened:
        assert reopened.load_state("s", "t") == {"cursor": 1}
