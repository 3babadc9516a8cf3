"""Quiet state changes are staged and written together (watcher.state.targets): a sweep of many
first polls costs a few transactions, a staged state is what the next load sees, a step with
alerts supersedes it, and closing the store writes what is staged. A sweep reads its targets'
states a chunk at a time (``prefetch_states``), and a write after the read wins."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import pytest

from watcher.state.interface import StepToCommit
from watcher.state.store import AsyncSqliteStore, SqliteStore
from watcher.state.targets import STAGED_LIMIT


def stored(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT target, state FROM targets WHERE source = 's'"))


def test_a_staged_state_is_loaded_before_it_is_written_then_written_in_one_transaction(
    tmp_store: SqliteStore,
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


def test_staging_asks_for_a_flush_at_the_limit(tmp_store: SqliteStore) -> None:
    asks = [tmp_store.stage_state("s", f"t{n}", {"n": n}, 1.0) for n in range(STAGED_LIMIT)]
    assert asks == [False] * (STAGED_LIMIT - 1) + [True]


def test_a_committed_step_supersedes_the_staged_state(tmp_store: SqliteStore) -> None:
    tmp_store.stage_state("s", "t", {"cursor": "old"}, 1.0)
    tmp_store.commit_step(StepToCommit.of("s", "t", {"cursor": "new"}, [], lambda alert: [], 2.0))
    tmp_store.flush_states()
    assert tmp_store.load_state("s", "t") == {"cursor": "new"}
    assert stored(tmp_store.path) == {"t": '{"cursor":"new"}'}


def test_closing_the_store_writes_what_is_staged(tmp_path: Path) -> None:
    path = tmp_path / "watcher.db"
    store = SqliteStore(path)
    store.stage_state("s", "t", {"cursor": 1}, 1.0)
    store.close()
    with SqliteStore(path) as reopened:
        assert reopened.load_state("s", "t") == {"cursor": 1}


def test_a_prefetched_chunk_is_read_in_one_query_and_a_later_write_wins(
    tmp_store: SqliteStore,
) -> None:
    for n in range(3):
        tmp_store.commit_step(
            StepToCommit.of("s", f"t{n}", {"cursor": n}, [], lambda alert: [], 1.0)
        )
    queries: list[str] = []
    tmp_store._db.conn.set_trace_callback(queries.append)
    tmp_store.prefetch_states("s", ["t0", "t1", "t2", "new"])
    tmp_store.stage_state("s", "t1", {"cursor": "staged"}, 2.0)
    tmp_store.commit_step(
        StepToCommit.of("s", "t2", {"cursor": "committed"}, [], lambda alert: [], 2.0)
    )
    tmp_store.flush_states()  # t1's staged state written: no copy of it is left to read
    queries.clear()
    loaded = [tmp_store.load_state("s", t) for t in ("t0", "new", "t1", "t2")]
    assert loaded == [{"cursor": 0}, None, {"cursor": "staged"}, {"cursor": "committed"}]
    assert len(queries) == 2  # t1 and t2 read from the file again; t0 and "new" from the chunk
    queries.clear()
    assert tmp_store.load_state("s", "t0") == {"cursor": 0}  # each copy is taken once
    assert len(queries) == 1


async def test_a_sweep_reads_its_targets_states_a_chunk_at_a_time(tmp_store: SqliteStore) -> None:
    from watcher.service.rounds import PREFETCH_CHUNK
    from watcher.service.sweeps import run_bounded

    targets = [f"t{n}" for n in range(2 * PREFETCH_CHUNK + 1)]
    engine = AsyncSqliteStore(tmp_store)  # as a sweep calls it
    chunks: list[int] = []

    async def prefetch(chunk: Sequence[str]) -> None:
        chunks.append(len(chunk))
        await engine.prefetch_states("s", chunk)

    queries: list[str] = []
    tmp_store._db.conn.set_trace_callback(queries.append)
    loaded = await run_bounded(
        targets,
        lambda t: engine.load_state("s", t),
        7,
        prepare=prefetch,
        chunk=PREFETCH_CHUNK,
    )
    assert loaded == [None] * len(targets)
    assert chunks == [PREFETCH_CHUNK, PREFETCH_CHUNK, 1]
    assert len(queries) == 3


async def test_a_flush_waiting_on_the_file_leaves_the_event_loop_free(
    tmp_store: SqliteStore,
) -> None:
    """The engine writes on its own thread: while a flush waits for the file (here another
    writer holds its lock; in a sweep, a long write or a WAL checkpoint), the loop runs on,
    and what is being flushed is what a load sees."""
    engine = AsyncSqliteStore(tmp_store)
    engine.stage_state("s", "t1", {"cursor": 1}, 1.0)
    with closing(sqlite3.connect(tmp_store.path, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # holds the write lock (the store waits up to 2 s)
        flush = asyncio.create_task(engine.flush_states())
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError):  # the loop is free to time it out
            await asyncio.wait_for(asyncio.shield(flush), 0.05)
        assert loop.time() - started < 1.0
        assert await engine.load_state("s", "t1") == {"cursor": 1}
        other.execute("ROLLBACK")
    assert await flush == 1
    assert stored(tmp_store.path) == {"t1": '{"cursor":1}'}
