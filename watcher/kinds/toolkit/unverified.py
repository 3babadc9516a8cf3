"""What the kinds that decode accounts themselves (nonce accounts, authorities, multisigs) share:
their step (a first poll's inventory, then each change, besides the episodes below), their
"cannot be verified" episodes (one state alert per subject: an account that does not decode as
what the rule says it is, or a key whose call the provider refused, firing while it cannot be
verified and resolved once it can; never a quiet baseline) and the words of those alerts and of
their first poll's inventory. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from watcher.alerting import formatting, messages
from watcher.config.rule_models import EventRule
from watcher.core.clock import human_duration
from watcher.core.events import AlertMessage, StepOutcome, TargetState, inventory_key
from watcher.kinds import base

# The version of the state ``snapshot_step`` keeps (its layout: the nonce and powers kinds).
STATE_VERSION: Final = 1
LISTED: Final = 50  # accounts an inventory lists one by one
UNVERIFIED_MEANS: Final = (
    "Until it can, nothing is concluded about it: no change is notified, and what was known of "
    "it is kept."
)

# What a new episode keeps besides when and why (the nonce kinds: the authority it was under).
Failing = Mapping[str, tuple[str, Mapping[str, Any]]]  # subject -> (why, kept)
FactsOf = Callable[[str, Mapping[str, Any]], dict[str, Any]]  # (subject, episode) -> facts
Rule = TypeVar("Rule", bound=EventRule)


def snapshot_step(
    watching: Sequence[Rule],
    state: TargetState | None,
    snapshot: tuple[str, Mapping[str, Any]],
    *,
    now: float,
    inventory: Callable[[Rule, int], AlertMessage | None],
    changes: Callable[[Rule, int], list[AlertMessage]],
    failing: Failing,
    facts_of: FactsOf,
    undecided: Callable[[Mapping[str, Any]], bool] = lambda _episode: False,
) -> StepOutcome:
    """One poll of a kind that keeps a snapshot of decoded accounts, ``snapshot`` (its key in
    the state, and what it holds now): for each rule, the inventory at its first poll (None:
    a quiet baseline) or the ``changes`` since the last one, and its "cannot be verified"
    episodes (``unverified_episodes``). ``inventory`` and ``changes`` are given the number of
    this snapshot, which names their alerts."""
    seen, seq = base.baselines(state)
    alerts: list[AlertMessage] = []
    unverified_before: Mapping[str, Any] = (state or {}).get("unverified", {})
    unverified: dict[str, Any] = {}
    for rule in watching:
        if rule.name not in seen:
            told = inventory(rule, seq)
            alerts += [told] if told is not None else []
        else:
            alerts += changes(rule, seq)
        open_now, said = unverified_episodes(
            rule,
            unverified_before.get(rule.name, {}),
            failing,
            now=now,
            seq=seq,
            facts_of=facts_of,
            undecided=undecided,
        )
        if open_now:
            unverified[rule.name] = open_now
        alerts += said
    key, held = snapshot
    new_state: TargetState = {
        "v": STATE_VERSION,
        key: dict(sorted(held.items())),
        **base.baselines_state(seen, (rule.name for rule in watching), seq),
    }
    if unverified:
        new_state["unverified"] = unverified
    return StepOutcome(state=new_state, alerts=tuple(alerts))


def inventory_alert(
    rule: EventRule, target: str, seq: int, facts: Mapping[str, Any]
) -> AlertMessage:
    """What exists at a rule's first poll, in one ``info`` notification whatever the rule's
    severity: a list to read, not a change to act on (never paged:
    ``AlertMessage.is_inventory``)."""
    as_info = rule.model_copy(update={"severity": "info"})
    key = inventory_key(rule.name, target, seq)
    return messages.make_alert(as_info, subject=target, reason="event", dedup_key=key, facts=facts)


def unverified_episodes(
    rule: EventRule,
    before: Mapping[str, Any],
    failing: Failing,
    *,
    now: float,
    seq: int,
    facts_of: FactsOf,
    undecided: Callable[[Mapping[str, Any]], bool] = lambda _episode: False,
) -> tuple[dict[str, Any], list[AlertMessage]]:
    """The rule's episodes after a poll, and what to say: one firing for each subject that
    fails now and did not before, one resolved for each that failed before and does not now,
    unless its episode is ``undecided`` (not known either way: it stays as it was)."""
    open_now: dict[str, Any] = {}
    alerts: list[AlertMessage] = []
    for subject, (why, kept) in sorted(failing.items()):
        episode = before.get(subject)
        if episode is None:
            episode = {"since": now, "why": why, "n": seq, **kept}
            key = f"{rule.name}|{subject}|unverified-{seq}|firing"
            facts = facts_of(subject, episode)
            alerts.append(
                messages.make_alert(
                    rule, subject=subject, reason="firing", dedup_key=key, facts=facts
                )
            )
        open_now[subject] = {**episode, "why": why}
    for subject, episode in sorted(before.items()):
        if subject in open_now:
            continue
        if undecided(episode):
            open_now[subject] = episode
            continue
        facts = facts_of(subject, episode)
        facts["duration"] = human_duration(now - float(episode["since"]))
        key = f"{rule.name}|{subject}|unverified-{episode['n']}|resolved"
        alerts.append(
            messages.make_alert(
                rule, subject=subject, reason="resolved", dedup_key=key, facts=facts
            )
        )
    return open_now, alerts


def unverified_words(facts: Mapping[str, Any], what: str, again: str) -> tuple[str, str]:
    """The title of a "cannot be verified" alert about ``what``, and the sentence that says
    what it means (``again``: what it does once it can be verified, for a resolution)."""
    if facts["reason"] == "resolved":
        title = f"{messages.rule_head(facts)} {what} can be verified again"
        return title, f"It {again}, after {facts.get('duration', 'a while')}."
    return f"{messages.rule_head(facts)} {what} cannot be verified", UNVERIFIED_MEANS


def inventory_listing(
    accounts: Sequence[Mapping[str, Any]],
    describe: Callable[[Mapping[str, Any]], str],
    shown: formatting.Presentation,
) -> list[str | None]:
    """An inventory's accounts one by one (``describe``: what follows the account's name), with
    their links, the first ``LISTED`` of them."""
    listed: list[str | None] = []
    for entry in accounts[:LISTED]:
        listed += [
            f"- {shown.name(entry['account'])}: {describe(entry)}",
            shown.link("address", entry["account"]),
        ]
    if len(accounts) > LISTED:
        listed.append(f"... and {len(accounts) - LISTED} more")
    return listed


def unverified_body(facts: Mapping[str, Any], about: Sequence[str | None], summary: str) -> str:
    """The body of a "cannot be verified" alert: the lines ``about`` what it concerns, why it
    cannot be verified and since when, then ``summary`` (``unverified_words``)."""
    return formatting.lines(
        messages.rule_line(facts),
        *about,
        f"Why: {facts['why']}",
        f"Since: {facts['since']}",
        summary,
    )


def inventory_body(
    facts: Mapping[str, Any],
    shown: formatting.Presentation,
    describe: Callable[[Mapping[str, Any]], str],
    *,
    intro: Sequence[str],
    none: str,
    not_listed: str,
) -> str:
    """The body of an inventory: what it is (``intro``), its accounts (``inventory_listing``;
    ``none`` when there are none), then each key it could not list, after ``not_listed``."""
    listed = inventory_listing(facts["accounts"], describe, shown)
    return formatting.lines(
        messages.rule_line(facts),
        *intro,
        "",
        *(listed or [none]),
        *(f"{not_listed}: {shown.name(key)}" for key in facts.get("not_listed") or ()),
    )


def inventory_count(facts: Mapping[str, Any]) -> int:
    """What one alert adds to a digest: an inventory its accounts, anything else one."""
    return int(facts.get("count") or 1) if facts.get("what") == "inventory" else 1
