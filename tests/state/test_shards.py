"""Targets in leased shards, the pure part (``watcher.state.shards``): the stable hash, the
shares and the planner; the properties hold for any holdings and any number of instances."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watcher.state.shards import (
    SHARDS,
    Plan,
    balanced_share,
    fair_share,
    plan,
    rank_of,
    shard_of,
)

# -- shard_of -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "target", "shard"),
    [
        ("balances", "Vote111111111111111111111111111111111111111", 621),
        ("vote_accounts", "*", 1011),
        ("transactions", "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM", 65),
        ("", "", 1015),
    ],
)
def test_shard_of_is_a_fixed_function_of_source_and_target(
    source: str, target: str, shard: int
) -> None:
    # Fixed values: a change of the hash would move every target to another owner at upgrade.
    assert shard_of(source, target) == shard


def test_shard_of_is_the_same_in_another_process_whatever_its_hash_seed() -> None:
    code = "from watcher.state.shards import shard_of; print(shard_of('balances', 'abc'))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert seen == {str(shard_of("balances", "abc"))}


def test_shard_of_keeps_source_and_target_apart() -> None:
    assert shard_of("ab", "c") != shard_of("a", "bc")


def test_shard_of_spreads_targets_over_every_shard() -> None:
    counts = Counter(shard_of("balances", f"address-{i}") for i in range(100_000))
    assert len(counts) == SHARDS
    mean = 100_000 / SHARDS  # ~98; a binomial's spread is ~10
    assert mean * 0.5 < min(counts.values()) and max(counts.values()) < mean * 1.5


@given(st.text(), st.text())
def test_shard_of_is_always_a_shard(source: str, target: str) -> None:
    assert 0 <= shard_of(source, target) < SHARDS


# -- shares ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("live", "share"), [(1, 1024), (2, 512), (3, 342), (4, 256), (5, 205), (1024, 1), (2000, 1)]
)
def test_fair_share_is_the_ceiling(live: int, share: int) -> None:
    assert fair_share(live) == share


def test_fair_share_needs_an_instance() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        fair_share(0)


@given(st.integers(min_value=1, max_value=3000))
def test_balanced_shares_sum_to_every_shard_each_the_floor_or_the_ceiling(live: int) -> None:
    parts = [balanced_share(live, rank) for rank in range(live)]
    assert sum(parts) == SHARDS
    assert set(parts) <= {SHARDS // live, fair_share(live)}


def test_balanced_share_of_three_and_ranks() -> None:
    assert [balanced_share(3, rank) for rank in range(3)] == [342, 341, 341]
    assert rank_of("b", ["c", "a", "b"]) == 1
    assert rank_of("b", ["c", "a"]) == 1  # counts itself live before its heartbeat is seen
    with pytest.raises(ValueError, match="not among"):
        balanced_share(3, 3)


# -- plan -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held", "takeable", "share", "expected"),
    [
        # nothing held: take up to the share, in the order offered
        (set(), [0, 1, 2, 3], 2, Plan(take=(0, 1), release=())),
        (set(), [7, 3, 5], 5, Plan(take=(7, 3, 5), release=())),  # fewer offered than wanted
        ({1, 2}, [0, 1, 3, 3, 4], 4, Plan(take=(0, 3), release=())),  # held and repeats passed
        ({1, 2}, [0, 3], 2, Plan(take=(), release=())),  # at the share: nothing
        # above the share: the highest-numbered surplus goes back, nothing taken
        ({5, 1, 9, 3}, [0, 2], 2, Plan(take=(), release=(5, 9))),
        ({5, 1, 9, 3}, [], 0, Plan(take=(), release=(1, 3, 5, 9))),
    ],
)
def test_plan_table(held: set[int], takeable: list[int], share: int, expected: Plan) -> None:
    assert plan(held, takeable, share) == expected


def test_plan_refuses_a_negative_share() -> None:
    with pytest.raises(ValueError, match="negative"):
        plan(set(), [], -1)


shard_sets = st.sets(st.integers(min_value=0, max_value=SHARDS - 1), max_size=SHARDS)


@given(shard_sets, st.lists(st.integers(min_value=0, max_value=SHARDS - 1)), st.integers(0, 1100))
def test_after_a_plan_never_above_the_share(
    held: set[int], takeable: list[int], share: int
) -> None:
    step = plan(held, takeable, share)
    after = (held - set(step.release)) | set(step.take)
    assert len(after) <= share
    assert len(after) == len(held) - len(step.release) + len(step.take)  # takes are new
    assert set(step.release) <= held and set(step.take) <= set(takeable)
    assert not (step.take and step.release)


def run_rounds(owners: dict[int, str | None], instances: list[str], *, balanced: bool) -> None:
    """Every instance in turn (one round) follows its plan against the shared lease table."""
    for me in instances:
        held = {shard for shard, owner in owners.items() if owner == me}
        free = [shard for shard in range(SHARDS) if owners[shard] is None]
        if balanced:
            share = balanced_share(len(instances), rank_of(me, instances))
        else:
            share = fair_share(len(instances))
        step = plan(held, free, share)
        for shard in step.release:
            owners[shard] = None
        for shard in step.take:
            assert owners[shard] is None
            owners[shard] = me


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=1, max_value=12),
    st.lists(st.integers(min_value=-1, max_value=15), min_size=SHARDS, max_size=SHARDS),
    st.booleans(),
)
def test_when_everyone_follows_its_plan_all_shards_are_covered_within_two_rounds(
    live: int, start: list[int], balanced: bool
) -> None:
    # Any starting table: free shards (-1), live instances' and dead ones' (their leases lapsed:
    # freed) shards, some instances far above their new share after others joined.
    instances = [f"i{n}" for n in range(live)]
    owners: dict[int, str | None] = {
        shard: (f"i{n}" if 0 <= n < live else None) for shard, n in enumerate(start)
    }
    for _ in range(2):
        run_rounds(owners, instances, balanced=balanced)
    assert all(owner is not None for owner in owners.values())
    counts = Counter(owners.values())
    for me in instances:
        cap = balanced_share(live, rank_of(me, instances)) if balanced else fair_share(live)
        assert counts[me] <= cap
    if balanced:
        assert set(counts.values()) <= {SHARDS // live, fair_share(live)}


def test_three_instances_settle_on_the_floor_or_the_ceiling_and_a_fourth_joins() -> None:
    owners: dict[int, str | None] = dict.fromkeys(range(SHARDS))
    instances = ["a", "b", "c"]
    run_rounds(owners, instances, balanced=True)
    assert Counter(owners.values()) == {"a": 342, "b": 341, "c": 341}
    instances.append("d")
    for _ in range(2):
        run_rounds(owners, instances, balanced=True)
    assert Counter(owners.values()) == {"a": 256, "b": 256, "c": 256, "d": 256}
    # With the ceiling for everyone, the last one gets what is left.
    owners = dict.fromkeys(range(SHARDS))
    run_rounds(owners, ["a", "b", "c"], balanced=False)
    assert Counter(owners.values()) == {"a": 342, "b": 342, "c": 340}
