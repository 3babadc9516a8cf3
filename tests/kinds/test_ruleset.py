"""The target registry: one call per target per interval, shared by every rule watching it."""

from __future__ import annotations

from array import array
from typing import Any

import base58
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from watcher.config import packed_keys
from watcher.config.address_files import RuleAddresses
from watcher.config.packed_keys import JoinedTargets, PackedAddresses, PickedTargets
from watcher.config.rule_models import RuleBase
from watcher.kinds import KINDS, RULE_MODELS, SOURCES, AnyRule
from watcher.kinds import ruleset as ruleset_module
from watcher.kinds.ruleset import Job, RuleSet


def key(number: int) -> str:
    """A valid, distinct pubkey per number."""
    return base58.b58encode(number.to_bytes(32, "big")).decode()


A, B, C, M, V = key(1), key(2), key(3), key(4), key(5)

_RULE: TypeAdapter[RuleBase] = TypeAdapter(AnyRule)


def rule(name: str, kind: str, every: str, **fields: Any) -> RuleBase:
    return _RULE.validate_python({"name": name, "kind": kind, "every": every, **fields})


def tx(name: str, every: str, *addresses: str) -> RuleBase:
    return rule(name, "new_transactions", every, addresses=list(addresses))


def test_two_rules_on_one_address_share_one_target_at_the_shorter_interval() -> None:
    slow, fast = tx("slow", "30s", A), tx("fast", "10s", A)
    rules = RuleSet([slow, fast])
    assert rules.jobs() == [Job(source="signatures", interval=10.0, targets=(A,))]
    assert rules.rules_for("signatures", A) == [slow, fast]
    assert rules.interval("signatures", A) == 10.0


def test_targets_are_grouped_by_interval_per_source() -> None:
    rules = RuleSet(
        [
            tx("t1", "10s", A, B),
            tx("t2", "30s", B, C),
            rule("w", "holder_changes", "1m", mints=[M]),
            rule("w2", "holder_changes", "10s", mints=[M]),
        ]
    )
    assert rules.jobs() == [
        Job(source="holders", interval=10.0, targets=(M,)),
        Job(source="signatures", interval=10.0, targets=(A, B)),
        Job(source="signatures", interval=30.0, targets=(C,)),
    ]
    assert rules.targets("signatures") == [A, B, C]
    assert [r.name for r in rules.rules_for("signatures", B)] == ["t1", "t2"]
    assert [r.name for r in rules.rules_for("signatures", C)] == ["t2"]
    assert rules.rules_for("signatures", M) == []
    assert rules.rules_for("holders", A) == []


def test_state_kinds_share_the_one_cluster_target_of_their_source() -> None:
    rules = RuleSet(
        [
            rule("d1", "delinquent_validators", "30s", validators=[V]),
            rule("d2", "delinquent_validators", "10s", validators=[A, V]),
            rule("drift", "version_drift", "5m", validators=[V]),
        ]
    )
    assert rules.jobs() == [
        Job(source="nodes", interval=300.0, targets=("cluster",)),
        Job(source="votes", interval=10.0, targets=("cluster",)),
    ]
    assert [r.name for r in rules.rules_for("votes", "cluster")] == ["d1", "d2"]
    assert [r.name for r in rules.rules_for("nodes", "cluster")] == ["drift"]


def test_rule_by_name() -> None:
    treasury = tx("treasury", "30s", A)
    rules = RuleSet([treasury])
    assert rules.rule("treasury") is treasury
    assert rules.rules == (treasury,)
    with pytest.raises(KeyError):
        rules.rule("nope")


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate rule name 'x'"):
        RuleSet([tx("x", "30s", A), tx("x", "10s", B)])


def test_no_rules_no_jobs() -> None:
    assert RuleSet([]).jobs() == []


