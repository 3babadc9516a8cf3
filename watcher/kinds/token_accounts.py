"""Kind ``token_accounts``: token accounts of watched owners and/or mints created, closed,
frozen, thawed, delegated or undelegated, their delegate's allowance increased (the same delegate
approved for more: spending part of it is no change), or their close authority changed (source
``token_accounts``, getTokenAccounts, paged).

A target is one query: ``owner=OWNER``, ``mint=MINT`` or, for a rule naming both owners and
mints, ``owner=OWNER,mint=MINT`` (the accounts of that owner in that mint).

State per target (the accounts' flags, not the answers)::

    {"v": 1, "accounts": {token_account: "F" or "-", then the delegate or "", then
                          "|allowance|close authority" (a snapshot of an earlier version: not)},
     "rules": [rule names that have seen the baseline], "seq": 42}

Doubts: a partial answer (the service's ``errors`` list not empty, or more pages than
``MAX_PAGES``) is never taken; every account of the snapshot gone at once is taken once seen
three polls in a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field, model_validator

from watcher.alerting import formatting, messages
from watcher.config.rule_models import Backoff, EventRule, PositiveDuration, Pubkeys, _no_duplicates
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.alert_samples import sample_key
from watcher.ledger.models_das import TokenAccount
from watcher.ledger.plausibility import Doubt, SlotTip, picture_of

STATE_VERSION = 1
PAGE_LIMIT = 1000
MAX_PAGES = 100  # 100,000 accounts: beyond, the answer is not diffed
LISTED = 20  # changes listed one by one in a notification

Change = Literal[
    "created",
    "closed",
    "frozen",
    "thawed",
    "delegated",
    "undelegated",
    "allowance_increased",
    "close_authority_changed",
]
CHANGES: tuple[Change, ...] = get_args(Change)  # every change, in the order above
Changes = Annotated[tuple[Change, ...], Field(min_length=1), AfterValidator(_no_duplicates)]


# -- the diff (pure) -------------------------------------------------------------------------


@dataclass(frozen=True)
class Flags:
    """What is watched of one token account. ``known``: its allowance (the delegated amount)
    and close authority were read (a snapshot kept by an earlier version has only the frozen
    flag and the delegate: the first answer after it is their baseline)."""

    frozen: bool = False
    delegate: str | None = None
    allowance: int | None = None
    close_authority: str | None = None
    known: bool = False

    def code(self) -> str:
        code = ("F" if self.frozen else "-") + (self.delegate or "")
        if not self.known:
            return code
        allowance = "" if self.allowance is None else str(self.allowance)
        return f"{code}|{allowance}|{self.close_authority or ''}"

    @classmethod
    def of_code(cls, code: str) -> Flags:
        head, _, tail = code.partition("|")
        flags = cls(frozen=head.startswith("F"), delegate=head[1:] or None)
        if not tail:
            return flags
        allowance, _, close = tail.partition("|")
        return replace(
            flags,
            allowance=int(allowance) if allowance else None,
            close_authority=close or None,
            known=True,
        )


@dataclass(frozen=True)
class AccountChange:
    account: str
    change: Change
    delegate: str | None = None  # the new delegate (delegated) or the old one (undelegated)
    # What it was and became: the allowance (allowance_increased), the close authority.
    old: str | int | None = None
    new: str | int | None = None


def diff_accounts(old: Mapping[str, Flags], new: Mapping[str, Flags]) -> list[AccountChange]:
    """Every change from ``old`` to ``new``, by account, then in the order of ``CHANGES``."""
    changes: list[AccountChange] = []
    for account in sorted(old.keys() | new.keys()):
        before, after = old.get(account), new.get(account)
        if before is None:
            changes.append(AccountChange(account, "created"))
            before = Flags()
            if after is not None and not after.frozen and after.delegate is None:
                continue
        if after is None:
            changes.append(AccountChange(account, "closed"))
            continue
        if after.frozen != before.frozen:
            changes.append(AccountChange(account, "frozen" if after.frozen else "thawed"))
        if after.delegate != before.delegate:
            if after.delegate is None:
                changes.append(AccountChange(account, "undelegated", before.delegate))
            else:
                changes.append(AccountChange(account, "delegated", after.delegate))
        if not (before.known and after.known):
            continue
        if (
            after.delegate is not None
            and after.delegate == before.delegate
            and before.allowance is not None
            and after.allowance is not None
            and after.allowance > before.allowance
        ):  # the same delegate approved for more (spending part of it lowers it: no change)
            changes.append(
                AccountChange(
                    account,
                    "allowance_increased",
                    after.delegate,
                    before.allowance,
                    after.allowance,
                )
            )
        if after.close_authority != before.close_authority:
            changes.append(
                AccountChange(
                    account,
                    "close_authority_changed",
                    old=before.close_authority,
                    new=after.close_authority,
                )
            )
    return changes


# -- the rule --------------------------------------------------------------------------------


class TokenAccountsRule(EventRule, Backoff):
    kind: Literal["token_accounts"] = "token_accounts"
    owners: Pubkeys | None = None
    mints: Pubkeys | None = None
    changes: Changes = CHANGES
    every: PositiveDuration = 60.0

    @model_validator(mode="after")
    def _owners_or_mints(self) -> TokenAccountsRule:
        if not self.owners and not self.mints:
            raise ValueError("name owners, mints or both")
        return self

    @property
    def watched(self) -> tuple[str, ...]:
        return (*(self.owners or ()), *(self.mints or ()))

    @property
    def targets(self) -> tuple[str, ...]:
        if self.owners and self.mints:
            return tuple(f"owner={o},mint={m}" for o in self.owners for m in self.mints)
        if self.owners:
            return tuple(f"owner={owner}" for owner in self.owners)
        return tuple(f"mint={mint}" for mint in self.mints or ())


def query_of(target: str) -> dict[str, str]:
    """``owner=A,mint=B`` -> ``{"owner": "A", "mint": "B"}``."""
    return dict(part.split("=", 1) for part in target.split(","))


@dataclass(frozen=True)
class TokenAccountsObservation:
    accounts: tuple[TokenAccount, ...]
    problem: str | None = None  # why the answer is partial (not diffed)


class TokenAccountsSource(base.Slotless):
    name = "token_accounts"
    # Activity (a quiet target backs off): an account created, closed or its flags changed.
    facts = base.SourceFacts(("getTokenAccounts",), activity_keys=("accounts",))
    rule_kinds: tuple[str, ...] = ("token_accounts",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> TokenAccountsObservation:
        query = query_of(target)
        accounts: list[TokenAccount] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await ledger.get_token_accounts(
                mint=query.get("mint"), owner=query.get("owner"), limit=PAGE_LIMIT, cursor=cursor
            )
            if page.errors:
                problem = f"the service reported {formatting.plural(len(page.errors), 'error')}"
                return TokenAccountsObservation(tuple(accounts), problem)
            accounts += page.token_accounts
            if page.cursor is None or len(page.token_accounts) < PAGE_LIMIT:
                return TokenAccountsObservation(tuple(accounts))
            if page.cursor == cursor:
                return TokenAccountsObservation(tuple(accounts), "the cursor did not move")
            cursor = page.cursor
        problem = f"more than {MAX_PAGES * PAGE_LIMIT} token accounts"
        return TokenAccountsObservation(tuple(accounts), problem)

    def doubt(
        self,
        state: TargetState | None,
        observation: TokenAccountsObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        if observation.problem is not None:
            picture = picture_of("partial", observation.problem)
            return Doubt(f"partial answer: {observation.problem}", picture, confirmable=False)
        if not state or "accounts" not in state:
            return None
        previous = set(state["accounts"])
        now_listed = {account.address for account in observation.accounts}
        if len(previous) > 1 and not previous & now_listed:
            reason = f"all {len(previous)} token accounts of the last snapshot gone at once"
            return Doubt(reason, picture_of(sorted(now_listed)))
        return None

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: TokenAccountsObservation,
        now: float,
    ) -> StepOutcome:
        new = {
            account.address: Flags(
                account.frozen,
                account.delegate,
                account.delegated_amount,
                account.close_authority,
                known=True,
            )
            for account in observation.accounts
        }
        owners = {account.address: account.owner for account in observation.accounts}
        mints = {account.address: account.mint for account in observation.accounts}
        seen, seq = base.baselines(state)
        alerts: list[AlertMessage] = []
        watching = base.watching(rules, TokenAccountsRule, target)
        if state and "accounts" in state:
            old = {account: Flags.of_code(code) for account, code in state["accounts"].items()}
            found = diff_accounts(old, new)
            for rule in watching:
                if rule.name not in seen:  # a rule new to this target baselines silently
                    continue
                wanted = [change for change in found if change.change in rule.changes]
                if wanted:
                    alerts.append(_alert(rule, target, wanted, owners, mints, seq))
        new_state: TargetState = {
            "v": STATE_VERSION,
            "accounts": {account: flags.code() for account, flags in sorted(new.items())},
            **base.baselines_state(seen, (rule.name for rule in watching), seq),
        }
        return StepOutcome(state=new_state, alerts=tuple(alerts))


def _alert(
    rule: TokenAccountsRule,
    target: str,
    changes: Sequence[AccountChange],
    owners: Mapping[str, str],
    mints: Mapping[str, str],
    seq: int,
) -> AlertMessage:
    query = query_of(target)
    subject = query.get("owner") or query["mint"]
    facts = {
        "owner": query.get("owner"),
        "mint": query.get("mint"),
        "count": len(changes),
        "changes": [
            {
                "account": change.account,
                "change": change.change,
                "delegate": change.delegate,
                "old": change.old,
                "new": change.new,
                "owner": owners.get(change.account),
                "mint": mints.get(change.account),
            }
            for change in changes
        ],
    }
    return messages.snapshot_event(rule, subject=subject, target=target, seq=seq, facts=facts)


def samples(rule: TokenAccountsRule) -> list[AlertMessage]:
    """One event naming every change a token account can have (``watcher check``)."""
    target = rule.targets[0]
    query = query_of(target)
    changes = [AccountChange(sample_key(change), change) for change in CHANGES]
    changes[4] = AccountChange(changes[4].account, "delegated", sample_key("delegate"))
    changes[6] = AccountChange(changes[6].account, "allowance_increased", sample_key("delegate"))
    changes[6] = replace(changes[6], old=1_000_000, new=5_000_000)
    changes[7] = replace(changes[7], old=None, new=sample_key("closer"))
    owners = {c.account: query.get("owner") or sample_key("owner") for c in changes}
    mints = {c.account: query.get("mint") or sample_key("mint") for c in changes}
    return [_alert(rule, target, changes, owners, mints, 1)]


SOURCE = TokenAccountsSource()


# -- wording ---------------------------------------------------------------------------------


def token_accounts_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    changes: Sequence[Mapping[str, Any]] = facts["changes"]
    noun = formatting.plural(len(changes), "token account change")
    owner, mint = facts.get("owner"), facts.get("mint")
    of = shown.short(owner) if owner else f"mint {shown.short(mint or '')}"
    title = f"{messages.rule_head(facts)} {noun} of {of}"
    listed: list[str | None] = []
    for change in changes[:LISTED]:
        listed += [_change_line(change, shown), shown.link("address", change["account"])]
    more = len(changes) - LISTED
    body = formatting.lines(
        messages.rule_line(facts),
        f"Owner: {shown.name(owner)}" if owner else None,
        f"Mint: {shown.name(mint)}" if mint else None,
        "",
        *listed,
        f"... and {more} more" if more > 0 else None,
    )
    return title, body


def _change_line(change: Mapping[str, Any], shown: formatting.Presentation) -> str:
    account = shown.name(change["account"])
    line = f"- {change['change']}: {account}"
    if change["change"] == "allowance_increased":
        line += (
            f" (delegate {shown.name(change.get('delegate') or '')}: allowance "
            f"{change.get('old')} -> {change.get('new')}, raw)"
        )
    elif change["change"] == "close_authority_changed":
        old, new = change.get("old"), change.get("new")
        was = shown.name(str(old)) if old else "none (the owner)"
        now = shown.name(str(new)) if new else "none (the owner)"
        line += f" (close authority {was} -> {now})"
    elif change.get("delegate"):
        word = "to" if change["change"] == "delegated" else "was"
        line += f" ({word} {shown.name(change['delegate'])})"
    if change.get("mint"):
        line += f", mint {shown.short(change['mint'])}"
    return line


KIND = base.Kind(
    model=TokenAccountsRule,
    source=SOURCE,
    wording=token_accounts_text,
    samples=samples,
    digest=base.DigestWords(
        ("token account change", "token account changes"),
        ("owner or mint", "owners or mints"),
        base.count_listed("changes"),
    ),
)
