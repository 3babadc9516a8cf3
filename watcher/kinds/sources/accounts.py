"""Source ``accounts``: one account per target, read with getMultipleAccounts (up to 100 keys
per call), or a token account's balance with getTokenAccountBalance (target ``token:ADDRESS``).

Kinds riding it (``balance_below``, ``account_changed``) name a *part* (``Kind.part``),
composed into the source when the registry is built (``composed``): the part's pure step gets
the rules of its kind and its own slice of the target's state (``state[kind]``). Polls of one
round run concurrently; ``AccountBatcher`` gathers the keys asked for by one reader in one round
into calls of at most 100 keys (the one place that chunks getMultipleAccounts). A failed call
fails every target of its chunk: never evidence.

State: ``{"v": 1, "slot": context slot, "seen": what the account was, KIND: the part's state,
...}``. An answer older in slots than the last one taken is stale (not taken). ``seen`` (the
lamports, owner and data hash, or a token account's amount) changes only when the account
does, unlike the slot: it tells activity from a quiet poll (``activity_keys``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.metric_values import Sample, sol
from watcher.ledger.models import TokenAmount
from watcher.ledger.models_accounts import MAX_KEYS_PER_CALL, Account

TOKEN_PREFIX = "token:"
WAKE_PER_TURN = 10  # polls a getMultipleAccounts answer wakes per turn of the event loop
STATE_VERSION = 1


def token_target(address: str) -> str:
    return TOKEN_PREFIX + address


def address_of(target: str) -> str:
    return target.removeprefix(TOKEN_PREFIX)


def chunks(keys: Sequence[str], size: int = MAX_KEYS_PER_CALL) -> list[list[str]]:
    """Distinct keys, in order, in lists of at most ``size``."""
    distinct = list(dict.fromkeys(keys))
    return [distinct[start : start + size] for start in range(0, len(distinct), size)]


@dataclass(frozen=True)
class AccountRead:
    account: Account | None  # None: the account does not exist
    slot: int


class AccountBatcher:
    """Reads of single accounts made in the same round (concurrent polls) by one reader become
    getMultipleAccounts calls of at most 100 keys each."""

    def __init__(self) -> None:
        self._pending: dict[
            int, tuple[base.LedgerReader, dict[str, asyncio.Future[AccountRead]]]
        ] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def read(self, ledger: base.LedgerReader, key: str) -> AccountRead:
        loop = asyncio.get_running_loop()
        entry = self._pending.get(id(ledger))
        if entry is None:
            entry = self._pending[id(ledger)] = (ledger, {})
            task = loop.create_task(self._flush(id(ledger)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        future = entry[1].get(key)
        if future is None:
            future = entry[1][key] = loop.create_future()
        return await asyncio.shield(future)

    async def _flush(self, reader_id: int) -> None:
        for _ in range(3):  # let the other polls of the round ask first
            await asyncio.sleep(0)
        ledger, futures = self._pending.pop(reader_id)
        calls = (self._call(ledger, chunk, futures) for chunk in chunks(list(futures)))
        await asyncio.gather(*calls)

    @staticmethod
    async def _call(
        ledger: base.LedgerReader, keys: list[str], futures: dict[str, asyncio.Future[AccountRead]]
    ) -> None:
        try:
            answer = await ledger.get_multiple_accounts(keys)
        except Exception as exc:  # handed to every waiting poll
            for key in keys:
                futures[key].set_exception(exc)
                futures[key].exception()  # retrieved here too: a cancelled poll must not warn
            return
        # A few polls woken per turn of the loop: the hundred this call serves, all at once (and
        # the other calls' of the batch with them), would hold it for tens of milliseconds.
        try:
            for index, (key, account) in enumerate(zip(keys, answer.value, strict=True)):
                if index and not index % WAKE_PER_TURN:
                    await asyncio.sleep(0)
                futures[key].set_result(AccountRead(account, answer.context.slot))
        except asyncio.CancelledError:
            for key in keys:
                futures[key].cancel()  # no-op for those answered already
            raise


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
        self.batcher = BATCHER
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
        read = await self.batcher.read(ledger, target)
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


# One batcher for every reader of single accounts (``vat`` reads its vote accounts through it).
BATCHER = AccountBatcher()
# The source as kinds name it: no parts (the registry composes the one it polls).
SOURCE = AccountsSource()