def test_every_kind_has_a_source() -> None:
    # The source a kind names serves it (two kinds reading one answer share one source).
    assert {name: kind.source.name for name, kind in KINDS.items()} == {
        name: source_name for source_name, source in SOURCES.items() for name in source.rule_kinds
    }
    assert {name: model.kind_name() for name, model in RULE_MODELS.items()} == {
        name: name for name in KINDS
    }


_INTERVALS = ["500ms", "10s", "30s", "1m"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["new_transactions", "holder_changes", "delinquent_validators"]),
            st.sampled_from(_INTERVALS),
            st.sets(st.integers(min_value=1, max_value=8), min_size=1, max_size=4),
        ),
        max_size=12,
    )
)
def test_each_target_is_in_exactly_one_job_at_the_shortest_interval_asked(
    specs: list[tuple[str, str, set[int]]],
) -> None:
    watched = {"new_transactions": "addresses", "holder_changes": "mints"}
    rules = [
        rule(
            f"r{index}",
            kind,
            every,
            **{watched.get(kind, "validators"): [key(number) for number in sorted(numbers)]},
        )
        for index, (kind, every, numbers) in enumerate(specs)
    ]
    ruleset = RuleSet(rules)
    scheduled = [
        (job.source, target, job.interval) for job in ruleset.jobs() for target in job.targets
    ]
    expected: dict[tuple[str, str], float] = {}
    for r in rules:
        for target in r.targets:
            slot = (KINDS[r.kind].source.name, target)
            expected[slot] = min(expected.get(slot, float("inf")), r.every)
    assert sorted(scheduled) == sorted((s, t, i) for (s, t), i in expected.items())
    for (source, target), _ in expected.items():
        assert ruleset.rules_for(source, target) == [
            r for r in rules if target in r.targets and KINDS[r.kind].source.name == source
        ]


def backoff(name: str, every: str, max_every: str | None, *addresses: str) -> RuleBase:
    extra = {} if max_every is None else {"max_every": max_every}
    return rule(name, "new_transactions", every, addresses=list(addresses), **extra)


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        pytest.param(
            [backoff("a", "10s", "5m", A, B)],
            [Job("signatures", 10.0, (A, B), max_interval=300.0)],
            id="one-rule-backs-off",
        ),
        pytest.param(
            [backoff("a", "10s", "5m", A), backoff("b", "30s", None, A, B)],
            [Job("signatures", 10.0, (A,)), Job("signatures", 30.0, (B,))],
            id="a-rule-without-max-every-keeps-the-target-fixed",
        ),
        pytest.param(
            [backoff("a", "10s", "5m", A, B), backoff("b", "30s", "2m", B, C)],
            [
                Job("signatures", 10.0, (B,), max_interval=120.0),
                Job("signatures", 10.0, (A,), max_interval=300.0),
                Job("signatures", 30.0, (C,), max_interval=120.0),
            ],
            id="shortest-bounds-of-the-rules-watching-a-target",
        ),
        pytest.param(
            [backoff("a", "10s", None, A), backoff("b", "10s", "1m", B)],
            [Job("signatures", 10.0, (A,)), Job("signatures", 10.0, (B,), max_interval=60.0)],
            id="fixed-and-adaptive-of-one-interval-are-two-jobs",
        ),
    ],
)
def test_targets_sharing_both_bounds_form_one_job(
    rules: list[RuleBase], expected: list[Job]
) -> None:
    assert RuleSet(rules).jobs() == expected


