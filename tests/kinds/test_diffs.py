"""Pure diffs: signature cursors and paging decisions, top-holder diffs, validator statuses."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable

from hypothesis import given
from hypothesis import strategies as st

from watcher.kinds.delinquent_validators import classify_validators
from watcher.kinds.holder_changes import BalanceChange, diff_holders, holder_changes, ranks
from watcher.kinds.toolkit.signature_cursor import (
    EMPTY_HISTORY,
    Cursor,
    baseline_cursor,
    new_signatures,
    page_is_last,
)
from watcher.ledger.models import SignatureEntry, VoteAccount, VoteAccounts

from support.values import entry, history, key, sig

# -- builders ---------------------------------------------------------------------------------


def sigs(entries: Iterable[SignatureEntry]) -> list[str]:
    return [e.signature for e in entries]


# -- cursor and paging -----------------------------------------------------------------------


def test_baseline_of_an_empty_history_makes_everything_later_new() -> None:
    assert baseline_cursor([]) == EMPTY_HISTORY
    fresh, cursor = new_signatures(EMPTY_HISTORY, [history(5)])
    assert len(fresh) == 5
    assert cursor.sig == history(5)[0].signature


def test_baseline_from_limit_one_treats_the_rest_of_that_slot_as_old() -> None:
    old = history(9, per_slot=3)  # slots 1000..1002, three entries each
    cursor = baseline_cursor(old[:1])
    assert cursor.slot == 1002 and cursor.slot_closed
    # A node ordering slot 1002 differently lists its other two entries again: still quiet.
    reordered = [old[2], old[1], old[0], *old[3:]]
    fresh, _ = new_signatures(cursor, [reordered])
    assert fresh == ()


def test_new_entries_are_newest_first_and_the_cursor_moves_to_the_newest_slot() -> None:
    old = history(6)
    cursor = baseline_cursor(old[:1])
    newer = [entry("n3", 1010), entry("n1", 1009), entry("n2", 1010)]
    fresh, moved = new_signatures(cursor, [newer + old])
    assert [e.slot for e in fresh] == [1010, 1010, 1009]
    assert moved.slot == 1010
    assert moved.sigs_at_slot == {sig("n3"), sig("n2")}
    assert moved.sig == sig("n3")
    assert not moved.slot_closed


def test_an_unseen_signature_at_the_cursor_slot_is_new_and_joins_the_slot_set() -> None:
    cursor = Cursor(sig("a"), 500, frozenset({sig("a")}))
    fresh, moved = new_signatures(cursor, [[entry("b", 500), entry("a", 500), entry("z", 499)]])
    assert sigs(fresh) == [sig("b")]
    assert moved.slot == 500 and moved.sigs_at_slot == {sig("a"), sig("b")}


def test_failed_transactions_are_still_new() -> None:
    cursor = Cursor(sig("a"), 500, frozenset({sig("a")}))
    failed = entry("f", 501, err={"InstructionError": [0, {"Custom": 1}]})
    fresh, _ = new_signatures(cursor, [[failed, entry("a", 500)]])
    assert sigs(fresh) == [failed.signature]


def test_page_is_last_table() -> None:
    cursor = Cursor(sig("c"), 100, frozenset({sig("c")}))
    full_newer = [entry(n, 200 + n) for n in range(3)]
    assert page_is_last(cursor, full_newer[:2], limit=3)  # short page
    assert not page_is_last(cursor, full_newer, limit=3)  # full, all newer than the cursor
    assert page_is_last(cursor, [*full_newer[:2], entry("c", 100)], limit=3)  # reached cursor
    assert page_is_last(cursor, [*full_newer[:2], entry("old", 99)], limit=3)  # older slot
    assert not page_is_last(None, full_newer, limit=3)
    assert not page_is_last(EMPTY_HISTORY, full_newer, limit=3)  # empty baseline: walk it all


def test_a_burst_of_1500_across_two_pages_is_1500_new_entries() -> None:
    everything = history(1503, per_slot=4)
    # Seen before the burst: the oldest 3 entries; the 4th shares their slot but is new.
    cursor = new_signatures(None, [everything[1500:]])[1]
    pages = [everything[:1000], everything[1000:]]  # second page runs past the cursor
    assert not page_is_last(cursor, pages[0], 1000)
    assert page_is_last(cursor, pages[1], 1000)
    fresh, moved = new_signatures(cursor, pages)
    assert len(fresh) == 1500
    assert sigs(fresh) == sigs(everything[:1500])
    assert moved.sig == everything[0].signature


# -- properties ------------------------------------------------------------------------------

slot_sizes = st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=12)


def _by_slots(sizes: list[int], start: int = 0) -> list[SignatureEntry]:
    out: list[SignatureEntry] = []
    label = 0
    for offset, size in enumerate(sizes):
        for _ in range(size):
            out.append(entry(f"{start}-{label}", 10_000 + start + offset))
            label += 1
    return list(reversed(out))


@given(old=slot_sizes, new=slot_sizes, seed=st.integers())
def test_order_inside_a_slot_does_not_change_what_is_new(
    old: list[int], new: list[int], seed: int
) -> None:
    old_entries = _by_slots(old)
    cursor = new_signatures(None, [old_entries])[1]
    newer = _by_slots(new, start=len(old))
    shuffled = sorted(newer + old_entries, key=lambda e: (-e.slot, random.Random(seed).random()))
    plain, _ = new_signatures(cursor, [newer + old_entries])
    permuted, _ = new_signatures(cursor, [shuffled])
    assert set(sigs(plain)) == set(sigs(permuted)) == set(sigs(newer))


@given(old=slot_sizes, new=slot_sizes, split=st.integers(min_value=1, max_value=40))
def test_refeeding_pages_after_the_cursor_moved_yields_nothing(
    old: list[int], new: list[int], split: int
) -> None:
    old_entries = _by_slots(old)
    cursor = new_signatures(None, [old_entries])[1]
    answer = _by_slots(new, start=len(old)) + old_entries
    pages = [answer[i : i + split] for i in range(0, len(answer), split)]
    fresh, moved = new_signatures(cursor, pages)
    again, same = new_signatures(moved, pages)
    assert again == () and same == moved
    assert len(fresh) == len(set(sigs(fresh)))


@given(old=slot_sizes, new=slot_sizes, seed=st.integers())
def test_a_node_ignoring_until_never_makes_seen_entries_new(
    old: list[int], new: list[int], seed: int
) -> None:
    old_entries = _by_slots(old)
    newer = _by_slots(new, start=len(old))
    cursor = new_signatures(None, [old_entries])[1]
    # The lagging node answers the newest entries, with the slots' insides shuffled.
    rng = random.Random(seed)
    answer = sorted(newer + old_entries, key=lambda e: (-e.slot, rng.random()))
    fresh, _ = new_signatures(cursor, [answer, answer])
    assert not set(sigs(fresh)) & set(sigs(old_entries))
    assert len(fresh) == len(newer)


# -- holders ---------------------------------------------------------------------------------

tops = st.dictionaries(
    st.sampled_from([key(n) for n in range(30)]), st.integers(0, 10**19), max_size=20
)


@given(top=tops)
def test_a_snapshot_compared_with_itself_has_no_changes(top: dict[str, int]) -> None:
    assert diff_holders(top, top) == ([], [])
    changes, refs = holder_changes(top, top, 0.01)
    assert changes == [] and refs == top


def test_entered_and_left_are_listed_largest_first() -> None:
    prev = {"a": 50, "b": 40, "c": 30}
    new = {"a": 50, "d": 10, "e": 60}
    entered, left = diff_holders(prev, new)
    assert entered == ["e", "d"]
    assert left == ["b", "c"]
    assert ranks(new) == {"e": 1, "a": 2, "d": 3}


def test_slow_creep_is_caught_against_the_amount_last_notified() -> None:
    refs = {"whale": 1000}
    total: list[BalanceChange] = []
    for amount in (1030, 1060, 1090, 1100):  # 3% steps: each below 10% of the last poll
        changes, refs = holder_changes(refs, {"whale": amount}, 10)
        total += changes
    assert total == [BalanceChange("whale", 1000, 1100)]
    assert refs == {"whale": 1100}


def test_holder_change_threshold_table() -> None:
    cases = [
        (1000, 1049, 5, False),
        (1000, 1050, 5, True),
        (1000, 950, 5, True),  # down counts as much as up
        (1000, 951, 5, False),
        (0, 1, 5, True),  # from nothing: any positive amount
        (0, 0, 5, False),
        (10**19, 10**19 - 10**16, 0.1, True),  # exact integers, no float rounding
        (10**19, 10**19 - 10**16 + 1, 0.1, False),
    ]
    for old, new, pct, counted in cases:
        changes, _ = holder_changes({"x": old}, {"x": new}, pct)
        assert bool(changes) is counted, (old, new, pct)


def test_new_accounts_get_a_baseline_and_gone_ones_lose_theirs() -> None:
    changes, refs = holder_changes({"gone": 5, "kept": 100}, {"kept": 101, "fresh": 7}, 5)
    assert changes == []
    assert refs == {"kept": 100, "fresh": 7}
    assert BalanceChange("x", 200, 150).pct == -25
    assert BalanceChange("x", 0, 150).pct is None


# -- validators ------------------------------------------------------------------------------


def vote_account(vote: str, node: str, stake: int, last_vote: int) -> VoteAccount:
    # Short labels for pubkeys: built, not validated (the wire's answers are validated).
    return VoteAccount.model_construct(
        vote_pubkey=vote, node_pubkey=node, activated_stake=stake, last_vote=last_vote
    )


def test_classify_validators_by_vote_or_identity_pubkey() -> None:
    accounts = VoteAccounts(
        current=[vote_account("V1", "N1", 100, 5000), vote_account("V2", "N2", 50, 4990)],
        delinquent=[vote_account("V3", "N3", 10, 4000)],
    )
    statuses = classify_validators(["V1", "N2", "N3", "V3", "NOPE"], accounts)
    assert {pk: s.state for pk, s in statuses.items()} == {
        "V1": "current",
        "N2": "current",
        "N3": "delinquent",
        "V3": "delinquent",
        "NOPE": "missing",
    }
    assert statuses["N3"].vote_pubkey == "V3" and statuses["V3"].node_pubkey == "N3"
    assert statuses["N3"].slots_behind == 1000
    assert statuses["N2"].activated_stake == 50
    assert statuses["NOPE"].vote_pubkey is None


def test_an_identity_with_one_current_vote_account_is_current() -> None:
    accounts = VoteAccounts(
        current=[vote_account("V1", "N", 100, 5000)],
        delinquent=[vote_account("V2", "N", 900, 10)],
    )
    assert classify_validators(["N"], accounts)["N"].state == "current"


def test_cursor_json_round_trip() -> None:
    cursor = Cursor(sig("a"), 7, frozenset({sig("a"), sig("b")}), slot_closed=True)
    assert Cursor.from_json(json.loads(json.dumps(cursor.to_json()))) == cursor
