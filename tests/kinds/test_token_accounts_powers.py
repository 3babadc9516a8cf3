"""Kind ``token_accounts``, the two changes of who can move a token account's funds:
``allowance_increased`` (the same delegate approved for more; spending part of it is none) and
``close_authority_changed``; a snapshot of an earlier version (no allowance, no close authority
kept) is their quiet baseline."""

from __future__ import annotations

import pytest

from watcher.kinds import KINDS, word
from watcher.kinds.token_accounts import (
    AccountChange,
    Flags,
    TokenAccountsObservation,
    TokenAccountsRule,
    diff_accounts,
)
from watcher.ledger.models_das import TokenAccount
from watcher.simulator.keys import derived_pubkey

A, OWNER, MINT = derived_pubkey("ta a"), derived_pubkey("ta owner"), derived_pubkey("ta mint")
DELEGATE, CLOSER = derived_pubkey("ta delegate"), derived_pubkey("ta closer")
SOURCE = KINDS["token_accounts"].source


def known(delegate: str | None = None, allowance: int = 0, closer: str | None = None) -> Flags:
    return Flags(False, delegate, allowance, closer, known=True)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            known(DELEGATE, 100),
            known(DELEGATE, 500),
            [AccountChange(A, "allowance_increased", DELEGATE, 100, 500)],
        ),
        (known(DELEGATE, 500), known(DELEGATE, 100), []),  # spent part of it
        (known(None, 0), known(DELEGATE, 500), [AccountChange(A, "delegated", DELEGATE)]),
        (
            known(),
            known(closer=CLOSER),
            [AccountChange(A, "close_authority_changed", old=None, new=CLOSER)],
        ),
        (
            known(closer=CLOSER),
            known(),
            [AccountChange(A, "close_authority_changed", old=CLOSER, new=None)],
        ),
        # A snapshot of an earlier version: the first answer is the baseline of both.
        (Flags(False, DELEGATE), known(DELEGATE, 500, CLOSER), []),
    ],
)
def test_diff(old: Flags, new: Flags, expected: list[AccountChange]) -> None:
    assert diff_accounts({A: old}, {A: new}) == expected


def test_codes_round_trip_and_read_an_earlier_versions() -> None:
    for flags in (known(), known(DELEGATE, 7, CLOSER), known(closer=CLOSER)):
        assert Flags.of_code(flags.code()) == flags
    assert Flags.of_code("F" + DELEGATE) == Flags(True, DELEGATE)


def account(delegated: int, closer: str | None) -> TokenAccount:
    return TokenAccount(
        address=A,
        mint=MINT,
        owner=OWNER,
        frozen=False,
        amount=1000,
        delegate=DELEGATE,
        delegated_amount=delegated,
        close_authority=closer,
    )


def test_the_step_words_both_changes() -> None:
    rule = TokenAccountsRule.model_validate(
        {
            "name": "delegates",
            "owners": [OWNER],
            "changes": ["allowance_increased", "close_authority_changed"],
        }
    )
    target = rule.targets[0]
    first = SOURCE.step([rule], target, None, TokenAccountsObservation((account(100, None),)), 0)
    later = TokenAccountsObservation((account(900, CLOSER),))
    [alert] = SOURCE.step([rule], target, first.state, later, 60).alerts
    body = word(alert, rule).body
    assert f"- allowance_increased: {A} (delegate {DELEGATE}: allowance 100 -> 900, raw)" in body
    assert f"- close_authority_changed: {A} (close authority none (the owner) -> {CLOSER})" in body
