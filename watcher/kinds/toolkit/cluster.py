"""What the kinds watching the whole cluster share: its one target, and the reading of
getVoteAccounts both ``delinquent_validators`` and ``version_drift`` ride on, the current epoch's
credits and a watched validator's vote account among them (pure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from watcher.alerting import formatting, messages
from watcher.config.rule_models import CLUSTER as CLUSTER  # one definition, re-exported
from watcher.core.events import TargetState
from watcher.ledger.models import VoteAccount, VoteAccounts
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
    facts: messages.Facts, shown: formatting.Presentation, *details: str | None
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


def validator_title(facts: messages.Facts, shown: formatting.Presentation, what: str) -> str:
    """The title of a validator alert: the rule, the validator (shortened, labelled by its
    watched pubkey, vote account or identity), then ``what`` happened."""
    who = shown.short(facts["subject"], facts.get("vote_pubkey"), facts.get("node_pubkey"))
    return f"{messages.rule_head(facts)} validator {who} {what}"


def current_epoch(vote_accounts: VoteAccounts) -> int | None:
    accounts = (*vote_accounts.current, *vote_accounts.delinquent)
    return max((entry[0] for acc in accounts for entry in acc.epoch_credits), default=None)


def earned(account: VoteAccount, epoch: int) -> int:
    """Credits the account earned in ``epoch`` (0 when it reports none for it)."""
    return next((new - old for number, new, old in account.epoch_credits if number == epoch), 0)


def find_account(watched: str, vote_accounts: VoteAccounts) -> VoteAccount | None:
    """The vote account of a vote or identity pubkey: a current one before a delinquent one,
    the most staked when an identity has several."""
    for accounts in (vote_accounts.current, vote_accounts.delinquent):
        found = _matching(watched, accounts)
        if found:
            return max(found, key=lambda acc: acc.activated_stake)
    return None


def _matching(watched: str, accounts: Iterable[VoteAccount]) -> list[VoteAccount]:
    return [acc for acc in accounts if watched in (acc.vote_pubkey, acc.node_pubkey)]


def account_finder(vote_accounts: VoteAccounts) -> Callable[[str], VoteAccount | None]:
    """``find_account`` for many pubkeys of one answer: both lists indexed once by vote and
    identity pubkey (1,000 watched validators would otherwise scan 1,000 accounts each)."""
    indexes: list[dict[str, VoteAccount]] = []
    for accounts in (vote_accounts.current, vote_accounts.delinquent):
        best: dict[str, VoteAccount] = {}
        for account in accounts:
            for key in (account.vote_pubkey, account.node_pubkey):
                held = best.get(key)
                # The most staked, the first of equals (as ``max``).
                if held is None or account.activated_stake > held.activated_stake:
                    best[key] = account
        indexes.append(best)

    def find(watched: str) -> VoteAccount | None:
        for best in indexes:
            account = best.get(watched)
            if account is not None:
                return account
        return None

    return find
