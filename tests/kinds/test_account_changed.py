"""Kind account_changed: the diff of snapshots (pure), one event per change of a watched
field, data compared by hash and never stored, the rule keys."""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from watcher.core.events import TargetState
from watcher.kinds import SOURCES, word
from watcher.kinds.account_changed import AccountChangedRule, account_changes, step_accounts
from watcher.kinds.sources.accounts import AccountObservation
from watcher.ledger.models_accounts import Account

ACCOUNT = "57bSC4sKRhsLBJtVJwYrmXyacYatj4DU89zSD3GDZ55d"
SYSTEM = "11111111111111111111111111111111"
LOADER = "BPFLoaderUpgradeab1e11111111111111111111111"

ACCOUNTS = SOURCES["accounts"]  # composed of its kinds' parts


def account(
    data: bytes = b"v1", owner: str = SYSTEM, lamports: int = 1, executable: bool = False
) -> Account:
    return Account.model_validate(
        {
            "data": [base64.b64encode(data).decode(), "base64"],
            "executable": executable,
            "lamports": lamports,
            "owner": owner,
            "space": len(data),
        }
    )


def rule(**fields: Any) -> AccountChangedRule:
    return AccountChangedRule.model_validate({"name": "watch", "accounts": [ACCOUNT], **fields})


def run(
    r: AccountChangedRule, accounts: list[Account | None]
) -> tuple[list[list[str]], TargetState]:
    state: TargetState | None = None
    titles = []
    for slot, found in enumerate(accounts):
        outcome = ACCOUNTS.step(
            [r], ACCOUNT, state, AccountObservation(ACCOUNT, slot, account=found), 0.0
        )
        state = json.loads(json.dumps(outcome.state))
        titles.append([word(alert, r).title for alert in outcome.alerts])
    assert state is not None
    return titles, state


def test_default_fields_ignore_lamports_and_report_data_and_owner() -> None:
    titles, state = run(
        rule(),
        [account(), account(lamports=9), account(b"v2"), account(b"v2", owner=LOADER), None, None],
    )
    short = f"{ACCOUNT[:4]}…{ACCOUNT[-4:]}"
    assert titles == [
        [],
        [],
        [f"[WARNING] watch: account {short} changed: data"],
        [f"[WARNING] watch: account {short} changed: owner"],
        [f"[WARNING] watch: account {short} changed: closed"],
        [],
    ]
    assert "v2" not in json.dumps(state) and base64.b64encode(b"v2").decode() not in json.dumps(
        state
    )


def test_lamports_when_asked_and_the_body_lists_each_change() -> None:
    r = rule(fields=["lamports", "data", "space"])
    _, state = run(r, [account(b"ab", lamports=10**9)])
    outcome = step_accounts(
        [r],
        ACCOUNT,
        state["account_changed"],
        AccountObservation(ACCOUNT, 9, account=account(b"abc", lamports=2 * 10**9)),
        1.0,
    )
    body = word(outcome.alerts[0], r).body
    assert "- lamports: 1 SOL -> 2 SOL" in body
    assert "- space: 2 -> 3" in body
    assert "- data: sha256 fb8e20fc2e4c… -> sha256 ba7816bf8f01…" in body


SNAPSHOTS = st.none() | st.fixed_dictionaries(
    {
        "owner": st.sampled_from([SYSTEM, LOADER]),
        "data_hash": st.sampled_from(["a", "b"]),
        "executable": st.booleans(),
        "lamports": st.integers(0, 3),
        "space": st.integers(0, 2),
    }
)


@given(
    st.lists(SNAPSHOTS, min_size=2, max_size=8),
    st.sets(st.sampled_from(["owner", "data", "executable", "lamports", "space"]), min_size=1),
)
def test_one_event_per_poll_with_a_watched_change(
    snapshots: list[dict[str, Any] | None], fields: set[str]
) -> None:
    keys = {"data": "data_hash"}
    for old, new in itertools.pairwise(snapshots):
        changes = account_changes(old, new, sorted(fields))
        if old is None or new is None:
            assert len(changes) == int(old is not new)
        else:
            assert {c["field"] for c in changes} == {
                f for f in fields if old[keys.get(f, f)] != new[keys.get(f, f)]
            }


@pytest.mark.parametrize(
    "fields", [{"fields": []}, {"fields": ["rent"]}, {"fields": ["data", "data"]}]
)
def test_wrong_fields_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        rule(**fields)


def test_a_rule_new_to_an_account_takes_its_baseline_silently() -> None:
    _, state = run(rule(), [account()])
    other = AccountChangedRule.model_validate({"name": "late", "accounts": [ACCOUNT]})
    changed = AccountObservation(ACCOUNT, 5, account=account(b"v9"))
    outcome = ACCOUNTS.step([rule(), other], ACCOUNT, state, changed, 1.0)
    assert [alert.rule for alert in outcome.alerts] == ["watch"]
