from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.core.outbox_rows import Destination, url_id
from watcher.delivery.outbox import is_dead, next_attempt


@pytest.mark.parametrize(
    ("attempts", "jitter", "delay"),
    [
        (1, 0.0, 2.0),  # first retry within a few seconds
        (2, 0.0, 4.0),
        (3, 0.0, 8.0),
        (8, 0.0, 256.0),
        (9, 0.0, 300.0),  # capped
        (1000, 0.0, 300.0),  # no overflow however many attempts
        (1, 0.5, 2.25),  # jitter stretches by up to 25 %
        (9, 0.999, 300.0 * (1 + 0.25 * 0.999)),
    ],
)
def test_next_attempt_schedule(attempts: int, jitter: float, delay: float) -> None:
    assert next_attempt(attempts, 1000.0, jitter=jitter) == pytest.approx(1000.0 + delay)


def test_next_attempt_uses_the_given_settings() -> None:
    assert next_attempt(1, 0.0, jitter=0.0, first_retry=0.3, max_backoff=1.0) == 0.3
    assert next_attempt(3, 0.0, jitter=0.0, first_retry=0.3, max_backoff=1.0) == 1.0
    assert next_attempt(3, 0.0, jitter=0.0, factor=3.0) == 18.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attempts": 0, "jitter": 0.0},
        {"attempts": 1, "jitter": 1.0},
        {"attempts": 1, "jitter": -0.1},
        {"attempts": 1, "jitter": 0.0, "first_retry": 0.0},
        {"attempts": 1, "jitter": 0.0, "max_backoff": 1.0},
    ],
)
def test_next_attempt_rejects_nonsense(kwargs: dict[str, float]) -> None:
    attempts = int(kwargs.pop("attempts"))
    with pytest.raises(ValueError):
        next_attempt(attempts, 0.0, **kwargs)


@given(
    attempts=st.integers(min_value=1, max_value=10_000),
    jitter=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    first_retry=st.floats(min_value=0.01, max_value=60.0),
    factor=st.floats(min_value=1.0, max_value=10.0),
    cap_over_first=st.floats(min_value=1.0, max_value=1e6),
)
def test_backoff_grows_then_stays_under_the_cap(
    attempts: int, jitter: float, first_retry: float, factor: float, cap_over_first: float
) -> None:
    cap = first_retry * cap_over_first
    settings = {"jitter": jitter, "first_retry": first_retry, "factor": factor, "max_backoff": cap}
    this = next_attempt(attempts, 0.0, **settings)
    after = next_attempt(attempts + 1, 0.0, **settings)
    assert first_retry <= this <= after
    assert after <= cap * 1.25 * (1 + 1e-12)


def test_is_dead_after_the_deadline() -> None:
    assert not is_dead(created_at=100.0, now=100.0 + 86399.0)
    assert is_dead(created_at=100.0, now=100.0 + 86400.0)
    assert is_dead(created_at=0.0, now=11.0, deadline=10.0)


def test_destination_names_its_url_by_a_hash_and_never_shows_it() -> None:
    destination = Destination("ops", "json://user:SECRET123@127.0.0.1:1/")
    assert destination.url_id == url_id("json://user:SECRET123@127.0.0.1:1/")
    assert len(destination.url_id) == 16
    assert int(destination.url_id, 16) >= 0
    assert destination.url_id != Destination("ops", "json://127.0.0.1:1/").url_id
    assert "SECRET123" not in repr(destination)
