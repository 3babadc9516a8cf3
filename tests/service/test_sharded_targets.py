"""A job's targets in the shards an instance holds, shard by shard: packed addresses give the
same targets as listed ones, and a shard handed back is out of the next sweep's."""

from __future__ import annotations

import tempfile
from pathlib import Path

import base58
import pytest
from structlog.testing import capture_logs

from watcher.config.packed_keys import JoinedTargets, PackedAddresses
from watcher.kinds.ruleset import Job
from watcher.service.sweeps import ShardedTargets
from watcher.state.shards import shard_of


def key(number: int) -> str:
    return base58.b58encode(number.to_bytes(32, "big")).decode()


ADDRESSES = [key(n) for n in range(1, 3001)]
LISTED = Job("signatures", 600.0, tuple(ADDRESSES))
PACKED = Job(
    "signatures",
    600.0,
    JoinedTargets((tuple(ADDRESSES[:10]), PackedAddresses(ADDRESSES[10:]))),
)


def in_shards(shards: frozenset[int]) -> list[str]:
    return [a for a in ADDRESSES if shard_of("signatures", a) in shards]


async def test_the_held_shards_targets_shard_by_shard_alike_listed_or_packed() -> None:
    shards = frozenset(range(0, 1024, 4))
    for job in (LISTED, PACKED):
        sharded = ShardedTargets()
        await sharded.prepare(job, shards)
        held = sharded.held(job, shards)
        assert sorted(held) == sorted(in_shards(shards))
        assert [shard_of("signatures", t) for t in held] == sorted(
            shard_of("signatures", t) for t in held
        )
        assert sharded.held(job, shards) is held  # the same tuple while the shards stay
        assert sharded.held(job, None) is job.targets


async def test_a_shard_handed_back_is_out_and_a_shard_taken_in() -> None:
    sharded = ShardedTargets()
    first, second = frozenset({1, 2, 3}), frozenset({2, 3, 4})
    await sharded.prepare(PACKED, first)
    assert sorted(sharded.held(PACKED, first)) == sorted(in_shards(first))
    assert sorted(sharded.held(PACKED, second)) == sorted(in_shards(second))
    assert list(sharded.held(PACKED, frozenset())) == []


def shares_job(source: str, packed: PackedAddresses) -> Job:
    return Job(source, 600.0, JoinedTargets((tuple(ADDRESSES[:10]), packed)))


async def test_a_long_packed_list_keeps_the_held_shards_keys_only() -> None:
    packed = PackedAddresses(ADDRESSES[10:])
    job = shares_job("signatures", packed)
    sharded = ShardedTargets(hold_from=1000)
    first = frozenset(range(0, 1024, 4))
    await sharded.prepare(job, first)
    mine = [a for a in ADDRESSES[10:] if shard_of("signatures", a) in first]
    assert packed.held_count() == len(mine) < len(packed) // 3
    assert sorted(sharded.held(job, first)) == sorted(in_shards(first))
    # Shards taken over: their keys come back from the file, the ones handed back go.
    second = frozenset(range(1, 1024, 2))
    await sharded.prepare(job, second)
    assert packed.held_count() == sum(shard_of("signatures", a) in second for a in ADDRESSES[10:])
    assert sorted(sharded.held(job, second)) == sorted(in_shards(second))
    assert list(packed) == ADDRESSES[10:]


async def test_a_list_two_sources_sweep_holds_both_shares() -> None:
    packed = PackedAddresses(ADDRESSES[10:])
    signatures, accounts = shares_job("signatures", packed), shares_job("accounts", packed)
    sharded = ShardedTargets(hold_from=1000)
    shards = frozenset(range(0, 1024, 4))
    await sharded.prepare(signatures, shards)
    await sharded.prepare(accounts, shards)
    both = [
        a
        for a in ADDRESSES[10:]
        if shard_of("signatures", a) in shards or shard_of("accounts", a) in shards
    ]
    assert packed.held_count() == len(both)
    assert sorted(sharded.held(accounts, shards)) == sorted(
        a for a in ADDRESSES if shard_of("accounts", a) in shards
    )


async def test_a_short_list_keeps_every_key() -> None:
    packed = PackedAddresses(ADDRESSES[10:])
    sharded = ShardedTargets()
    await sharded.prepare(shares_job("signatures", packed), frozenset({1, 2}))
    assert packed.held_count() == len(packed)


async def test_no_temporary_file_keeps_every_key_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    packed = PackedAddresses(ADDRESSES[10:])
    job = shares_job("signatures", packed)
    sharded = ShardedTargets(hold_from=1000)
    with capture_logs() as logs:
        await sharded.prepare(job, frozenset({1, 2}))
        await sharded.prepare(job, frozenset({3}))
    assert packed.held_count() == len(packed)
    assert sorted(sharded.held(job, frozenset({3}))) == sorted(in_shards(frozenset({3})))
    said = [entry for entry in logs if "no temporary file" in entry["event"]]
    assert len(said) == 1 and said[0]["addresses"] == len(packed)
