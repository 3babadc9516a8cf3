"""Source ``accounts``: one account per target, read with getMultipleAccounts (up to 100 keys
per call), or a token account's balance with getTokenAccountBalance (target ``token:ADDRESS``).

Kinds riding it (``balance_below``, ``account_changed``) name a *part* (``Kind.part``),
composed into the source when the registry is built (``composed``): the part's pure step gets
the rules of its kind and its own slice of the target's state (``state[kind]``). Polls of one
round run concurrently; the reader's ``shared_reads`` gathers the keys asked for in one round into
calls of at most 100 keys (``watcher.ledger.batching.AccountBatcher``). A failed call fails every
target of its chunk: never evidence.

State: ``{"v": 1, "slot": context slot, "seen": what the account was, KIND: the part's state,
...}``. An answer older in slots than the last one taken is stale (not taken). ``seen`` (the
lamports, owner and data hash, or a token account's amount) changes only when the account
does, unlike the slot: it tells activity from a quiet poll (``activity_keys``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.metric_values import Sample, sol
from watcher.ledger.models import TokenAmount
from watcher.ledger.models_accounts import MAX_KEYS_PER_CALL, Account

TOKEN_PREFIX = "token:"
STATE_VERSION = 1


def token_target(address: str) -> str:
    return TOKEN_PREFIX + address


def address_of(target: str) -> str:
    return target.removeprefix(TOKEN_PREFIX)


@dataclass(frozen=True)
class AccountObservation:
    """One target's answer: a plain account (``exists`` False: no such account) or, for a
    ``token:`` target, the token account's balance."""

    address: str
    slot: int
    account: Account | None = None
    token: TokenAmount | None = None

    @property
    def exists(self) -> bool:
        return self.account is not None or self.token is not None

    @property
    def seen(self) -> str | None:
        """What the account is, in a few characters; None: it does not exist."""
        if self.token is not None:
            return f"token {self.token.amount}"
        if self.account is not None:
            account = self.account
            return f"{account.lamports} {account.owner} {account.data_hash[:16]}"
        return None


# A kind's part: handed its own rules and its own slice of the state (kept under its kind's
# name).
Part = base.Part[AccountObservation]


def account_samples(
    rules: Sequence[Any], target: str, observation: AccountObservation
) -> tuple[Sample, ...]:
    """Source ``accounts``: a plain account's balance in SOL (one that does not exist holds 0);
    a token account's balance is not SOL and shows nothing here."""
    if observation.token is not None:
        return ()
    lamports = observation.account.lamports if observation.account is not None else 0
    return (Sample("solana_account_balance", (observation.address,), sol(lamports)),)


class AccountsSource(base.ContextSlotted[AccountObservation]):
    metric_values = staticmethod(account_samples)  # what /metrics shows of an answer
    name = "accounts"
    # Activity (a quiet target backs off): the account itself changed (lamports, owner, data).
    facts = base.SourceFacts(
        ("getMultipleAccounts",), keys_per_call=MAX_KEYS_PER_CALL, activity_keys=("seen",)
    )

    def __init__(self, parts: Mapping[str, Part] | None = None) -> None:
        self._parts: dict[str, Part] = dict(parts or {})  # by the rule kind each serves
        self.rule_kinds: tuple[str, ...] = tuple(self._parts)

    def composed(self, parts: Mapping[str, Part]) -> AccountsSource:
        """The source serving ``parts`` (by kind name; the registry's, when it is built)."""
        return AccountsSource(parts)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> AccountObservation:
        if target.startswith(TOKEN_PREFIX):
            answer = await ledger.get_token_account_balance(address_of(target))
            return AccountObservation(address_of(target), answer.context.slot, token=answer.value)
        read = await ledger.shared_reads.accounts.read(target)
        return AccountObservation(target, read.slot, account=read.account)

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: AccountObservation,
        now: float,
    ) -> StepOutcome:
        new_state: dict[str, Any] = {**(state or {}), "v": STATE_VERSION}
        new_state["slot"] = observation.slot
        new_state["seen"] = observation.seen
        alerts: list[AlertMessage] = []
        for kind, part in self._parts.items():
            theirs = [rule for rule in rules if rule.kind == kind]
            if not theirs and kind not in new_state:
                continue
            outcome = part(theirs, target, new_state.get(kind), observation, now)
            new_state[kind] = outcome.state
            alerts += outcome.alerts
        return StepOutcome(state=new_state, alerts=tuple(alerts))


# The source as kinds name it: no parts (the registry composes the one it polls).
SOURCE = AccountsSource()
