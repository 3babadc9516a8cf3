"""What the validator kinds need to script on the fake cluster (a part of ``Ledger``): a
validator voting N slots behind, its credits of the current epoch, its commission and stake."""

from __future__ import annotations

import threading
from collections.abc import Callable

from watcher.simulator.validators import Validators

MAX_EPOCH_CREDITS = 5  # a node reports the last five epochs


class Votes:
    """Changes to the vote accounts of ``validators`` in epoch ``epoch``. Every public method
    takes ``lock`` (the ledger's) and calls ``changed`` after a change."""

    def __init__(
        self,
        lock: threading.RLock,
        changed: Callable[[], None],
        *,
        validators: Validators,
        epoch: int,
    ) -> None:
        self._lock = lock
        self._changed = changed
        self._validators = validators
        self._epoch = epoch

    def update_validator(
        self,
        pubkey: str,
        *,
        behind: int | None = None,
        credits: int | None = None,
        commission: int | None = None,
        stake: int | None = None,
        balance: int | None = None,
    ) -> None:
        """Changes the vote account(s) of ``pubkey`` (vote or node pubkey); None keeps a value.
        ``behind``: it votes that many slots behind the tip (128 or more: delinquent);
        ``credits``: what it earned so far in the current epoch; ``balance``: its vote account's
        lamports (drained under the ticket's minimum, or topped up)."""
        checked = (("behind", behind), ("credits", credits), ("stake", stake), ("balance", balance))
        for name, value in checked:
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative")
        if commission is not None and not 0 <= commission <= 100:
            raise ValueError("commission is a percentage from 0 to 100")
        with self._lock:
            for validator in self._validators.matching(pubkey):
                if behind is not None:
                    validator.lag, validator.frozen_last_vote = behind, None
                if credits is not None:
                    validator.epoch_credits = _with_credits(
                        validator.epoch_credits, self._epoch, credits
                    )
                if commission is not None:
                    validator.commission = commission
                if stake is not None:
                    validator.stake = stake
                if balance is not None:
                    validator.balance = balance
            self._changed()


def _with_credits(entries: list[list[int]], epoch: int, earned: int) -> list[list[int]]:
    """``entries`` with the current epoch's entry saying ``earned`` credits (cumulative)."""
    older = [entry for entry in entries if entry[0] < epoch]
    previous = older[-1][1] if older else 0
    return [*older, [epoch, previous + earned, previous]][-MAX_EPOCH_CREDITS:]
