"""What ``stake_changed`` and ``commission_changed`` share (pure): a watched validator's value
in getVoteAccounts compared with the value *last notified* to each rule.

The first poll of a rule is its baseline (nothing sent); so is the first answer showing a
watched pubkey (a vote account that appears later). A pubkey in neither list keeps its reference
and says nothing (not evidence). Each qualifying change is one event alert (subject: the watched
pubkey); the alerts of one poll of one rule go out as one digest (``watcher.delivery.digest``).

State (shared with the other kinds of the ``votes`` source), under the kind's own key::

    {"refs": {rule: {watched pubkey: value}}, "seq": polls stepped}

``seq`` names the poll in the dedup keys: a value going back to one notified before is a new
change, and re-running a step from the same state gives the same keys (the outbox drops copies).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from watcher.alerting import formatting, messages
from watcher.config.rule_models import CLUSTER, EventRule, PositiveDuration, Pubkeys, RuleBase
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.sources.votes import PartStep, vote_kind
from watcher.kinds.toolkit.cluster import account_finder, validator_lines, validator_title
from watcher.ledger.models import VoteAccount, VoteAccounts


class ChangeRule(EventRule):
    """What a rule of a kind comparing validators' values takes: its validators, all read from
    the one ``cluster`` target (each kind's model adds its literal ``kind``)."""

    validators: Pubkeys  # vote account or identity pubkeys
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.validators

    @property
    def targets(self) -> tuple[str, ...]:
        return (CLUSTER,)


# (rule, value last notified, value now) -> is it a change to notify?
Moved = Callable[[Any, int, int], bool]


def changes_step(
    kind_name: str, *, key: str, value_of: Callable[[VoteAccount], int | None], moved: Moved
) -> PartStep:
    """The step of the kind ``kind_name`` (its part of the ``votes`` source): ``step_changes``
    over its own rules."""

    def step(
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: VoteAccounts,
        now: float,
    ) -> StepOutcome:
        mine = [rule for rule in rules if rule.kind == kind_name]
        return step_changes(mine, state or {}, observation, key=key, value_of=value_of, moved=moved)

    return step


def step_changes(
    rules: Sequence[Any],
    state: TargetState,
    observation: VoteAccounts,
    *,
    key: str,
    value_of: Callable[[VoteAccount], int | None],
    moved: Moved,
) -> StepOutcome:
    """The alerts of the rules in ``rules`` and ``{key: {"refs", "seq"}}``."""
    stored: Mapping[str, Any] = state.get(key) or {}
    refs: dict[str, dict[str, int]] = {
        rule: {pubkey: int(value) for pubkey, value in values.items()}
        for rule, values in (stored.get("refs") or {}).items()
    }
    seq = int(stored.get("seq", 0)) + 1
    alerts: list[AlertMessage] = []
    find_account = account_finder(observation)
    for rule in rules:
        baseline = rule.name not in refs
        mine = refs.setdefault(rule.name, {})
        for pubkey in rule.validators:
            account = find_account(pubkey)
            value = None if account is None else value_of(account)
            if account is None or value is None:
                continue
            if baseline or pubkey not in mine:
                mine[pubkey] = value
                continue
            old = mine[pubkey]
            if value != old and moved(rule, old, value):
                mine[pubkey] = value
                alerts.append(_alert(rule, key, pubkey, account, old, value, seq))
    return StepOutcome({key: {"refs": refs, "seq": seq}}, tuple(alerts))


def _alert(
    rule: Any, key: str, pubkey: str, account: VoteAccount, old: int, new: int, seq: int
) -> AlertMessage:
    facts = {
        "vote_pubkey": account.vote_pubkey,
        "node_pubkey": account.node_pubkey,
        "old": old,
        "new": new,
    }
    dedup_key = f"{rule.name}|{pubkey}|{key}-{seq}|event"
    return messages.make_alert(
        rule, subject=pubkey, reason="event", dedup_key=dedup_key, facts=facts
    )


def one(facts: Mapping[str, Any]) -> int:
    return 1


def validator_named(facts: Mapping[str, Any]) -> base.Named:
    """A validator in a digest: its watched pubkey, labelled by it, its vote account or its
    identity (as its lone alert's title)."""
    aliases = tuple(str(facts[key]) for key in ("vote_pubkey", "node_pubkey") if facts.get(key))
    return base.Named(str(facts["subject"]), "address", aliases=aliases)


def change_text(
    facts: messages.Facts, shown: formatting.Presentation, what: str, detail: str
) -> tuple[str, str]:
    """The wording of one change: ``what`` in the title (after the validator), ``detail`` in
    the body (under it)."""
    title = validator_title(facts, shown, what)
    return title, formatting.lines(
        messages.rule_line(facts), *validator_lines(facts, shown, detail)
    )


def change_kind(
    model: type[RuleBase], wording: messages.Wording, item: tuple[str, str], part: PartStep
) -> base.Kind[VoteAccounts]:
    """A kind comparing a validator's value with the one last notified: the ``votes`` source
    (its ``part``: ``changes_step``), one alert per change, digests counting ``item``
    (singular, plural) per validator."""
    digest = base.DigestWords(item, ("validator", "validators"), one, subject_named=validator_named)
    return vote_kind(model, wording, part, digest)
