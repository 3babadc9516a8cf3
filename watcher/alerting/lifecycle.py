"""Episodes of state kinds (delinquency, drift, and any future condition): pure state machine.

The semantics follow Prometheus alerting rules:

- inactive -> pending when the condition holds; pending -> firing once it has held for ``for_``
  seconds (``for_ = 0`` fires on the first observation where it holds);
- pending -> inactive without any message when it stops holding (a short blip never fires);
- firing -> resolved (and inactive) once the condition has stopped holding for
  ``keep_firing_for`` seconds, counted from the first observation where it no longer held
  (flapping inside that window sends nothing);
- while firing, a "repeat" every ``repeat`` seconds since the last notification, sent on an
  observation where the condition holds;
- an unknown observation (``active is None``, e.g. a node reporting no version) changes nothing:
  it is not evidence either way.

State kinds do not baseline: a condition that already holds at start-up fires as usual. An
episode is stored in the target's state as JSON (``Episode.to_json``), so a restart neither
re-announces a firing episode nor loses a pending resolution.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar

from watcher.alerting.messages import RuleView, episode_facts, make_alert
from watcher.core.events import AlertMessage, Reason, StepOutcome, TargetState

Status = Literal["inactive", "pending", "firing"]
Transition = Literal["firing", "resolved", "repeat"]

STATE_VERSION = 1


@dataclass(frozen=True)
class Episode:
    """Where one (rule, subject) stands. ``number`` counts firing episodes (1, 2, ...): it makes
    the dedup keys of each episode distinct across the whole history."""

    status: Status = "inactive"
    number: int = 0
    pending_since: float | None = None
    # When the condition was first seen in this episode (its pending start): what reminders and
    # resolutions count from. Kept after resolution, like ``firing_since``; None in episodes
    # stored before it was kept (``firing_since`` stands in).
    onset: float | None = None
    firing_since: float | None = None  # kept after resolution: start of the last episode
    inactive_since: float | None = None  # while firing: first observation where it stopped
    last_active: float | None = None  # last observation where the condition held
    last_notified: float | None = None
    repeats: int = 0  # reminders sent in the current episode
    resolved_at: float | None = None
    details: dict[str, Any] = field(default_factory=dict)  # facts of the last observation
    # facts of the last observation where the condition held: what a resolution reports it was
    active_details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``dataclasses.asdict``, made faster for what an episode holds (JSON values): a poll
        of each of 10,000 balances stores one, and ``asdict`` took a fifth of such a sweep."""
        return {name: _copied(getattr(self, name)) for name in _EPISODE_FIELDS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Episode:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


_EPISODE_FIELDS = tuple(Episode.__dataclass_fields__)
_ATOMS = frozenset({str, int, float, bool, type(None)})


def _copied(value: Any) -> Any:
    """A copy as ``asdict`` makes it: dicts, lists and tuples anew, atoms as they are."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {_copied(key): _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    return asdict(Episode(details={"": value}))["details"][""]  # anything else: as asdict does


def advance(
    episode: Episode | None,
    active: bool | None,
    now: float,
    *,
    for_: float,
    keep_firing_for: float,
    repeat: float | None,
    first_observation: bool = False,
) -> tuple[Episode, list[Transition]]:
    """One observation of a condition -> the episode after it and the notifications it implies.

    ``first_observation`` is accepted so callers say what they know, but it changes nothing on
    purpose: unlike event kinds, a state kind that already holds at start-up must fire.
    """
    del first_observation
    current = episode if episode is not None else Episode()
    if active is None:
        return current, []

    if current.status == "inactive":
        if not active:
            return current, []
        current = replace(current, status="pending", pending_since=now, onset=now, last_active=now)
        return _fire_if_due(current, now, for_)

    if current.status == "pending":
        if not active:
            return replace(current, status="inactive", pending_since=None), []
        return _fire_if_due(replace(current, last_active=now), now, for_)

    # firing
    if not active:
        inactive_since = current.inactive_since if current.inactive_since is not None else now
        if now - inactive_since >= keep_firing_for:
            resolved = replace(
                current,
                status="inactive",
                pending_since=None,
                inactive_since=None,
                resolved_at=now,
                last_notified=now,
            )
            return resolved, ["resolved"]
        # Inside keep_firing_for: still firing, but no reminder of a condition that is not
        # holding right now.
        return replace(current, inactive_since=inactive_since), []
    current = replace(current, last_active=now, inactive_since=None)
    last = current.last_notified if current.last_notified is not None else now
    if repeat is not None and repeat > 0 and now - last >= repeat:
        return replace(current, repeats=current.repeats + 1, last_notified=now), ["repeat"]
    return current, []


def _fire_if_due(pending: Episode, now: float, for_: float) -> tuple[Episode, list[Transition]]:
    since = pending.pending_since if pending.pending_since is not None else now
    if now - since < for_:
        return pending, []
    firing = replace(
        pending,
        status="firing",
        onset=since,
        number=pending.number + 1,
        firing_since=now,
        inactive_since=None,
        last_notified=now,
        repeats=0,
        resolved_at=None,
    )
    return firing, ["firing"]


def dedup_key(rule: str, subject: str, episode: Episode, transition: Transition) -> str:
    """``rule|subject|episode|firing``, ``...|resolved``, ``...|repeat-K`` (unique forever)."""
    reason = f"repeat-{episode.repeats}" if transition == "repeat" else transition
    return f"{rule}|{subject}|{episode.number}|{reason}"


# -- the driver shared by every state kind ---------------------------------------------------


class StateRuleView(RuleView, Protocol):
    """What the lifecycle reads of a state-kind rule (delinquent_validators, version_drift)."""

    @property
    def for_(self) -> float: ...

    @property
    def keep_firing_for(self) -> float: ...

    @property
    def repeat(self) -> float | None: ...


# One observation of one subject: is the condition active (None = unknown) and its facts.
Assessment = tuple[bool | None, dict[str, Any]]


# The rules a step assesses: a kind's own model, so that ``assess`` reads its fields typed.
Watching = TypeVar("Watching", bound=StateRuleView)


def step_episodes(
    rules: Sequence[Watching],
    state: TargetState | None,
    now: float,
    assess: Callable[[Watching], Mapping[str, Assessment]],
) -> StepOutcome:
    """Advance every (rule, subject) episode and say the transitions (as facts).

    State layout: ``{"v": 1, "episodes": {rule: {subject: Episode.to_json()}}}``. Episodes of
    rules or subjects no longer watched are kept: their numbers must never restart, or the
    dedup keys of a later episode would collide with old ones and be refused.
    """
    stored: Mapping[str, Mapping[str, Any]] = (state or {}).get("episodes", {})
    episodes: dict[str, dict[str, Any]] = {rule: dict(subs) for rule, subs in stored.items()}
    alerts: list[AlertMessage] = []
    for rule in rules:
        by_subject = episodes.setdefault(rule.name, {})
        first_observation = not by_subject
        for subject, (active, facts) in assess(rule).items():
            before = Episode.from_json(by_subject[subject]) if subject in by_subject else None
            after, transitions = advance(
                before,
                active,
                now,
                for_=rule.for_,
                keep_firing_for=rule.keep_firing_for,
                repeat=rule.repeat,
                first_observation=first_observation,
            )
            if active is not None:
                after = replace(after, details=facts)
            if active:
                after = replace(after, active_details=facts)
            by_subject[subject] = after.to_json()
            previous = before.active_details if before is not None else {}
            for transition in transitions:
                reason: Reason = transition
                alerts.append(
                    make_alert(
                        rule,
                        subject=subject,
                        reason=reason,
                        dedup_key=dedup_key(rule.name, subject, after, transition),
                        facts=episode_facts(facts, previous, after.to_json(), transition, now),
                    )
                )
    return StepOutcome(state={"v": STATE_VERSION, "episodes": episodes}, alerts=tuple(alerts))
