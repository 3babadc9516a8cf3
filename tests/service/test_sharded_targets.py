"""A job's targets in the shards an instance holds, shard by shard: packed addresses give the
same targets as listed ones, and a shard handed back is out of the next sweep's."""

from __future__ import annotations

import base58

from watcher.config.address_files import JoinedTargets, PackedAddresses
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
        await sharded.prepare(job)
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
    await sharded.prepare(PACKED)
    assert sorted(sharded.held(PACKED, first)) == sorted(in_shards(first))
    assert sorted(sharded.held(PACKED, second)) == sorted(in_shards(second))
    assert list(sharded.held(PACKED, frozenset())) == []
