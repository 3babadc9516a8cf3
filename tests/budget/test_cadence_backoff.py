"""A target's cadence: back off while quiet, back to ``every`` on activity, kept across restarts."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.budget.backoff import (
    DEFAULT_HALF_LIFE,
    Cadence,
    after_poll,
    is_due,
    rescheduled,
    updated_rate,
)

EVERY = 30.0
MAX_EVERY = 900.0
PRIOR = 1e-5
T0 = 1_800_000_000.0


def poll(cadence: Cadence | None, now: float, events: int = 0) -> Cadence:
    return after_poll(
        cadence, now=now, events=events, every=EVERY, max_every=MAX_EVERY, prior_rate=PRIOR
    )


def quiet_polls(count: int) -> list[Cadence]:
    """The cadences of a new target polled ``count`` times, each when due, finding nothing."""
    cadences = [poll(None, T0)]
    while len(cadences) < count:
        cadences.append(poll(cadences[-1], cadences[-1].next_due))
    return cadences


def test_a_target_never_polled_is_due() -> None:
    assert is_due(None, T0)


def test_a_new_target_starts_at_every_with_the_prior_rate() -> None:
    assert poll(None, T0) == Cadence(interval=EVERY, next_due=T0 + EVERY, rate=PRIOR, seen_at=T0)


def test_a_quiet_target_doubles_its_interval_up_to_max_every() -> None:
    intervals = [cadence.interval for cadence in quiet_polls(9)]
    assert intervals == [30.0, 60.0, 120.0, 240.0, 480.0, 900.0, 900.0, 900.0, 900.0]


def test_a_target_is_due_from_next_due_on() -> None:
    cadence = poll(None, T0)
    assert not is_due(cadence, T0 + EVERY - 0.001)
    assert is_due(cadence, T0 + EVERY)
    assert is_due(cadence, T0 + 10 * EVERY)


@pytest.mark.parametrize("backed_off_polls", [1, 3, 6, 20])
def test_activity_brings_a_backed_off_target_straight_back_to_every(backed_off_polls: int) -> None:
    quiet = quiet_polls(backed_off_polls)[-1]
    busy = poll(quiet, quiet.next_due + 5.0, events=1)
    assert busy.interval == EVERY
    assert busy.next_due == quiet.next_due + 5.0 + EVERY
    assert busy.rate > quiet.rate


def test_bounds_changed_since_the_cadence_was_stored_apply_at_once() -> None:
    stored = Cadence(interval=3600.0, next_due=T0, rate=0.0, seen_at=T0 - 3600.0)
    assert poll(stored, T0).interval == MAX_EVERY
    tiny = Cadence(interval=1.0, next_due=T0, rate=0.0, seen_at=T0 - 1.0)
    assert poll(tiny, T0).interval == EVERY


def test_under_a_budget_a_quiet_poll_takes_the_allocated_interval_and_activity_every() -> None:
    cadence = poll(None, T0)
    kwargs = {"every": EVERY, "max_every": MAX_EVERY, "prior_rate": PRIOR}
    quiet = after_poll(cadence, now=T0 + 30, events=0, allocated_interval=1620.0, **kwargs)
    assert (quiet.interval, quiet.next_due) == (1620.0, T0 + 30 + 1620.0)  # beyond max_every
    busy = after_poll(quiet, now=T0 + 1650, events=2, allocated_interval=1620.0, **kwargs)
    assert busy.interval == EVERY


def test_a_new_allocation_moves_the_next_poll_from_the_last_one() -> None:
    cadence = poll(None, T0)
    moved = rescheduled(cadence, 400.0)
    assert moved == Cadence(interval=400.0, next_due=T0 + 400.0, rate=PRIOR, seen_at=T0)
    with pytest.raises(ValueError, match="interval must be positive"):
        rescheduled(cadence, 0.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"every": 0.0}, "need 0 < every <= max_every"),
        ({"every": 60.0, "max_every": 30.0}, "need 0 < every <= max_every"),
        ({"factor": 1.0}, "backoff factor must be above 1"),
        ({"events": -1}, "must not be negative"),
        ({"prior_rate": -1.0}, "must not be negative"),
        ({"half_life": 0.0}, "half_life must be positive"),
        ({"allocated_interval": 0.0}, "allocated interval must be positive"),
    ],
)
def test_nonsense_parameters_are_refused(kwargs: dict[str, float], message: str) -> None:
    arguments: dict[str, float] = {
        "now": T0,
        "events": 0,
        "every": EVERY,
        "max_every": MAX_EVERY,
        "prior_rate": PRIOR,
    } | kwargs
    with pytest.raises(ValueError, match=message):
        after_poll(None, **arguments)  # type: ignore[arg-type]


# -- the rate estimate ------------------------------------------------------------------------


def test_a_steady_rate_is_estimated_whatever_the_polling() -> None:
    # An event every 100 s; polls every 30 s find 0 or 1, polls every 900 s find 9.
    for interval in (30.0, 100.0, 900.0):
        cadence = Cadence(interval=interval, next_due=T0, rate=PRIOR, seen_at=T0)
        for poll_number in range(1, int(20 * DEFAULT_HALF_LIFE / interval)):
            elapsed = poll_number * interval
            events = int(elapsed // 100) - int((elapsed - interval) // 100)
            cadence = updated_cadence(cadence, T0 + elapsed, events)
        assert cadence.rate == pytest.approx(0.01, rel=0.02)


def updated_cadence(cadence: Cadence, now: float, events: int) -> Cadence:
    rate = updated_rate(cadence, now=now, events=events, prior_rate=PRIOR)
    return Cadence(interval=cadence.interval, next_due=now, rate=rate, seen_at=now)


def test_quiet_halves_the_estimate_each_half_life() -> None:
    cadence = Cadence(interval=MAX_EVERY, next_due=T0, rate=0.02, seen_at=T0)
    rate = updated_rate(cadence, now=T0 + DEFAULT_HALF_LIFE, events=0, prior_rate=PRIOR)
    assert rate == pytest.approx(0.01)


def test_an_event_adds_the_same_whether_polled_soon_or_not_at_all_later() -> None:
    cadence = Cadence(interval=EVERY, next_due=T0, rate=0.0, seen_at=T0)
    at_once = updated_rate(cadence, now=T0, events=1, prior_rate=PRIOR)
    soon = updated_rate(cadence, now=T0 + 1e-3, events=1, prior_rate=PRIOR)
    assert at_once == pytest.approx(math.log(2) / DEFAULT_HALF_LIFE)
    assert soon == pytest.approx(at_once, rel=1e-6)


def test_a_clock_stepping_back_counts_as_no_time() -> None:
    cadence = Cadence(interval=EVERY, next_due=T0, rate=0.5, seen_at=T0)
    assert updated_rate(cadence, now=T0 - 60, events=0, prior_rate=PRIOR) == 0.5


# -- state: JSON -------------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)
cadences = st.builds(
    Cadence,
    interval=st.floats(min_value=1e-3, max_value=1e9),
    next_due=finite,
    rate=st.floats(min_value=0.0, max_value=1e9),
    seen_at=finite,
)


@given(cadences)
def test_a_cadence_round_trips_through_json_unchanged(cadence: Cadence) -> None:
    assert Cadence.from_json(json.loads(json.dumps(cadence.to_json()))) == cadence


def test_a_restart_resumes_the_backoff_where_it_was() -> None:
    before = quiet_polls(4)[-1]  # 240 s
    stored = json.dumps({"cursor": "abc", "cadence": before.to_json()})
    resumed = Cadence.from_json(json.loads(stored)["cadence"])
    assert not is_due(resumed, before.next_due - 1)
    assert poll(resumed, resumed.next_due).interval == 480.0


def test_json_from_an_integer_writer_reads_as_floats() -> None:
    cadence = Cadence.from_json({"interval": 30, "next_due": 100, "rate": 0, "seen_at": 70})
    assert cadence == Cadence(30.0, 100.0, 0.0, 70.0)
    assert all(type(value) is float for value in cadence.to_json().values())


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "expected an object, got list"),
        ({"interval": 30.0, "next_due": 1.0, "rate": 0.0}, "seen_at must be a number, got None"),
        ({"interval": "30", "next_due": 1.0, "rate": 0.0, "seen_at": 0.0}, "interval must be"),
        ({"interval": True, "next_due": 1.0, "rate": 0.0, "seen_at": 0.0}, "interval must be"),
        ({"interval": 30.0, "next_due": math.inf, "rate": 0.0, "seen_at": 0.0}, "finite"),
        ({"interval": 0.0, "next_due": 1.0, "rate": 0.0, "seen_at": 0.0}, "positive"),
        ({"interval": 30.0, "next_due": 1.0, "rate": -1.0, "seen_at": 0.0}, "not negative"),
    ],
)
def test_a_damaged_cadence_is_refused(document: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Cadence.from_json(document)


# -- properties --------------------------------------------------------------------------------

bounds = st.tuples(
    st.floats(min_value=0.1, max_value=3600.0), st.floats(min_value=1.0, max_value=1000.0)
).map(lambda pair: (pair[0], pair[0] * pair[1]))
outcomes = st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=40)


@given(bounds, outcomes, st.floats(min_value=1.01, max_value=10.0))
def test_intervals_stay_within_bounds_back_off_monotonically_and_reset_on_events(
    pair: tuple[float, float], events_per_poll: list[int], factor: float
) -> None:
    every, max_every = pair
    cadence: Cadence | None = None
    now = T0
    for events in events_per_poll:
        previous = cadence
        cadence = after_poll(
            cadence,
            now=now,
            events=events,
            every=every,
            max_every=max_every,
            prior_rate=PRIOR,
            factor=factor,
        )
        assert every <= cadence.interval <= max_every
        assert cadence.next_due == now + cadence.interval
        assert cadence.rate >= 0
        if events or previous is None:
            assert cadence.interval == every
        else:
            assert cadence.interval == min(previous.interval * factor, max_every)
            assert cadence.interval >= previous.interval
        now = cadence.next_due
