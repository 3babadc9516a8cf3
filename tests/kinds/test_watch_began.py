"""A watch begins when it is asked for: at a target's first poll, what came after the watch
began (``WatchSince``) is notified and the rest is the baseline, however late the poll comes.

The cut-off per entry (blockTime, slot, neither), its placement by neighbours, the first
poll's paging back with ``before``, and the new_transactions step that words it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.config.rule_models import RuleBase
from watcher.core.events import WATCH_SINCE_KEY, StepOutcome, TargetState, WatchSince
from watcher.kinds import RULE_MODELS, SOURCES, word
from watcher.kinds.base import LedgerReader
from watcher.kinds.toolkit.signature_cursor import after_watch_began, new_signatures, split_at_watch
from watcher.ledger.models import SignatureEntry
from watcher.service.cadences import activity

from support.balances import Balances
from support.values import key, sig, signatures_page

ADDRESS = key("deposit")
SIGNATURES = SOURCES["signatures"]
RULE: RuleBase = RULE_MODELS["new_transactions"].model_validate(
    {"kind": "new_transactions", "name": "deposits", "addresses": [ADDRESS], "notify": ["ops"]}
)
BEGAN = 1_790_000_000.0  # the daemon's start
NOW = BEGAN + 600.0  # the first poll, ten minutes later


def at(label: str | int, slot: int, block_time: float | None) -> SignatureEntry:
    return SignatureEntry(
        signature=sig(label),
        slot=slot,
        blockTime=None if block_time is None else int(block_time),
    )


def waiting(since: WatchSince) -> TargetState:
    """The state the daemon keeps for a target whose watch began (through JSON, as stored)."""
    loaded: TargetState = json.loads(json.dumps({"v": 1, WATCH_SINCE_KEY: since.to_json()}))
    return loaded


# -- the cut-off, one entry ---------------------------------------------------------------------

SINCE = WatchSince(BEGAN + 0.6, slot=5000)
NO_SLOT = WatchSince(BEGAN + 0.6)


@pytest.mark.parametrize(
    ("entry", "since", "after"),
    [
        # By blockTime, whole seconds: the second the watch began in counts as after it.
        (at("long-before", 4000, BEGAN - 3600), SINCE, False),
        (at("second-before", 4999, BEGAN - 1), SINCE, False),
        (at("same-second", 4990, BEGAN), SINCE, True),
        (at("after", 5100, BEGAN + 30), SINCE, True),
        # blockTime wins over the slot when both could tell.
        (at("time-says-before", 5200, BEGAN - 10), SINCE, False),
        # No blockTime: by slot, when the slot at that moment is known (at or above: after).
        (at("slot-after", 5000, None), SINCE, True),
        (at("slot-before", 4999, None), SINCE, False),
        # Neither: cannot tell by itself.
        (at("unknowable", 5000, None), NO_SLOT, None),
    ],
)
def test_an_entry_is_after_the_watch_began_by_block_time_else_by_slot(
    entry: SignatureEntry, since: WatchSince, after: bool | None
) -> None:
    assert after_watch_began(entry, since) is after


# -- the cut-off, a first poll's entries ---------------------------------------------------------


def labels(entries: Sequence[SignatureEntry]) -> list[str]:
    names = {sig(name): name for name in LABELS}
    return [names[entry.signature] for entry in entries]


LABELS = ["new2", "new1", "mystery-new", "mystery-old", "old1", "old2", "lone"]


def test_an_entry_of_unknown_time_is_placed_by_the_entries_around_it() -> None:
    entries = [
        at("new2", 5300, BEGAN + 120),
        at("new1", 5200, BEGAN + 80),
        at("mystery-new", 5200, None),  # in the slot of a new one: new
        at("mystery-old", 4800, None),  # below an old one's slot: history
        at("old1", 4900, BEGAN - 40),
        at("old2", 4700, BEGAN - 120),
    ]
    new, old = split_at_watch(entries, NO_SLOT)
    assert labels(new) == ["new2", "new1", "mystery-new"]
    assert labels(old) == ["old1", "mystery-old", "old2"]


def test_an_entry_no_neighbour_or_slot_can_place_is_notified_not_dropped() -> None:
    # Between the newest old entry and the oldest new one, or alone: notified (marked
    # "time unknown" in the message), never taken as history.
    between = [at("new1", 5300, BEGAN + 5), at("lone", 5100, None), at("old1", 5000, BEGAN - 5)]
    assert labels(split_at_watch(between, NO_SLOT)[0]) == ["new1", "lone"]
    assert labels(split_at_watch([at("lone", 5100, None)], NO_SLOT)[0]) == ["lone"]
    # With the slot at that moment known, the slot decides.
    assert labels(split_at_watch([at("lone", 4000, None)], SINCE)[1]) == ["lone"]


@given(
    times=st.lists(
        st.one_of(st.none(), st.integers(min_value=-500, max_value=500)), min_size=1, max_size=40
    ),
    since_slot=st.one_of(st.none(), st.integers(min_value=0, max_value=40)),
)
def test_every_entry_is_either_new_or_history_and_dated_ones_by_their_time(
    times: list[int | None], since_slot: int | None
) -> None:
    # Slots ascending with time (one entry per slot): the ledger's order.
    ordered = sorted(times, key=lambda t: -1000 if t is None else t)
    entries = [at(f"e{n}", n, None if t is None else BEGAN + t) for n, t in enumerate(ordered)]
    since = WatchSince(BEGAN, since_slot)
    new, old = split_at_watch(reversed(entries), since)
    assert sorted(e.signature for e in [*new, *old]) == sorted(e.signature for e in entries)
    assert not {e.signature for e in new} & {e.signature for e in old}
    for entry in entries:
        if entry.block_time is not None:
            assert (entry in new) == (entry.block_time >= BEGAN)
    assert [e.slot for e in new] == sorted((e.slot for e in new), reverse=True)


# -- the first poll: paging back, one notification, the baseline ---------------------------------


class Ledger(Balances):
    """getSignaturesForAddress over one history (newest first): ``before`` exclusive."""

    def __init__(self, entries: Sequence[SignatureEntry]) -> None:
        super().__init__()
        self.entries = list(entries)
        self.calls: list[dict[str, Any]] = []

    async def get_signatures_for_address(
        self,
        address: str,
        *,
        before: str | None = None,
        until: str | None = None,
        limit: int = 1000,
    ) -> list[SignatureEntry]:
        self.calls.append({"before": before, "until": until, "limit": limit})
        return signatures_page(self.entries, before=before, until=until, limit=limit)


async def first_poll(ledger: Ledger, state: TargetState | None) -> StepOutcome:
    observation = await SIGNATURES.observe(cast(LedgerReader, ledger), ADDRESS, state)
    outcome = SIGNATURES.step([RULE], ADDRESS, state, observation, NOW)
    return StepOutcome(outcome.state, tuple(word(alert, RULE) for alert in outcome.alerts))


def before_and_after(before: int, after: int) -> list[SignatureEntry]:
    """``before`` entries made in the hour before the watch began, then ``after`` made in the
    ten minutes since (several to a slot), newest first."""
    old = [at(f"old{n}", 4000 + n // 4, BEGAN - 3600 + n) for n in range(before)]
    new = [at(f"new{n}", 6000 + n // 4, BEGAN + 1 + n % 500) for n in range(after)]
    return list(reversed([*old, *new]))


async def test_a_quiet_target_s_first_poll_is_one_call_and_a_quiet_baseline() -> None:
    ledger = Ledger(before_and_after(50, 0))
    outcome = await first_poll(ledger, waiting(WatchSince(BEGAN)))
    assert ledger.calls == [{"before": None, "until": None, "limit": 1}]
    assert [call for call, _keys in ledger.balance_calls] == ["getMultipleAccounts"]  # baseline
    assert outcome.alerts == ()
    assert outcome.state["cursor"]["sig"] == ledger.entries[0].signature
    assert WATCH_SINCE_KEY not in outcome.state  # polled: no longer waiting


async def test_a_burst_in_the_waiting_window_is_one_notification_with_its_count() -> None:
    # 1,500 transactions landed between the start and the first poll: past the first page.
    ledger = Ledger(before_and_after(30, 1500))
    outcome = await first_poll(ledger, waiting(WatchSince(BEGAN)))
    assert [c["limit"] for c in ledger.calls] == [1, 1000, 1000]
    assert [c["before"] for c in ledger.calls[1:]] == [
        ledger.entries[0].signature,
        ledger.entries[1000].signature,
    ]
    assert len(outcome.alerts) == 1
    alert = outcome.alerts[0]
    assert alert.facts["count"] == 1500
    assert alert.title.startswith("[WARNING] deposits: 1500 new transactions on ")
    assert "Since the watch began at 2026-09-21T" in alert.body
    assert alert.body.splitlines()[-1] == "... and 1490 more"
    assert outcome.state["cursor"]["sig"] == ledger.entries[0].signature
    # The next poll starts from there: nothing is notified twice.
    again = await first_poll(ledger, json.loads(json.dumps(outcome.state)))
    assert again.alerts == ()
    assert ledger.calls[-1]["until"] == ledger.entries[0].signature


async def test_without_a_kept_start_the_first_poll_is_the_whole_baseline() -> None:
    # A rule test's first step (no daemon to keep the moment): the history is the baseline.
    ledger = Ledger(before_and_after(10, 5))
    outcome = await first_poll(ledger, None)
    assert ledger.calls == [{"before": None, "until": None, "limit": 1}]
    assert outcome.alerts == ()


async def test_entries_after_the_first_poll_are_new_as_ever() -> None:
    ledger = Ledger(before_and_after(10, 3))
    first = await first_poll(ledger, waiting(WatchSince(BEGAN)))
    assert first.alerts[0].facts["count"] == 3
    later = at("later", 9000, NOW + 5)
    ledger.entries.insert(0, later)
    fresh, _cursor = new_signatures(None, [[later]])
    outcome = await first_poll(ledger, json.loads(json.dumps(first.state)))
    assert [a.facts["newest_signature"] for a in outcome.alerts] == [fresh[0].signature]
    assert outcome.alerts[0].facts["count"] == 1
    assert "watch_began" not in outcome.alerts[0].facts


def test_a_first_poll_is_no_activity_for_the_cadence_even_with_news() -> None:
    # A target awaiting its first poll backs off from its baseline, as before.
    assert activity(waiting(WatchSince(BEGAN)), {"cursor": {"sig": "x"}}, ("cursor",)) == 0
    assert activity({"cursor": {"sig": "y"}}, {"cursor": {"sig": "x"}}, ("cursor",)) == 1