def with_file(name: str, every: str, listed: list[str], packed: list[str]) -> RuleBase:
    """A new_transactions rule as read with an ``addresses_file`` (its addresses packed)."""
    addresses = RuleAddresses(tuple(listed), PackedAddresses(packed))
    return rule(name, "new_transactions", every, addresses=addresses)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(_INTERVALS),
            st.sets(st.integers(min_value=1, max_value=8), max_size=3),
            st.sets(st.integers(min_value=1, max_value=8), max_size=4),
        ).filter(lambda spec: bool(spec[1] or spec[2])),
        max_size=8,
    )
)
def test_addresses_files_and_lists_each_target_in_one_job_with_all_its_rules(
    specs: list[tuple[str, set[int], set[int]]],
) -> None:
    rules = [
        with_file(
            f"r{index}", every, [key(n) for n in sorted(listed)], [key(n) for n in packed - listed]
        )
        if packed - listed
        else tx(f"r{index}", every, *[key(n) for n in sorted(listed)])
        for index, (every, listed, packed) in enumerate(specs)
    ]
    ruleset = RuleSet(rules)
    scheduled = [(target, job.interval) for job in ruleset.jobs() for target in job.targets]
    expected: dict[str, float] = {}
    for r in rules:
        for target in r.targets:
            expected[target] = min(expected.get(target, float("inf")), r.every)
    assert sorted(scheduled) == sorted(expected.items())
    assert sorted(ruleset.targets("signatures")) == sorted(expected)
    for target in expected:
        watching = [r for r in rules if target in r.targets]
        assert ruleset.rules_for("signatures", target) == watching
        assert ruleset.interval("signatures", target) == expected[target]
        assert all(target in r.target_set for r in watching)
    assert ruleset.rules_for("signatures", key(9)) == []


def test_a_files_addresses_make_one_job_holding_them_packed() -> None:
    deposits = with_file("deposits", "10m", [A], [B, C])
    jobs = RuleSet([deposits]).jobs()
    assert [(job.interval, list(job.targets)) for job in jobs] == [(600.0, [A, B, C])]
    assert isinstance(jobs[0].targets, JoinedTargets)
    assert jobs == RuleSet([with_file("deposits", "10m", [A], [B, C])]).jobs()


def test_rules_with_few_packed_addresses_in_all_keep_every_str_each_list_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted over all the rules' lists, not per list: many short lists of a big watch list
    would otherwise keep a str of every address."""

    def kept_strs(rules: list[RuleBase]) -> bool:
        """Whether a second pass over each list gives the very strs of the first."""
        RuleSet(rules)
        packed = [r.targets.packed for r in rules if isinstance(r.targets, RuleAddresses)]
        made = [[p[i] for i in range(len(p))] for p in packed]
        return all(
            p[i] is first[i] for p, first in zip(packed, made, strict=True) for i in range(len(p))
        )

    monkeypatch.setattr(ruleset_module, "ALL_KEPT", 4)
    monkeypatch.setattr(packed_keys, "RECENT", 1)
    assert kept_strs([with_file("a", "10m", [], [A, B]), with_file("b", "10m", [], [C, M])])
    three = [with_file(name, "10m", [], [key(n), key(n + 10)]) for n, name in enumerate("abc")]
    assert not kept_strs(three)  # 6 in all: each list only its last few


def test_a_target_of_a_later_list_is_found_made_by_its_list_or_searched_for() -> None:
    first, second = with_file("a", "10m", [], [A, B]), with_file("b", "10m", [], [C, M])
    ruleset = RuleSet([first, second])
    assert isinstance(first.targets, RuleAddresses) and isinstance(second.targets, RuleAddresses)
    ours, theirs = second.targets.packed, first.targets.packed
    assert not ours.known_item(M)  # not made yet: the lookup searches
    assert ruleset.rules_for("signatures", M) == [second]
    made = ours[0]  # as a sweep makes it, just before the lookup
    assert ours.known_item(made) and not theirs.known_item(made)
    assert ruleset.rules_for("signatures", made) == [second]
    assert not ours.known_item(A) and ruleset.rules_for("signatures", A) == [first]


def test_picked_targets_are_those_at_their_positions_in_order() -> None:
    joined = JoinedTargets(((A,), PackedAddresses([B, C, M])))
    picked = PickedTargets(joined, array("I", [3, 0, 2]))
    assert list(picked) == [M, A, C] == [picked[0], picked[1], picked[2]]
    assert len(picked) == 3 and picked[1:] == [A, C] and picked[-1] == C
