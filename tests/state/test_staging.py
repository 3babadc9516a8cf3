"""``HeldStates`` (watcher.state.targets), the staged and prefetched states both engines hold:
which copy a load returns after each sequence of stages, prefetches, commits and flushes."""

from __future__ import annotations

from typing import Any

import pytest

from watcher.state.targets import MISS, HeldStates

S = "signatures"  # the source of every step but those written "votes: ..."


def run(states: HeldStates, step: str) -> Any:
    """One step of a table row: ``stage t=1`` (the state ``{"v": 1}``), ``prefetch t=0 u=none``
    (a chunk read: ``t``'s state ``{"v": 0}``, ``u`` without one), ``written t`` (a committed
    step), ``take``, ``flushed``, ``failed`` or ``load t``, of ``votes`` when written ``votes:
    ...``. A load returns what it read, as the tables write it: ``1`` for ``{"v": 1}``, ``none``
    or ``miss``."""
    source, _, step = step.rpartition(": ")
    source = source or S
    verb, *args = step.split()
    pairs = [arg.split("=") for arg in args]
    if verb == "stage":
        [(target, v)] = pairs
        states.stage(source, target, {"v": int(v)}, 1.0)
    elif verb == "prefetch":
        chunk = {t: None if v == "none" else f'{{"v":{v}}}' for t, v in pairs}
        states.prefetched(source, chunk)
    elif verb == "written":
        states.written(source, args[0])
    elif verb in ("take", "flushed", "failed"):
        getattr(states, verb)()
    elif verb == "load":
        found = states.load(source, args[0])
        return "miss" if found is MISS else "none" if found is None else str(found["v"])
    else:
        raise AssertionError(step)
    return None


# (what it shows, the steps, what the loads read in order)
ROWS = [
    ("nothing held: the database is read",
     "load t", "miss"),
    ("a staged state is loaded, again and again",
     "stage t=1; load t; load t", "1 1"),
    ("a prefetched state is taken once",
     "prefetch t=0; load t; load t", "0 miss"),
    ("prefetched without a state: none, once",
     "prefetch t=none; load t; load t", "none miss"),
    ("staging drops the prefetched copy",
     "prefetch t=0; stage t=1; take; flushed; load t", "miss"),
    ("a committed step drops the staged copy",
     "stage t=1; written t; load t", "miss"),
    ("a committed step drops the prefetched copy",
     "prefetch t=0; written t; load t", "miss"),
    ("a commit leaves the other targets' copies",
     "prefetch t=0 u=9; stage w=2; written t; load u; load w", "9 2"),
    ("a state being flushed is loaded till the end",
     "stage t=1; take; load t; flushed; load t", "1 miss"),
    ("staged during a flush: the newer one is loaded",
     "stage t=1; take; stage t=2; load t", "2"),
    ("a failed flush stages its states again",
     "stage t=1; take; failed; load t; take; flushed; load t", "1 miss"),
    ("a failed flush never overwrites a newer state",
     "stage t=1; take; stage t=2; failed; load t", "2"),
    ("a new chunk replaces the source's last one",
     "prefetch t=0; prefetch u=1; load t; load u", "miss 1"),
    ("each source has its own chunk",
     "prefetch t=0; votes: prefetch t=5; votes: load t; load t", "5 0"),
    ("each source has its own staged states",
     "prefetch t=0; stage t=1; votes: load t; load t", "miss 1"),
    ("another source's commit drops nothing here",
     "stage t=1; prefetch u=2; votes: written t; votes: written u; load t; load u", "1 2"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("steps", "loads"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS]
)
def test_which_copy_a_load_returns(steps: str, loads: str) -> None:
    states = HeldStates(limit=10)
    read = [run(states, step) for step in steps.split("; ")]
    assert [found for found in read if found is not None] == loads.split()


def test_staging_asks_for_a_flush_at_the_limit_and_a_flush_takes_every_staged_state() -> None:
    states = HeldStates(limit=3)
    asks = [states.stage(S, f"t{n}", {"n": n}, float(n)) for n in range(3)]
    assert asks == [False, False, True]
    states.stage(S, "t0", {"n": "again"}, 5.0)  # restaged: one row, the newest
    assert states.staged == 3
    rows = states.take()
    assert rows == [
        (S, "t0", '{"n":"again"}', 5.0),
        (S, "t1", '{"n":1}', 1.0),
        (S, "t2", '{"n":2}', 2.0),
    ]
    assert states.staged == 0
    assert states.flushing(S, "t1") and not states.flushing(S, "t3")
    states.flushed()
    assert not states.flushing(S, "t1")
    assert states.take() == []


def test_a_failed_flush_is_taken_again_whole() -> None:
    states = HeldStates(limit=10)
    states.stage(S, "a", {"v": 1}, 1.0)
    states.stage(S, "b", {"v": 1}, 1.0)
    first = states.take()
    states.stage(S, "b", {"v": 2}, 2.0)
    states.stage(S, "c", {"v": 2}, 2.0)
    states.failed()
    assert sorted(states.take()) == sorted(
        [first[0], (S, "b", '{"v":2}', 2.0), (S, "c", '{"v":2}', 2.0)]
    )
