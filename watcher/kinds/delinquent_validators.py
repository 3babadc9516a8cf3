"""Kind ``delinquent_validators``: delinquency of watched validators (source ``votes``,
``watcher.kinds.sources.votes``: one getVoteAccounts call serves every rule of every kind
reading it). State: ``{"v": 1, "episodes": {rule: {subject: Episode}}}``
(see ``watcher.alerting.lifecycle.step_episodes``).

The step also evaluates the built-in ``cluster_delinquent_stake`` (``watcher.alerting.builtin``)
when the
daemon hands it that rule: when more than its threshold of the activated stake is delinquent,
one cluster-wide alert fires instead of one per validator. While it fires, the episodes of the
``delinquent_validators`` rules are held (the observation counts as unknown for them: nothing
fires, resolves or repeats); once the share is back at or under the threshold, it resolves and
each validator is judged on its own again (one still delinquent then fires).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from watcher.alerting import formatting, messages
from watcher.alerting.builtin import BuiltinRule
from watcher.alerting.lifecycle import Assessment, step_episodes
from watcher.config import rule_models
from watcher.config.rule_models import (
    CLUSTER_DELINQUENT_STAKE,
    CLUSTER_SUBJECT,
    PositiveDuration,
    Pubkeys,
)
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.sources.votes import SOURCE, VotesSource
from watcher.kinds.toolkit.alert_samples import episode_samples, sample_key
from watcher.kinds.toolkit.cluster import CLUSTER, validator_lines, validator_title
from watcher.ledger.models import VoteAccount, VoteAccounts

LARGEST_LISTED = 10  # delinquent vote accounts named in a cluster_delinquent_stake message
KIND_NAME = "delinquent_validators"


class DelinquentValidatorsRule(rule_models.StateRule):
    kind: Literal["delinquent_validators"] = "delinquent_validators"
    validators: Pubkeys  # vote account or identity pubkeys
    every: PositiveDuration = 30.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.validators


def step_delinquency(
    rules: Sequence[Any],
    target: str,
    state: TargetState | None,
    observation: VoteAccounts,
    now: float,
) -> StepOutcome:
    """The ``votes`` source's part for ``delinquent_validators`` (and the built-in
    ``cluster_delinquent_stake`` when the daemon hands it that rule). Pure."""
    state = state or {}  # the source's shared state, never None
    mine = base.rules_of(rules, DelinquentValidatorsRule)
    shares = [r for r in rules if isinstance(r, BuiltinRule) and r.kind == CLUSTER_DELINQUENT_STAKE]
    cluster = StepOutcome(state=state)
    if shares:

        def assess_share(rule: BuiltinRule) -> Mapping[str, Assessment]:
            threshold = rule.threshold  # percent of activated stake
            return {CLUSTER_SUBJECT: cluster_assessment(observation, threshold)}

        cluster = step_episodes(shares, state, now, assess_share)
    held = any(_firing(cluster.state, rule.name, CLUSTER_SUBJECT) for rule in shares)
    statuses = classify_validators(
        {pubkey for rule in mine for pubkey in rule.validators}, observation
    )

    def assess(rule: DelinquentValidatorsRule) -> Mapping[str, Assessment]:
        watched = rule.validators
        if held:
            return {pubkey: (None, {}) for pubkey in watched}
        return {pubkey: _assessment(statuses[pubkey]) for pubkey in watched}

    validators = step_episodes(mine, cluster.state, now, assess)
    return StepOutcome(validators.state, cluster.alerts + validators.alerts)


def delinquent_stake_pct(vote_accounts: VoteAccounts) -> float | None:
    """Percent of the activated stake held by delinquent vote accounts; None without stake."""
    delinquent, total = _stakes(vote_accounts)
    return None if total == 0 else 100 * delinquent / total


def _stakes(vote_accounts: VoteAccounts) -> tuple[int, int]:
    """(delinquent activated stake, all activated stake), in lamports."""
    delinquent = sum(account.activated_stake for account in vote_accounts.delinquent)
    return delinquent, delinquent + sum(acc.activated_stake for acc in vote_accounts.current)


def cluster_assessment(vote_accounts: VoteAccounts, threshold_pct: float) -> Assessment:
    """Is more than ``threshold_pct`` of the stake delinquent, with the facts that tell it."""
    pct = delinquent_stake_pct(vote_accounts)
    if pct is None:
        return None, {}
    largest = sorted(vote_accounts.delinquent, key=lambda account: -account.activated_stake)
    delinquent_stake, total_stake = _stakes(vote_accounts)
    facts = {
        "built_in": True,
        "delinquent_pct": round(pct, 2),
        "threshold_pct": threshold_pct,
        "delinquent_stake": delinquent_stake,
        "total_stake": total_stake,
        "delinquent_count": len(vote_accounts.delinquent),
        "total_count": len(vote_accounts.current) + len(vote_accounts.delinquent),
        "largest": [
            {
                "vote_pubkey": account.vote_pubkey,
                "node_pubkey": account.node_pubkey,
                "activated_stake": account.activated_stake,
            }
            for account in largest[:LARGEST_LISTED]
        ],
    }
    return pct > threshold_pct, facts


def _firing(state: TargetState, rule: str, subject: str) -> bool:
    episode = state.get("episodes", {}).get(rule, {}).get(subject) or {}
    return bool(episode.get("status") == "firing")


def _assessment(status: ValidatorStatus) -> Assessment:
    facts = asdict(status)
    facts["status"] = facts.pop("state")
    return status.state != "current", facts


# -- which validators are delinquent (pure) --------------------------------------------------

VoteState = Literal["current", "delinquent", "missing"]


@dataclass(frozen=True)
class ValidatorStatus:
    """Where a watched pubkey (vote account or identity) stands in getVoteAccounts."""

    watched: str
    state: VoteState
    vote_pubkey: str | None = None
    node_pubkey: str | None = None
    activated_stake: int | None = None
    last_vote: int | None = None
    slots_behind: int | None = None  # behind the newest vote of the current set


def classify_validators(
    watched: Iterable[str], vote_accounts: VoteAccounts
) -> dict[str, ValidatorStatus]:
    """A watched pubkey matches a vote account's ``votePubkey`` or ``nodePubkey``. Found in
    ``current`` -> current (an identity with several vote accounts counts as current when one of
    them is); else in ``delinquent`` -> delinquent; in neither -> missing (which fires too: an
    unstaked delinquent is left out of both lists)."""
    newest_vote = max((acc.last_vote for acc in vote_accounts.current), default=None)
    current = _by_pubkey(vote_accounts.current)
    delinquent = _by_pubkey(vote_accounts.delinquent)
    statuses: dict[str, ValidatorStatus] = {}
    for pubkey in watched:
        state: VoteState
        if pubkey in current:
            state, account = "current", current[pubkey]
        elif pubkey in delinquent:
            state, account = "delinquent", delinquent[pubkey]
        else:
            statuses[pubkey] = ValidatorStatus(pubkey, "missing")
            continue
        behind = None if newest_vote is None else max(0, newest_vote - account.last_vote)
        statuses[pubkey] = ValidatorStatus(
            watched=pubkey,
            state=state,
            vote_pubkey=account.vote_pubkey,
            node_pubkey=account.node_pubkey,
            activated_stake=account.activated_stake,
            last_vote=account.last_vote,
            slots_behind=behind,
        )
    return statuses


def _by_pubkey(accounts: Iterable[VoteAccount]) -> dict[str, VoteAccount]:
    """Vote and identity pubkey -> account (the most staked one when an identity has several)."""
    index: dict[str, VoteAccount] = {}
    for account in sorted(accounts, key=lambda acc: acc.activated_stake):
        index[account.vote_pubkey] = account
        index[account.node_pubkey] = account
    return index


# -- wording ---------------------------------------------------------------------------------


def validator_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    reason = facts["reason"]
    if reason == "resolved":
        was = facts.get("was", {}).get("status", "delinquent")
        title = validator_title(facts, shown, "is voting again (current)")
        summary = f"Resolved: back in the current vote accounts after {facts['duration']} {was}."
    elif reason == "repeat":
        title = validator_title(facts, shown, f"still {facts['status']} ({facts['duration']})")
        summary = f"Still {facts['status']}: for {facts['duration']}, {messages.since_text(facts)}."
    else:
        title = validator_title(facts, shown, f"{facts['status']}")
        summary = _validator_problem(facts)
    body = formatting.lines(
        messages.rule_line(facts),
        *validator_lines(facts, shown, summary),
        shown.link("address", facts.get("node_pubkey")),
        f"Activated stake: {formatting.sol(facts.get('activated_stake'))}",
        _last_vote_line(facts),
    )
    return title, body


def _validator_problem(facts: messages.Facts) -> str:
    if facts["status"] == "missing":
        return (
            "It is in neither the current nor the delinquent vote accounts "
            "(wrong pubkey, closed vote account, or an unstaked delinquent)."
        )
    return "It is delinquent: its last vote is more than 128 slots behind the cluster."


def _last_vote_line(facts: messages.Facts) -> str | None:
    if facts.get("last_vote") is None:
        return None
    behind = facts.get("slots_behind")
    note = (
        f" ({formatting.plural(behind, 'slot')} behind the newest vote)"
        if behind is not None
        else ""
    )
    return f"Last vote: slot {facts['last_vote']}{note}"


def cluster_stake_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    """``cluster_delinquent_stake``: more than the threshold of activated stake is delinquent."""
    share = f"{facts['delinquent_pct']:.1f}%"
    threshold = f"{float(facts['threshold_pct']):g}%"
    if facts["reason"] == "resolved":
        title = f"{messages.rule_head(facts)} delinquent stake back to {share}"
        was = float(facts.get("was", {}).get("delinquent_pct", 0.0))
        summary = (
            f"Resolved after {facts['duration']}: {share} of the activated stake is delinquent, "
            f"at or under the {threshold} threshold (it was {was:.1f}%). Validator rules are "
            "evaluated one by one again."
        )
    else:
        title = f"{messages.rule_head(facts)} {share} of the activated stake is delinquent"
        summary = (
            f"{share} of the activated stake is delinquent, above the {threshold} threshold. "
            "While this lasts, delinquent_validators rules are held: their validators fire or "
            "resolve one by one once the share is back under the threshold."
        )
    largest: Sequence[Mapping[str, Any]] = facts.get("largest") or ()
    listed: list[str | None] = []
    for account in largest:
        vote, node = account["vote_pubkey"], account["node_pubkey"]
        stake = formatting.sol(account["activated_stake"])
        listed += [f"- {shown.name(vote)}  {stake}, identity {shown.name(node)}"]
        listed += [shown.link("address", vote)]
    body = formatting.lines(
        messages.rule_line(facts),
        summary,
        f"Delinquent: {formatting.sol(facts['delinquent_stake'])} of "
        f"{formatting.sol(facts['total_stake'])}; "
        f"{facts['delinquent_count']} of {facts['total_count']} vote accounts",
        *(("", "Largest delinquent vote accounts:", *listed) if listed else ()),
    )
    return title, body


def samples(rule: DelinquentValidatorsRule) -> list[AlertMessage]:
    """The rule's first validator goes delinquent and recovers beside a big one that votes."""
    vote = rule.validators[0]
    big = VoteAccount(
        vote_pubkey=sample_key("big vote"),
        node_pubkey=sample_key("big"),
        activated_stake=10**16,
        last_vote=5001,
    )

    def answer(bad: bool) -> VoteAccounts:
        account = VoteAccount(
            vote_pubkey=vote,
            node_pubkey=sample_key("node of " + vote),
            activated_stake=10**15,
            last_vote=1000 if bad else 5000,
        )
        if bad:
            return VoteAccounts(current=[big], delinquent=[account])
        return VoteAccounts(current=[big, account], delinquent=[])

    source = VotesSource({KIND_NAME: step_delinquency})
    return episode_samples(
        rule, lambda state, bad, now: source.step([rule], CLUSTER, state, answer(bad), now)
    )


KIND = base.Kind(
    model=DelinquentValidatorsRule,
    source=SOURCE,
    wording=validator_text,
    part=step_delinquency,
    samples=samples,
)
