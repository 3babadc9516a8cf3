"""Sample alerts of the account, fee and supply kinds, for ``watcher check`` to render a
rule's templates against (``watcher.config.template_check``): each kind's own pure step over
made-up observations, through every transition (firing, repeat, resolved; or one event)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import base58

from watcher.alerting.events import AlertMessage, TargetState
from watcher.kinds.account_changed import step_accounts
from watcher.kinds.account_source import AccountObservation, address_of
from watcher.kinds.balance import step_balances
from watcher.kinds.fee import SOURCE as FEES
from watcher.kinds.fee import FeeObservation
from watcher.kinds.supply import SOURCE as SUPPLY
from watcher.kinds.supply import SupplyObservation
from watcher.ledger.models import TokenAmount
from watcher.ledger.models_accounts import Account

SAMPLE_TIME = 1_790_000_000.0


def _key(label: str) -> str:
    return base58.b58encode(hashlib.sha256(label.encode()).digest()).decode()


def _account(lamports: int, data: bytes = b"v1", owner: str | None = None) -> Account:
    return Account(
        data=(base64.b64encode(data).decode(), "base64"),
        executable=False,
        lamports=lamports,
        owner=owner or _key("owner"),
        space=len(data),
    )


def _episodes(
    rule: Any, step: Callable[[TargetState | None, bool, float], Any]
) -> list[AlertMessage]:
    """Fire (after ``for``), repeat (when it repeats), stop holding, resolve."""
    waits = ((True, 0.0), (True, rule.for_ + 1), (True, (rule.repeat or 0.0) + 1),
             (False, 1.0), (False, rule.keep_firing_for + 1))  # fmt: skip
    state: TargetState | None = None
    now, alerts = SAMPLE_TIME, []
    for bad, wait in waits:
        now += wait
        outcome = step(state, bad, now)
        alerts += outcome.alerts
        state = outcome.state
    return alerts


def _balance(rule: Any) -> list[AlertMessage]:
    target = rule.targets[0]
    address = address_of(target)

    def observe(bad: bool) -> AccountObservation:
        if rule.token_accounts is not None:
            amount = 0 if bad else int((rule.min_amount + 1) * 10**6)
            return AccountObservation(address, 100, token=TokenAmount(amount=amount, decimals=6))
        return AccountObservation(
            address, 100, account=_account(0 if bad else int((rule.min_sol + 1) * 10**9))
        )

    return _episodes(
        rule, lambda state, bad, now: step_balances([rule], target, state, observe(bad), now)
    )


def _fee(rule: Any) -> list[AlertMessage]:
    def step(state: TargetState | None, bad: bool, now: float) -> Any:
        fee = rule.max_lamports + 1 if bad else rule.max_lamports
        return FEES.step([rule], rule.message, state, FeeObservation(fee, 100), now)

    return _episodes(rule, step)


def _supply(rule: Any) -> list[AlertMessage]:
    mint = rule.mints[0]
    first = SUPPLY.step([rule], mint, None, SupplyObservation(10**12, 6, 100), SAMPLE_TIME)
    later = SupplyObservation(10**13, 6, 101)
    return list(SUPPLY.step([rule], mint, first.state, later, SAMPLE_TIME).alerts)


def _changed(rule: Any) -> list[AlertMessage]:
    address = rule.accounts[0]
    first = AccountObservation(address, 100, account=_account(10**9))
    state = step_accounts([rule], address, None, first, SAMPLE_TIME).state
    later = AccountObservation(address, 101, account=_account(2 * 10**9, b"v2", _key("new owner")))
    alerts = list(step_accounts([rule], address, state, later, SAMPLE_TIME).alerts)
    closed = AccountObservation(address, 102)
    state = step_accounts([rule], address, state, later, SAMPLE_TIME).state
    return alerts + list(step_accounts([rule], address, state, closed, SAMPLE_TIME).alerts)


SAMPLES: Mapping[str, Callable[[Any], list[AlertMessage]]] = {
    "balance_below": _balance,
    "fee_above": _fee,
    "supply_changed": _supply,
    "account_changed": _changed,
}
