"""The rule file format (docs/rules.md): what every rule takes, as pydantic models.

Each kind's own model (``kind``, what it watches, ``every``'s default) lives in its module in
``watcher.kinds`` and derives from ``EventRule`` or ``StateRule`` here;
``watcher.kinds.KINDS`` lists them and builds their union, discriminated by ``kind``
(``watcher.kinds.AnyRule``); a rule of any kind is annotated ``RuleBase``. Every model is
frozen, ``extra="forbid"``. Durations are float seconds (``every``, ``for_`` (written
``for``), ``keep_firing_for``, ``repeat``, ``group_wait``, ``group_interval``); they dump back
as strings (``"30s"``), so a dumped rule validates again.

Event kinds (new_transactions, holder_changes) take the grouping keys ``group_wait``,
``group_interval``, ``max_per_hour``; state kinds (delinquent_validators, version_drift) take the
lifecycle keys ``for``, ``keep_firing_for``, ``repeat``. Each kind is polled by one source
(``watcher.kinds.source_of``). This module imports nothing of the kinds: the loader, above
them, does (``watcher.kinds.rule_files``).

Where a rule's alerts go (``channels_of``): its ``notify``, else the route of its severity,
else the default channels; ``watcher.alerting.pipeline`` applies it to alerts, and the loader
refuses a rule it would leave with no channel.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Container, Mapping, Sequence
from typing import Annotated, Any, Protocol, Self

from jinja2 import TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    model_validator,
)
from pydantic_core import PydanticCustomError

from watcher.core.base58check import is_base58_of
from watcher.core.durations import format_duration, parse_duration
from watcher.core.events import Severity

CLUSTER = "cluster"  # the one target of the votes and nodes sources

NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]+")
# The names of the built-in alerts (watcher.alerting.builtin): no rule may take them, so that a
# rule's episodes never mix with theirs.
RPC_UNHEALTHY = "rpc_unhealthy"
RPC_DISAGREEMENT = "rpc_disagreement"
CLUSTER_DELINQUENT_STAKE = "cluster_delinquent_stake"
RESERVED_NAMES = frozenset({RPC_UNHEALTHY, RPC_DISAGREEMENT, CLUSTER_DELINQUENT_STAKE})
CLUSTER_SUBJECT = "cluster"  # the subject of cluster_delinquent_stake


# -- value types -----------------------------------------------------------------------------


def check_pubkey(value: str) -> str:
    """A base58 string of 32 bytes (an account, mint, vote account or identity)."""
    if not is_base58_of(value, 32, remember=False):  # checked once a load: not cached
        raise ValueError(f"not a valid base58 public key: {value[:60]!r}")
    return value


def _pubkey_text(value: object) -> object:
    # YAML reads an all-digit pubkey (11111111111111111111111111111111, the system program) as
    # an integer; its digits are exactly the key. A float cannot be turned back: ask for quotes.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        raise ValueError("YAML read this pubkey as a number: put it in quotes")
    return value


def _no_duplicates(values: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(values)) == len(values):  # no index held per value (a million addresses)
        return values
    seen: dict[str, int] = {}
    for index, value in enumerate(values):
        if value in seen:
            # ``index`` makes the loader point at the repeated item's own line.
            raise PydanticCustomError(
                "duplicate_item",
                "{value} is listed twice (first as item {first})",
                {"value": repr(value), "first": seen[value], "index": index},
            )
        seen[value] = index
    return values


def _positive(seconds: float) -> float:
    if seconds <= 0:
        raise ValueError("must be more than 0")
    return seconds


_TEMPLATES = SandboxedEnvironment()


def _template(source: str) -> str:
    try:
        _TEMPLATES.parse(source)
    except TemplateSyntaxError as exc:
        detail = (exc.message or "invalid syntax").rstrip(".")
        raise ValueError(f"template syntax error: {detail} (template line {exc.lineno})") from None
    return source


SUMMARY_CHARS = 200
RUNBOOK_CHARS = 500


def _one_line(limit: int) -> AfterValidator:
    """Text shown as one line of every message: not blank, no line break, at most ``limit``."""

    def check(value: str) -> str:
        text = value.strip()
        if not text:
            raise ValueError("must not be empty")
        if "\n" in text or "\r" in text:
            raise ValueError("must be one line")
        if len(text) > limit:
            raise ValueError(f"at most {limit} characters (this one has {len(text)})")
        return text

    return AfterValidator(check)


def _rule_name(value: str) -> str:
    if not NAME_PATTERN.fullmatch(value):
        raise ValueError(f"{value!r}: use only letters, digits, - and _")
    if value in RESERVED_NAMES:
        raise ValueError(f"{value!r} is the name of a built-in alert; choose another")
    return value


Pubkey = Annotated[str, BeforeValidator(_pubkey_text), AfterValidator(check_pubkey)]
Pubkeys = Annotated[tuple[Pubkey, ...], Field(min_length=1), AfterValidator(_no_duplicates)]
Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
]
PositiveDuration = Annotated[Duration, AfterValidator(_positive)]
ChannelNames = Annotated[tuple[str, ...], Field(min_length=1), AfterValidator(_no_duplicates)]
Template = Annotated[str, AfterValidator(_template)]
Summary = Annotated[str, _one_line(SUMMARY_CHARS)]
Runbook = Annotated[str, _one_line(RUNBOOK_CHARS)]


# -- rules -----------------------------------------------------------------------------------


class RuleBase(BaseModel):
    """Keys every kind takes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Each kind's model narrows it to its own literal (the union's discriminator).
    kind: str
    name: Annotated[str, AfterValidator(_rule_name)]
    severity: Severity = "warning"
    # Channel names from the settings; None: routed by severity (routes, then default_channels).
    notify: ChannelNames | None = None
    title: Template | None = None
    body: Template | None = None
    # Shown in every message of the rule: one line under the title, and at the end.
    summary: Summary | None = None
    runbook: Runbook | None = None
    # How often its targets are polled; each kind's model gives its default.
    every: PositiveDuration

    # Where the rule was written (set by the loader): "FILE:LINE" for messages.
    _origin: str = PrivateAttr(default="")

    @property
    def origin(self) -> str:
        return self._origin

    @property
    def watched(self) -> Sequence[str]:
        """The pubkeys this rule is about (addresses, mints or validators)."""
        raise NotImplementedError

    @property
    def targets(self) -> Sequence[str]:
        """What its source polls for it: its addresses or mints, or the one ``cluster``."""
        return self.watched

    @functools.cached_property
    def target_set(self) -> Container[str]:
        """``targets`` for ``in``, made once: whether the rule watches a target is asked at
        every poll of it, and a tuple of 10,000 addresses takes a scan (10,000 polls a sweep).
        A frozenset; an ``addresses_file``'s packed addresses answer ``in`` themselves."""
        targets = self.targets
        if isinstance(targets, tuple | list):
            return frozenset(targets)
        return targets

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("target_set", None)  # made again from the copy's own targets
        return copy

    @classmethod
    def kind_name(cls) -> str:
        kind_field = cls.model_fields["kind"]
        return str(kind_field.default)


