"""Kind ``account_changed``: an event per change of a watched account's owner, data,
executable flag, lamports or space (``fields``; default all but lamports), or its creation or
closing (source ``accounts``: getMultipleAccounts, shared with ``balance_below``).

Data is compared by its SHA-256, never stored. The part's state slice::

    {"v": 1, "snapshot": {"owner": ..., "data_hash": ..., "executable": ..., "lamports": ...,
                          "space": ...} or null (no such account),
     "rules": [rule names that have their baseline], "seq": answers taken so far}

The first answer (for each rule) is the baseline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from watcher.alerting import formatting, messages
from watcher.config.rule_models import Backoff, EventRule, PositiveDuration, Pubkeys, _no_duplicates
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.sources.accounts import SOURCE, AccountObservation
from watcher.kinds.toolkit.alert_samples import SAMPLE_TIME, sample_account, sample_key

STATE_VERSION = 1
Field_ = Literal["owner", "data", "executable", "lamports", "space"]
DEFAULT_FIELDS: tuple[Field_, ...] = ("owner", "data", "executable", "space")
# The snapshot key of each field.
_KEYS: Mapping[str, str] = {"data": "data_hash"}


class AccountChangedRule(EventRule, Backoff):
    kind: Literal["account_changed"] = "account_changed"
    accounts: Pubkeys
    fields: Annotated[tuple[Field_, ...], Field(min_length=1), AfterValidator(_no_duplicates)] = (
        DEFAULT_FIELDS
    )
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.accounts


Snapshot = Mapping[str, Any] | None


def snapshot_of(observation: AccountObservation) -> Snapshot:
    account = observation.account
    if account is None:
        return None
    return {
        "owner": account.owner,
        "data_hash": account.data_hash,
        "executable": account.executable,
        "lamports": account.lamports,
        "space": len(account.raw_data),
    }


def account_changes(old: Snapshot, new: Snapshot, fields: Sequence[str]) -> list[dict[str, Any]]:
    """What changed among ``fields`` (pure): ``created`` / ``closed``, or one item per field."""
    if old is None and new is None:
        return []
    if old is None or new is None:
        return [{"field": "created" if old is None else "closed", "old": None, "new": None}]
    changed = []
    for name in fields:
        key = _KEYS.get(name, name)
        if old.get(key) != new.get(key):
            changed.append({"field": name, "old": old.get(key), "new": new.get(key)})
    return changed


def step_accounts(
    rules: Sequence[Any],
    target: str,
    state: TargetState | None,
    observation: AccountObservation,
    now: float,
) -> StepOutcome:
    watching = base.watching(rules, AccountChangedRule, target)
    known = state is not None and "snapshot" in state
    old: Snapshot = (state or {}).get("snapshot")
    new = snapshot_of(observation)
    baselined, seq = base.baselines(state)
    alerts: list[AlertMessage] = []
    for rule in watching:
        if known and rule.name in baselined:
            changes = account_changes(old, new, rule.fields)
            if changes:
                alerts.append(_alert(rule, target, changes, new, seq, observation.slot))
    new_state: TargetState = {
        "v": STATE_VERSION,
        "snapshot": None if new is None else dict(new),
        **base.baselines_state(baselined, (rule.name for rule in watching), seq),
    }
    return StepOutcome(state=new_state, alerts=tuple(alerts))


def _alert(
    rule: AccountChangedRule,
    account: str,
    changes: list[dict[str, Any]],
    new: Snapshot,
    seq: int,
    slot: int,
) -> AlertMessage:
    facts = {"account": account, "changes": changes, "count": len(changes), "slot": slot}
    facts["lamports"] = None if new is None else new.get("lamports")
    key = f"{rule.name}|{account}|answer-{seq}|event"
    return messages.make_alert(rule, subject=account, reason="event", dedup_key=key, facts=facts)


# -- wording ---------------------------------------------------------------------------------


def _value(field: str, value: Any, shown: formatting.Presentation) -> str:
    if field == "data":
        return f"sha256 {str(value)[:12]}…"
    if field == "owner":
        return shown.name(str(value))
    if field == "lamports":
        return formatting.sol(int(value))
    return str(value)


def _change_line(change: Mapping[str, Any], shown: formatting.Presentation) -> str:
    field = change["field"]
    if field in ("created", "closed"):
        return f"- the account was {field}"
    old, new = _value(field, change["old"], shown), _value(field, change["new"], shown)
    return f"- {field}: {old} -> {new}"


def account_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    account = facts["account"]
    changes: Sequence[Mapping[str, Any]] = facts["changes"]
    what = ", ".join(change["field"] for change in changes)
    title = f"{messages.rule_head(facts)} account {shown.short(account)} changed: {what}"
    body = formatting.lines(
        messages.rule_line(facts),
        f"Account: {shown.name(account)}",
        shown.link("address", account),
        f"At slot {facts['slot']}:",
        *(_change_line(change, shown) for change in changes),
    )
    return title, body


def samples(rule: AccountChangedRule) -> list[AlertMessage]:
    """Changed (lamports, data, owner), then closed."""
    address = rule.accounts[0]
    first = AccountObservation(address, 100, account=sample_account(10**9))
    state = step_accounts([rule], address, None, first, SAMPLE_TIME).state
    new_owner = sample_key("new owner")
    later = AccountObservation(address, 101, account=sample_account(2 * 10**9, b"v2", new_owner))
    outcome = step_accounts([rule], address, state, later, SAMPLE_TIME)
    closed = AccountObservation(address, 102)
    gone = step_accounts([rule], address, outcome.state, closed, SAMPLE_TIME)
    return [*outcome.alerts, *gone.alerts]


KIND = base.Kind(
    model=AccountChangedRule,
    source=SOURCE,
    wording=account_text,
    part=step_accounts,
    samples=samples,
    digest=base.DigestWords(
        ("account change", "account changes"), ("account", "accounts"), lambda f: 1
    ),
)
