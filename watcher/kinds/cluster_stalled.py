"""Kind ``cluster_stalled``: the cluster stopped making progress (source ``votes``).

Progress is the highest ``lastVote`` and the highest ``rootSlot`` of any vote account (current
or delinquent) in getVoteAccounts: the condition holds once neither has advanced for
``stalled_for`` (default 1m), judged on the clock handed to the step, never wall time. The first
poll is the baseline (nothing to compare with). An answer showing lower values than the highest
seen (a node behind the others) is no progress, and no regress either: the highest seen stays.
A failed poll is not stepped at all, so it never counts as a stall.

State (shared with the other kinds of the source): ``"stall": {"vote": slot, "root": slot,
"since": time of the last advance}`` and the ``episodes`` of the rules (subject ``cluster``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from watcher.alerting import formatting, messages
from watcher.alerting.lifecycle import Assessment, step_episodes
from watcher.config import rule_models
from watcher.config.rule_models import PositiveDuration
from watcher.core.clock import human_duration, iso
from watcher.core.events import StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.sources.votes import vote_kind
from watcher.kinds.toolkit.cluster import CLUSTER
from watcher.ledger.models import VoteAccounts

KIND_NAME = "cluster_stalled"


class ClusterStalledRule(rule_models.StateRule):
    kind: Literal["cluster_stalled"] = "cluster_stalled"
    stalled_for: PositiveDuration = 60.0
    every: PositiveDuration = 30.0

    @property
    def watched(self) -> tuple[str, ...]:
        return (CLUSTER,)


def progress(
    stall: Mapping[str, Any] | None, observation: VoteAccounts, now: float
) -> dict[str, Any]:
    """The highest lastVote and rootSlot seen, and since when neither has advanced."""
    accounts = (*observation.current, *observation.delinquent)
    vote = max((account.last_vote for account in accounts), default=0)
    root = max((account.root_slot or 0 for account in accounts), default=0)
    if not stall:
        return {"vote": vote, "root": root, "since": now}
    advanced = vote > int(stall["vote"]) or root > int(stall["root"])
    return {
        "vote": max(vote, int(stall["vote"])),
        "root": max(root, int(stall["root"])),
        "since": now if advanced else float(stall["since"]),
    }


def stall_assessment(stall: Mapping[str, Any], stalled_for: float, now: float) -> Assessment:
    still = now - float(stall["since"])
    facts = {
        "highest_vote": stall["vote"],
        "highest_root": stall["root"],
        "stalled_seconds": still,
        "last_advance": iso(float(stall["since"])),
        "stalled_for": stalled_for,
    }
    return still >= stalled_for, facts


def step_cluster_stalled(
    rules: Sequence[Any],
    target: str,
    state: TargetState | None,
    observation: VoteAccounts,
    now: float,
) -> StepOutcome:
    state = state or {}  # the source's shared state, never None
    mine = base.rules_of(rules, ClusterStalledRule)
    stall = progress(state.get("stall"), observation, now)

    def assess(rule: ClusterStalledRule) -> Mapping[str, Assessment]:
        return {CLUSTER: stall_assessment(stall, rule.stalled_for, now)}

    outcome = step_episodes(mine, state, now, assess)
    return StepOutcome({**outcome.state, "stall": stall}, outcome.alerts)


def cluster_stalled_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    stalled = human_duration(float(facts["stalled_seconds"]))
    if facts["reason"] == "resolved":
        title = f"{messages.rule_head(facts)} the cluster is making progress again"
        summary = f"Resolved after {facts['duration']}: votes and roots advance again."
    elif facts["reason"] == "repeat":
        title = f"{messages.rule_head(facts)} the cluster is still stalled ({facts['duration']})"
        summary = f"Still stalled: no progress for {stalled}."
    else:
        title = (
            f"{messages.rule_head(facts)} the cluster is stalled: no new vote or root for {stalled}"
        )
        limit = human_duration(float(facts["stalled_for"]))
        summary = f"Neither the highest vote nor the highest root advanced for {limit} or more."
    body = formatting.lines(
        messages.rule_line(facts),
        summary,
        f"Highest vote: slot {facts['highest_vote']}; highest root: slot {facts['highest_root']}",
        f"Last advance: {facts['last_advance']}",
    )
    return title, body


KIND = vote_kind(ClusterStalledRule, cluster_stalled_text, step_cluster_stalled)