class EventRule(RuleBase):
    """Kinds whose alerts are one-off events, gathered into digests per destination
    (``watcher.delivery.digest``)."""

    # 2 s: a single event still arrives within seconds, and what one poll round of many
    # addresses turns up (a sweep takes about that long) goes out as one digest.
    group_wait: Duration = 2.0
    # 0: no pace beyond group_wait; e.g. 5m caps a busy rule at one digest per 5 minutes.
    group_interval: Duration = 0.0
    max_per_hour: Annotated[int, Field(ge=1)] | None = None


class StateRule(RuleBase):
    """Kinds with episodes (firing, then resolved), following Prometheus' semantics."""

    for_: Duration = Field(default=0.0, alias="for")
    keep_firing_for: Duration = 0.0
    repeat: PositiveDuration | None = None  # reminder interval while firing; None: no reminders

    @property
    def targets(self) -> tuple[str, ...]:
        return (CLUSTER,)


class Backoff(RuleBase):
    """Kinds whose targets are many and mostly idle: with ``max_every`` a quiet target is polled
    less and less often, down to once per ``max_every``, and activity brings it back to
    ``every`` (``watcher.budget``). None: every target at ``every``, always."""

    max_every: PositiveDuration | None = None

    @model_validator(mode="after")
    def _max_every_above_every(self) -> Self:
        if self.max_every is not None and self.max_every <= self.every:
            raise ValueError(
                f"max_every ({format_duration(self.max_every)}) must be longer than every "
                f"({format_duration(self.every)})"
            )
        return self


def max_every_of(rule: RuleBase) -> float | None:
    """The rule's ``max_every``: None for a kind without backoff or a rule not asking for it."""
    return rule.max_every if isinstance(rule, Backoff) else None


# -- routing: where a rule's alerts go -----------------------------------------------------
class Routing(Protocol):
    """Where a rule without ``notify`` goes (watcher.config.settings.Settings provides it)."""

    @property
    def default_channels(self) -> Sequence[str]: ...

    @property
    def routes(self) -> Mapping[Severity, Sequence[str]]: ...


class RoutedRule(Protocol):
    """What routing needs of a rule (a loaded rule, a built-in's)."""

    @property
    def name(self) -> str: ...

    @property
    def severity(self) -> Severity: ...

    @property
    def notify(self) -> tuple[str, ...] | None: ...


def channels_of(rule: RoutedRule, routing: Routing) -> tuple[str, ...]:
    """A rule's channels: its ``notify``, else the route of its severity, else the defaults.
    (Same order as watcher.alerting.pipeline, which applies it to alerts.)"""
    if rule.notify is not None:
        return rule.notify
    routed = routing.routes.get(rule.severity)
    if routed:
        return tuple(routed)
    return tuple(routing.default_channels)
