"""The SQLite engine is a ``Store`` (the protocol the rest of the watcher is typed against)."""

from __future__ import annotations

import inspect
from pathlib import Path

from watcher.state.interface import ROLES, OutboxStore, RetentionStore, Store, store_members
from watcher.state.records import SourceRound, last_rounds
from watcher.state.store import AsyncSqliteStore, SqliteStore


def protocol_members() -> set[str]:
    return {
        name
        for name, value in store_members().items()
        if (callable(value) or isinstance(value, property))
        and (not name.startswith("_") or name in {"__aenter__", "__aexit__"})
    }


def kind(method: object) -> str:
    """How a method is called: awaited, iterated with ``async for``, or plainly."""
    if inspect.iscoroutinefunction(method):
        return "coroutine"
    if inspect.isasyncgenfunction(method):
        return "async iterator"
    return "plain"


async def test_the_sqlite_engine_has_every_member_of_the_protocol_with_its_parameters(
    tmp_path: Path,
) -> None:
    members = protocol_members()
    assert {"commit_step", "claim_due", "record_round", "commits", "close"} <= members
    async with AsyncSqliteStore.open(tmp_path / "watcher.db") as store:
        engine: Store = store  # mypy checks the rest where watcher.app builds it
        for name in members:
            assert hasattr(engine, name), name
            wanted = getattr(Store, name)
            if isinstance(wanted, property):
                continue
            got = getattr(AsyncSqliteStore, name)
            assert list(inspect.signature(got).parameters) == list(
                inspect.signature(wanted).parameters
            ), name
            # The protocol declares prune_batches as a plain method returning an async iterator.
            expected = "async iterator" if name == "prune_batches" else kind(wanted)
            assert kind(got) == expected, name


def test_record_round_keeps_the_last_success_when_a_round_fails(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "watcher.db") as store:
        store.record_round(SourceRound("vote", 10.0, 5, 0, 0.5, 10.0))
        store.record_round(SourceRound("vote", 20.0, 5, 5, 0.7, None))
        assert last_rounds(store.db.conn) == [SourceRound("vote", 20.0, 5, 5, 0.7, 10.0)]


def test_each_member_of_the_store_belongs_to_one_role_but_its_life() -> None:
    def public(role: type) -> set[str]:
        return {name for name in vars(role) if not name.startswith("_")}

    roles = [public(role) for role in ROLES]
    assert sum(len(members) for members in roles) == len(set().union(*roles))  # disjoint
    life = public(Store)
    assert life == {"start", "close"}
    assert set().union(*roles) | life == {
        name for name in store_members() if not name.startswith("_")
    }
    assert {"claim_due", "mark_sent"} <= public(OutboxStore)
    assert public(RetentionStore) == {"prune_batches"}
