"""The words of a ``nonce_accounts`` alert (``watcher.kinds.nonce_accounts``): a change of one
durable nonce account, the first poll's inventory, or an account that cannot be verified."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from watcher.alerting import formatting, messages
from watcher.kinds.toolkit.unverified import inventory_body, unverified_body, unverified_words

_TITLES: Final[Mapping[str, str]] = {
    "created": "created",
    "closed": "closed",
    "advanced": "advanced",
    "authority_changed": "authority changed",
}
# What a change may mean, after the title's facts.
_MEANS: Final[Mapping[str, str]] = {
    "advanced": ": a transaction signed against it may have run",
}


def nonce_accounts_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    what = facts.get("what")
    if what == "inventory":
        return _inventory_text(facts, shown)
    if what == "unverified":
        return _unverified_text(facts, shown)
    return _change_text(facts, shown)


def _change_text(facts: messages.Facts, shown: formatting.Presentation) -> tuple[str, str]:
    change, account = facts["change"], facts["account"]
    old, new = facts.get("old_authority"), facts.get("new_authority")
    authority = new if change == "created" else old
    head = messages.rule_head(facts)
    title = f"{head} durable nonce account {shown.short(account)} {_TITLES[change]}"
    if change == "authority_changed":
        title += f": {shown.short(old or '')} -> {shown.short(new or '')}"
    else:
        title += f" (authority {shown.short(authority or '')})" + _MEANS.get(change, "")
    body: list[str | None] = [
        messages.rule_line(facts),
        f"Nonce account: {shown.name(account)}",
        shown.link("address", account),
    ]
    if change == "authority_changed":
        body += [
            f"Authority was: {shown.name(old or '')}",
            f"Authority now: {shown.name(new or '')}",
        ]
    else:
        body.append(f"Authority: {shown.name(authority or '')}")
    if change == "advanced":
        body += [
            f"Stored nonce: {facts['old_nonce']} -> {facts['new_nonce']}",
            "Advancing the nonce is what a transaction signed against it does first: one may "
            "have run with the authority's signature.",
        ]
    elif change == "closed":
        body.append("The account is gone: its lamports were withdrawn by the authority.")
    elif change == "created":
        body.append(f"Stored nonce: {facts['new_nonce']}")
        body += _funding_lines(facts, shown)
        body.append(
            "Transactions signed against a durable nonce never expire: whoever holds them can "
            "run them while the authority's key signs nothing more."
        )
    return title, formatting.lines(*body)


def _funding_lines(facts: messages.Facts, shown: formatting.Presentation) -> list[str | None]:
    signature = facts.get("first_signature")
    unseen = (
        "Funded by: not visible through the service's methods (they have no transaction lookup)"
    )
    if not signature:
        return [unseen + "; its creating transaction was not found either."]
    return [
        unseen + "; its creating transaction (the account's oldest signature) names the payer:",
        f"  {shown.listed('tx', signature)}",
        shown.link("tx", signature),
    ]


def _inventory_text(facts: messages.Facts, shown: formatting.Presentation) -> tuple[str, str]:
    authorities: Sequence[str] = facts["authorities"]
    title = (
        f"{messages.rule_head(facts)} "
        f"{formatting.plural(len(facts['accounts']), 'durable nonce account')} on "
        f"{formatting.plural(len(authorities), 'watched key')} (inventory)"
    )
    body = inventory_body(
        facts,
        shown,
        lambda entry: f"authority {shown.name(entry['authority'])}",
        intro=[
            "What exists at the first poll: each durable nonce account whose authority is a "
            "watched key. From now on, each change is notified.",
            "Watched keys: " + ", ".join(shown.name(key) for key in authorities),
        ],
        none="(none)",
        not_listed="Not listed (the provider refused the call)",
    )
    return title, body


def _unverified_text(facts: messages.Facts, shown: formatting.Presentation) -> tuple[str, str]:
    account, authority = facts.get("account"), facts["authority"]
    what = (
        f"nonce account {shown.short(account)}"
        if account
        else f"nonce accounts of {shown.short(authority)}"
    )
    title, summary = unverified_words(facts, what, "decodes (or answers) again")
    about = [
        f"Nonce account: {shown.name(account)}" if account else None,
        shown.link("address", account) if account else None,
        f"Authority: {shown.name(authority)}",
    ]
    return title, unverified_body(facts, about, summary)
