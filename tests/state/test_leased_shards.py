"""``LeasedShards`` (watcher.state.leased_shards): the shards an instance holds, their epochs,
and until when it may poll and write them."""

from __future__ import annotations

import pytest

from watcher.core.errors import LeaseLost
from watcher.state.leased_shards import LeasedShards

TTL = 15.0


def holding(epochs: dict[int, int], renewed_at: float = 0.0) -> LeasedShards:
    shards = LeasedShards("a")
    shards.taken(epochs)
    shards.renewed(set(epochs), renewed_at, TTL)
    return shards


@pytest.mark.parametrize(
    ("now", "view", "holds_1"),
    [
        (0.0, {1, 2}, True),  # just renewed
        (14.9, {1, 2}, True),  # within the lease
        (15.0, set(), False),  # may have lapsed: nothing is polled
        (99.0, set(), False),
    ],
)
def test_what_may_be_polled_follows_the_last_renewal(
    now: float, view: set[int], holds_1: bool
) -> None:
    shards = holding({1: 3, 2: 7})
    assert shards.view(now) == view
    assert shards.holds(1, now) is holds_1
    assert not shards.holds(5, 0.0)


def test_nothing_is_held_before_a_first_renewal() -> None:
    shards = LeasedShards("a")
    shards.taken({1: 1})
    assert shards.view(0.0) == frozenset() and len(shards) == 1


def test_the_view_is_the_same_object_until_a_shard_moves() -> None:
    shards = holding({1: 3, 2: 7})
    first = shards.view(1.0)
    assert shards.view(2.0) is first
    shards.renewed({1, 2}, 5.0, TTL)  # a renewal that kept everything moves nothing
    assert shards.view(6.0) is first
    shards.taken({4: 1})
    assert shards.view(6.0) is not first and shards.view(6.0) == {1, 2, 4}
    first = shards.view(6.0)
    shards.drop(4)
    assert shards.view(6.0) is not first and shards.view(6.0) == {1, 2}
    first = shards.view(6.0)
    shards.clear()
    assert shards.view(6.0) is not first and shards.view(6.0) == frozenset()


def test_a_renewal_loses_what_it_did_not_keep_and_extends_the_rest() -> None:
    shards = holding({1: 3, 2: 7, 3: 1})
    assert shards.renewed({1, 3}, 10.0, TTL) == {2}
    assert shards.view(24.0) == {1, 3}
    assert shards.shards == {1, 3}
    assert shards.renewed(set(), 20.0, TTL) == {1, 3}
    assert len(shards) == 0


@pytest.mark.parametrize(
    ("shard", "now", "lost_epoch"),
    [
        (1, 0.0, None),  # held: its epoch
        (1, 15.0, 3),  # held but may have lapsed: refused, naming the epoch it had
        (9, 0.0, -1),  # never held
    ],
)
def test_a_fenced_write_gets_the_epoch_or_is_refused(
    shard: int, now: float, lost_epoch: int | None
) -> None:
    shards = holding({1: 3, 2: 7})
    if lost_epoch is None:
        assert shards.epoch(shard, now) == 3
        return
    with pytest.raises(LeaseLost) as refused:
        shards.epoch(shard, now)
    assert (refused.value.shard, refused.value.owner, refused.value.epoch) == (
        shard,
        "a",
        lost_epoch,
    )


def test_a_flush_fences_the_epochs_of_the_shards_held_only() -> None:
    shards = holding({1: 3, 2: 7})
    assert shards.epochs([2, 5, 1]) == {2: 7, 1: 3}
    shards.drop(2)
    shards.drop(2)  # twice: nothing more
    assert shards.epochs([1, 2]) == {1: 3}
