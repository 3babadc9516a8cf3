"""One target's cadence: when to poll it next, and how active it has been.

After each poll of a target, ``after_poll`` takes the old cadence (``None`` for a target never
polled) and what the poll found, and returns the new one:

* activity (``events > 0``) brings the interval straight back to ``every``: a target that just
  moved is the likeliest to move again soon (deposits come in bursts);
* a quiet poll multiplies the interval by ``factor``, up to ``max_every``: each silent poll is
  more evidence of an idle target, and doubling reaches ``max_every`` in a few polls while
  costing at most twice the calls of the ideal schedule for a target that turns idle;
* the event rate is an exponentially weighted estimate (events per second, half-life
  ``half_life``), the input of the budget allocation; a new target starts at a prior rate.

A cadence is kept in the target's JSON state document, so it is plain floats with
``to_json``/``from_json``: a restart resumes each target's backoff where it was.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final, NamedTuple

DEFAULT_FACTOR: Final = 2.0
# An hour: long enough that a busy target keeps its estimate between its bursts, short enough
# that a finished burst stops drawing calls within a few hours.
DEFAULT_HALF_LIFE: Final = 3600.0
_FIELDS: Final = ("interval", "next_due", "rate", "seen_at")


class Cadence(NamedTuple):
    """A named tuple, not a frozen dataclass: one is built after every poll of an adaptive
    target and one read from its state at each poll, and a tuple is built several times
    faster (the scheduler's CPU at 100,000 targets is measured in ``bench/activity.py``)."""

    interval: float  # seconds between the last poll and the next
    next_due: float  # epoch seconds: poll again from then on
    rate: float  # estimated events per second (exponentially weighted)
    seen_at: float  # epoch seconds of the last poll, when ``rate`` was last updated

    def to_json(self) -> dict[str, float]:
        return {
            "interval": self.interval,
            "next_due": self.next_due,
            "rate": self.rate,
            "seen_at": self.seen_at,
        }

    @classmethod
    def from_json(cls, document: object) -> Cadence:
        """The inverse of ``to_json``. Raises ``ValueError`` for anything else (a state
        document written by hand or damaged): the caller then treats the target as new."""
        if type(document) is not dict and not isinstance(document, Mapping):
            raise ValueError(f"cadence: expected an object, got {type(document).__name__}")
        get = document.get
        interval, next_due, rate, seen_at = (
            get("interval"),
            get("next_due"),
            get("rate"),
            get("seen_at"),
        )
        # The common case first, in one test: four finite floats, as ``to_json`` wrote them.
        isfinite = math.isfinite
        if not (
            type(interval) is float
            and type(next_due) is float
            and type(rate) is float
            and type(seen_at) is float
            and isfinite(interval)
            and isfinite(next_due)
            and isfinite(rate)
            and isfinite(seen_at)
        ):
            return cls._checked(document)
        if interval <= 0 or rate < 0:
            raise ValueError(
                f"cadence: interval must be positive and rate not negative: {dict(document)}"
            )
        return cls(interval, next_due, rate, seen_at)

    @classmethod
    def _checked(cls, document: Mapping[str, object]) -> Cadence:
        """``from_json`` of anything but four floats: integers are taken, the rest raise."""
        values: list[float] = []
        for name in _FIELDS:
            value = document.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"cadence: {name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"cadence: {name} must be finite, got {value!r}")
            values.append(float(value))
        interval, next_due, rate, seen_at = values
        if interval <= 0 or rate < 0:
            raise ValueError(
                f"cadence: interval must be positive and rate not negative: {dict(document)}"
            )
        return cls(interval, next_due, rate, seen_at)


def updated_rate(
    previous: Cadence | None,
    *,
    now: float,
    events: int,
    prior_rate: float,
    half_life: float = DEFAULT_HALF_LIFE,
) -> float:
    """The event-rate estimate after a poll that found ``events`` since the previous one.

    The events observed over the elapsed time ``dt`` are weighted against the old estimate by
    how much of the old one has decayed in ``dt``: old weight ``w = 2^(-dt/half_life)``, new
    estimate ``w * old + (1 - w) * events / dt``. For ``dt`` far below the half-life this adds
    ``events * ln 2 / half_life``: each event adds a fixed amount, however soon the poll came,
    so polling faster does not inflate the estimate. A target never polled has no elapsed
    time to measure: its estimate is the prior.
    """
    if previous is None:
        return prior_rate
    elapsed = max(0.0, now - previous.seen_at)  # a clock stepping back counts as no time
    decay: float = 2.0 ** (-elapsed / half_life)
    if elapsed == 0.0:
        return previous.rate + events * math.log(2) / half_life
    return decay * previous.rate + (1.0 - decay) * events / elapsed


def after_poll(
    cadence: Cadence | None,
    *,
    now: float,
    events: int,
    every: float,
    max_every: float,
    prior_rate: float,
    factor: float = DEFAULT_FACTOR,
    half_life: float = DEFAULT_HALF_LIFE,
    allocated_interval: float | None = None,
) -> Cadence:
    """The cadence after a poll at ``now`` that found ``events`` new events.

    Without a budget (``allocated_interval`` None) the interval backs off as the module says.
    Under a budget, the allocation has already weighed this target's rate against all the
    others: a quiet poll takes ``allocated_interval`` (which may exceed ``max_every`` when the
    budget stretches every interval), and activity still resets to ``every`` until the next
    allocation, which sees the raised rate.
    """
    if not (
        0 < every <= max_every
        and factor > 1
        and events >= 0
        and prior_rate >= 0
        and half_life > 0
        and (allocated_interval is None or allocated_interval > 0)
    ):
        _refuse(every, max_every, factor, events, prior_rate, half_life, allocated_interval)
    if events > 0 or cadence is None:
        # A new target starts at `every`: its first polls are the baseline, and a quiet one
        # reaches `max_every` after a handful of polls.
        interval = every
    elif allocated_interval is not None:
        interval = allocated_interval
    else:
        # Clamped both ways: the rule's bounds may have changed since the cadence was stored.
        interval = min(max(cadence.interval * factor, every), max_every)
    rate = updated_rate(cadence, now=now, events=events, prior_rate=prior_rate, half_life=half_life)
    return Cadence(interval, now + interval, rate, now)


def _refuse(
    every: float,
    max_every: float,
    factor: float,
    events: int,
    prior_rate: float,
    half_life: float,
    allocated_interval: float | None,
) -> None:
    """Raises the ``ValueError`` that says which argument of ``after_poll`` is wrong."""
    if not 0 < every <= max_every:
        raise ValueError(f"need 0 < every <= max_every, got every={every}, max_every={max_every}")
    if not factor > 1:
        raise ValueError(f"backoff factor must be above 1, got {factor}")
    if not (events >= 0 and prior_rate >= 0 and half_life > 0):
        raise ValueError("events and prior_rate must not be negative, half_life must be positive")
    raise ValueError(f"allocated interval must be positive, got {allocated_interval}")


def rescheduled(cadence: Cadence, interval: float) -> Cadence:
    """The cadence with a new interval counted from its last poll (a new allocation applied):
    the next poll moves, the phase of the target's polls and its rate estimate stay."""
    if interval <= 0:
        raise ValueError(f"interval must be positive, got {interval}")
    return Cadence(
        interval=interval,
        next_due=cadence.seen_at + interval,
        rate=cadence.rate,
        seen_at=cadence.seen_at,
    )


def is_due(cadence: Cadence | None, now: float) -> bool:
    """Whether a target should be polled at ``now``. Never polled (``None``) -> due: its
    first poll is its baseline."""
    return cadence is None or now >= cadence.next_due
