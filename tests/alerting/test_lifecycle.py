"""Episodes of state kinds: Prometheus-like pending/firing/resolved, blips, flapping, reminders."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.alerting.lifecycle import Episode, Transition, advance, dedup_key

Observations = Sequence[tuple[float, bool | None]]


def run(
    observations: Observations,
    *,
    for_: float = 0,
    keep_firing_for: float = 0,
    repeat: float | None = None,
) -> tuple[Episode, list[tuple[float, Transition]]]:
    episode: Episode | None = None
    said: list[tuple[float, Transition]] = []
    for index, (now, active) in enumerate(observations):
        episode, transitions = advance(
            episode,
            active,
            now,
            for_=for_,
            keep_firing_for=keep_firing_for,
            repeat=repeat,
            first_observation=index == 0,
        )
        said += [(now, transition) for transition in transitions]
    assert episode is not None
    return episode, said


T, F, U = True, False, None

CASES = [
    pytest.param([(0, T)], {}, [(0, "firing")], id="for 0 fires at once"),
    pytest.param([(0, F), (30, F)], {}, [], id="inactive from the start is quiet"),
    pytest.param([(0, T), (30, T), (60, T)], {"for_": 60}, [(60, "firing")], id="fires after for"),
    pytest.param(
        [(0, T), (30, F), (60, T), (90, T), (120, T)],
        {"for_": 60},
        [(120, "firing")],
        id="a blip while pending never fires and restarts the clock",
    ),
    pytest.param([(0, T), (30, F)], {}, [(0, "firing"), (30, "resolved")], id="resolves"),
    pytest.param(
        [(0, T), (30, F), (60, T), (90, F), (120, F), (150, F)],
        {"keep_firing_for": 60},
        [(0, "firing"), (150, "resolved")],
        id="flapping inside keep_firing_for sends nothing",
    ),
    pytest.param(
        [(0, T), (50, T), (100, T), (150, T), (200, T), (250, F)],
        {"repeat": 100},
        [(0, "firing"), (100, "repeat"), (200, "repeat"), (250, "resolved")],
        id="repeat every interval since the last notification",
    ),
    pytest.param(
        [(0, T), (30, U), (60, U), (90, F)],
        {},
        [(0, "firing"), (90, "resolved")],
        id="unknown while firing neither resolves nor repeats",
    ),
    pytest.param(
        [(0, T), (30, U), (60, T)],
        {"for_": 60},
        [(60, "firing")],
        id="unknown while pending keeps the pending clock",
    ),
    pytest.param([(0, U), (30, U)], {}, [], id="only unknowns: nothing"),
    pytest.param(
        [(0, T), (30, F), (60, T), (90, F)],
        {},
        [(0, "firing"), (30, "resolved"), (60, "firing"), (90, "resolved")],
        id="a second episode fires and resolves again",
    ),
]


@pytest.mark.parametrize(("observations", "params", "expected"), CASES)
def test_lifecycle_table(
    observations: Observations, params: dict[str, float], expected: list[tuple[float, str]]
) -> None:
    assert run(observations, **params)[1] == expected


def test_episode_numbers_and_dedup_keys_are_distinct_per_episode() -> None:
    keys = []
    episode: Episode | None = None
    for now, active in [(0, T), (10, T), (20, T), (30, F), (40, T)]:
        episode, transitions = advance(episode, active, now, for_=0, keep_firing_for=0, repeat=10)
        keys += [dedup_key("r", "S", episode, t) for t in transitions]
    assert keys == [
        "r|S|1|firing",
        "r|S|1|repeat-1",
        "r|S|1|repeat-2",
        "r|S|1|resolved",
        "r|S|2|firing",
    ]


def test_a_resolved_episode_keeps_when_it_started_and_ended() -> None:
    episode, said = run([(0, T), (100, T), (190, F)])
    assert said[-1] == (190, "resolved")
    assert episode.status == "inactive"
    assert episode.firing_since == 0 and episode.resolved_at == 190


def test_episode_survives_json() -> None:
    episode, _ = run([(0, T), (5, F)], keep_firing_for=60)
    assert episode.status == "firing" and episode.inactive_since == 5
    again = Episode.from_json(json.loads(json.dumps(episode.to_json())))
    assert again == episode
    # Restored from storage, it resolves on time and does not fire again.
    _, transitions = advance(again, False, 65, for_=0, keep_firing_for=60, repeat=None)
    assert transitions == ["resolved"]


observation_lists = st.lists(st.sampled_from([True, False, None]), min_size=1, max_size=40)


@given(
    actives=observation_lists,
    for_=st.sampled_from([0, 10, 25]),
    keep=st.sampled_from([0, 10, 25]),
    repeat=st.sampled_from([None, 10, 35]),
)
def test_firing_and_resolved_alternate(
    actives: list[bool | None], for_: float, keep: float, repeat: float | None
) -> None:
    observations = [(10.0 * i, active) for i, active in enumerate(actives)]
    episode, said = run(observations, for_=for_, keep_firing_for=keep, repeat=repeat)
    firing = False
    for _, transition in said:
        if transition == "firing":
            assert not firing
            firing = True
        elif transition == "resolved":
            assert firing
            firing = False
        else:
            assert firing  # reminders only inside an episode
    assert (episode.status == "firing") == firing


@given(actives=st.lists(st.booleans(), min_size=1, max_size=40))
def test_without_delays_fires_on_each_rising_edge(actives: list[bool]) -> None:
    observations = [(10.0 * i, active) for i, active in enumerate(actives)]
    _, said = run(observations)
    rising = [10.0 * i for i, a in enumerate(actives) if a and (i == 0 or not actives[i - 1])]
    assert [now for now, t in said if t == "firing"] == rising


def test_no_reminder_while_the_condition_is_not_holding() -> None:
    _, said = run([(0, T), (100, F), (130, T)], keep_firing_for=60, repeat=100)
    assert said == [(0, "firing"), (130, "repeat")]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    st.sampled_from(["inactive", "pending", "firing"]),
    st.integers(0, 5),
    st.none() | st.floats(0, 2e9),
    st.dictionaries(st.text(max_size=3), json_values, max_size=4),
    st.dictionaries(st.text(max_size=3), json_values, max_size=4),
)
def test_an_episodes_json_is_what_asdict_makes_and_shares_nothing_with_it(
    status: str,
    number: int,
    since: float | None,
    details: dict[str, object],
    active: dict[str, object],
) -> None:
    episode = Episode(
        status=status,  # type: ignore[arg-type]
        number=number,
        firing_since=since,
        details=details,
        active_details=active,
    )
    made = episode.to_json()
    assert made == dataclasses.asdict(episode)
    assert list(made) == [field.name for field in dataclasses.fields(Episode)]
    assert made["details"] is not details and made["active_details"] is not active
    assert Episode.from_json(made) == episode
