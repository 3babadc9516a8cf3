"""Source ``votes``: delinquency of watched validators (rule kind ``delinquent_validators``).

One target, ``"cluster"``: one getVoteAccounts call serves every rule. Observation: the
``VoteAccounts`` model itself. State: ``{"v": 1, "episodes": {rule: {subject: Episode}}}``
(see ``watcher.alerting.lifecycle.step_episodes``).

The step also evaluates the built-in ``cluster_delinquent_stake`` (``watcher.alerting.builtin``)
when the
daemon hands it that rule: when more than its threshold of the activated stake is delinquent,
one cluster-wide alert fires instead of one per validator. While it fires, the episodes of the
``delinquent_validators`` rules are held (the observation counts as unknown for them: nothing
fires, resolves or repeats); once the share is back at or under the threshold, it resolves and
each validator is judged on its own again (one still delinquent then fires).

Doubts (``watcher.ledger.plausibility``): an answer with no vote account at all, or none current,
where the last accepted one had some, is taken once seen three polls in a row (the state keeps
``"accounts"`` and ``"current"``, the counts of the last accepted answer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Protocol, cast

from watcher.alerting.builtin import CLUSTER_DELINQUENT_STAKE, CLUSTER_SUBJECT
from watcher.alerting.events import StepOutcome, TargetState
from watcher.alerting.lifecycle import Assessment, StateRule, step_episodes
from watcher.alerting.messages import cluster_stake_text, validator_text
from watcher.kinds.base import LedgerReader
from watcher.kinds.diff import ValidatorStatus, classify_validators
from watcher.ledger.models import VoteAccounts
from watcher.ledger.plausibility import Doubt, SlotTip, picture_of

CLUSTER = "cluster"
LARGEST_LISTED = 10  # delinquent vote accounts named in a cluster_delinquent_stake message


class DelinquencyRule(StateRule, Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def validators(self) -> Sequence[str]: ...


class StakeShareRule(StateRule, Protocol):
    @property
    def threshold(self) -> float: ...  # percent of activated stake


class VotesSource:
    name = "votes"
    rule_kinds: tuple[str, ...] = ("delinquent_validators",)

    def targets(self, rules: Sequence[Any]) -> list[str]:
        # No rule of this kind: nothing to poll.
        return [CLUSTER] if self._rules(rules) else []

    async def observe(
        self, ledger: LedgerReader, target: str, state: TargetState | None
    ) -> VoteAccounts:
        return await ledger.get_vote_accounts()

    def tip(self, observation: VoteAccounts) -> int | None:
        return newest_vote(observation)

    def doubt(
        self,
        state: TargetState | None,
        observation: VoteAccounts,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        return vote_accounts_doubt(state, observation)

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: VoteAccounts,
        now: float,
    ) -> StepOutcome:
        mine = self._rules(rules)
        shares = [cast(StakeShareRule, r) for r in rules if r.kind == CLUSTER_DELINQUENT_STAKE]
        cluster = StepOutcome(state=state or {})
        if shares:

            def assess_share(rule: StateRule) -> Mapping[str, Assessment]:
                threshold = cast(StakeShareRule, rule).threshold
                return {CLUSTER_SUBJECT: cluster_assessment(observation, threshold)}

            cluster = step_episodes(shares, state, now, assess_share, cluster_stake_text)
        held = any(_firing(cluster.state, rule.name, CLUSTER_SUBJECT) for rule in shares)
        statuses = classify_validators(
            {pubkey for rule in mine for pubkey in rule.validators}, observation
        )

        def assess(rule: StateRule) -> Mapping[str, Assessment]:
            watched = cast(DelinquencyRule, rule).validators
            if held:
                return {pubkey: (None, {}) for pubkey in watched}
            return {pubkey: _assessment(statuses[pubkey]) for pubkey in watched}

        validators = step_episodes(mine, cluster.state, now, assess, validator_text)
        state_after = {**validators.state, **vote_account_counts(observation)}
        return StepOutcome(state_after, cluster.alerts + validators.alerts)

    def _rules(self, rules: Sequence[Any]) -> list[DelinquencyRule]:
        return [cast(DelinquencyRule, rule) for rule in rules if rule.kind in self.rule_kinds]


def newest_vote(vote_accounts: VoteAccounts) -> int | None:
    """The highest lastVote of the current vote accounts: the cluster's tip, give or take."""
    return max((account.last_vote for account in vote_accounts.current), default=None)


def vote_account_counts(vote_accounts: VoteAccounts) -> dict[str, int]:
    """What ``vote_accounts_doubt`` compares the next answer with (kept in the state)."""
    current = len(vote_accounts.current)
    return {"accounts": current + len(vote_accounts.delinquent), "current": current}


def vote_accounts_doubt(state: TargetState | None, vote_accounts: VoteAccounts) -> Doubt | None:
    """An empty cluster, or one where no account is current, after one that had some."""
    before = (state or {}).get("accounts") or 0
    current_before = (state or {}).get("current") or 0
    counts = vote_account_counts(vote_accounts)
    picture = picture_of(
        sorted(account.vote_pubkey for account in vote_accounts.current),
        sorted(account.vote_pubkey for account in vote_accounts.delinquent),
    )
    if before and not counts["accounts"]:
        return Doubt(f"no vote account at all, where the last answer had {before}", picture)
    if current_before and not counts["current"]:
        reason = f"no current vote account, where the last answer had {current_before}"
        return Doubt(reason, picture)
    return None


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


SOURCE = VotesSource()
