"""What the kinds watching the whole cluster share: its one target, and the reading of
getVoteAccounts both ``delinquent_validators`` and ``version_drift`` ride on (pure)."""

from __future__ import annotations

from watcher.alerting import messages
from watcher.config.rule_models import CLUSTER as CLUSTER  # one definition, re-exported
from watcher.core.events import TargetState
from watcher.ledger.models import VoteAccounts
from watcher.ledger.plausibility import Doubt, picture_of


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


def validator_lines(
    facts: messages.Facts, shown: messages.Presentation, *details: str | None
) -> list[str | None]:
    """The lines every validator alert shows: the validator, what happened (``details``), its
    vote account with its explorer link, its identity (``lines`` skips the None ones)."""
    vote, node = facts.get("vote_pubkey"), facts.get("node_pubkey")
    return [
        f"Validator: {shown.name(facts['subject'], vote, node)}",
        *details,
        f"Vote account: {shown.name(vote) if vote else 'unknown'}",
        shown.link("address", vote),
        f"Identity: {shown.name(node) if node else 'unknown'}",
    ]


def validator_title(facts: messages.Facts, shown: messages.Presentation, what: str) -> str:
    """The title of a validator alert: the rule, the validator (shortened, labelled by its
    watched pubkey, vote account or identity), then ``what`` happened."""
    who = shown.short(facts["subject"], facts.get("vote_pubkey"), facts.get("node_pubkey"))
    return f"{messages.rule_head(facts)} validator {who} {what}"
