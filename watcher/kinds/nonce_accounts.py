"""Kind ``nonce_accounts``: the durable nonce accounts whose authority is a watched key (source
``nonces``): one created, closed, advanced (its stored nonce changed: a transaction signed
against it may have run) or its authority moved to another key.

A target is a rule's set of authorities, comma-separated (sorted): one poll asks, for each
authority, getProgramAccounts of the System program with ``dataSize: 80`` and a memcmp of the
authority at offset 8 (the nonce layout: ``watcher.kinds.toolkit.layouts``), data in base64. An
account the last snapshot held and the filter no longer lists is read with getMultipleAccounts: gone
(closed), or a nonce account of another authority (moved: ``authority_changed``). A new
account's creating transaction is its oldest signature (getSignaturesForAddress); who paid for
it is not visible through the service's methods (it has no transaction lookup), and the
notification says so, naming that transaction.

State: ``{"v": 1, "accounts": {account: {"authority", "nonce", "fee"}}, "rules": [...],
"seq": N, "unverified": {rule: {subject: {"since", "why", "n", "under"}}}}``.

The first poll of a rule reports what exists (``inventory: true``, the default: one ``info``
notification listing each nonce account and its authority); ``inventory: false`` takes it as a
quiet baseline. An account listed by the filter that does not decode as an initialized nonce
account of the authority it was listed under, and an authority whose call the provider refuses
(a permanent error such as "excluded from account secondary indexes": the filtered call is one
of the heaviest a node serves), are one "cannot be verified" alert each (a state alert, resolved
once it decodes or answers again); what they held is kept as it was, never diffed. A transient
failure of any call fails the poll: never evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import AfterValidator, Field

from watcher.alerting import messages
from watcher.config.rule_models import EventRule, PositiveDuration, Pubkeys, _no_duplicates
from watcher.core.clock import iso
from watcher.core.errors import PermanentRpcError
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.alert_samples import SAMPLE_TIME, sample_key
from watcher.kinds.toolkit.layouts import (
    NONCE_AUTHORITY_OFFSET,
    NONCE_SIZE,
    SYSTEM_PROGRAM,
    NonceState,
    NotDecodable,
    decode_nonce,
)
from watcher.kinds.toolkit.nonce_words import nonce_accounts_text
from watcher.kinds.toolkit.unverified import inventory_alert, inventory_count, snapshot_step
from watcher.ledger.batching import chunks
from watcher.ledger.plausibility import Doubt, SlotTip

SIGNATURE_LOOKUPS: Final = 10  # new accounts whose creating transaction one poll looks up
SIGNATURES_LIMIT: Final = 1000

Change = Literal["created", "closed", "advanced", "authority_changed"]
CHANGES: tuple[Change, ...] = get_args(Change)
Changes = Annotated[tuple[Change, ...], Field(min_length=1), AfterValidator(_no_duplicates)]


class NonceAccountsRule(EventRule):
    kind: Literal["nonce_accounts"] = "nonce_accounts"
    authorities: Pubkeys
    changes: Changes = CHANGES
    inventory: bool = True
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.authorities

    @property
    def targets(self) -> tuple[str, ...]:
        return (",".join(sorted(self.authorities)),)


def authorities_of(target: str) -> list[str]:
    return target.split(",")


def nonce_filters(authority: str) -> list[dict[str, Any]]:
    """The filters of one authority's call (bytes in base58, as the service takes them)."""
    return [
        {"dataSize": NONCE_SIZE},
        {"memcmp": {"offset": NONCE_AUTHORITY_OFFSET, "bytes": authority}},
    ]


# -- the observation (I/O) -------------------------------------------------------------------


@dataclass(frozen=True)
class NonceObservation:
    # Accounts decoded as nonce accounts of a watched authority.
    found: Mapping[str, NonceState]
    # Accounts of the last snapshot the filter no longer lists, as getMultipleAccounts reads
    # them: None, gone (or no nonce account any more); else a nonce account of another key.
    gone: Mapping[str, NonceState | None] = field(default_factory=dict)
    # What cannot be verified (an account, or an authority whose call was refused) -> why,
    # and the authority it was listed under.
    unverifiable: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    refused: frozenset[str] = frozenset()  # authorities whose call the provider refused
    # A new account -> its oldest signature (its creating transaction); None: not known.
    first_signature: Mapping[str, str | None] = field(default_factory=dict)


def _stored(entry: Mapping[str, Any]) -> NonceState:
    return NonceState("current", entry["authority"], entry["nonce"], int(entry.get("fee", 0)))


async def _first_signature(ledger: base.LedgerReader, account: str) -> str | None:
    try:
        page = await ledger.get_signatures_for_address(account, limit=SIGNATURES_LIMIT)
    except PermanentRpcError:
        return None  # only a detail of the notification: the account is reported all the same
    if not page or len(page) >= SIGNATURES_LIMIT:
        return None  # none listed, or older ones exist: the first is not on this page
    return page[-1].signature


# The nonce rules' call: one filtered getProgramAccounts over the System program per watched key
# (a target is a rule's keys, comma-separated); ``watcher check`` names it apart among the costs.
NONCE_METHOD: Final = "getProgramAccounts (nonce accounts)"


class NonceAccountsSource(base.Slotless):
    name = "nonces"
    facts = base.SourceFacts((NONCE_METHOD,), joined=True)
    rule_kinds: tuple[str, ...] = ("nonce_accounts",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> NonceObservation:
        watched = authorities_of(target)
        found: dict[str, NonceState] = {}
        unverifiable: dict[str, tuple[str, str]] = {}
        refused: set[str] = set()
        for authority in watched:
            try:
                listed = await ledger.get_program_accounts_data(
                    SYSTEM_PROGRAM, nonce_filters(authority)
                )
            except PermanentRpcError as exc:  # the provider refuses the heavy call: say so
                unverifiable[authority] = (f"the provider refused getProgramAccounts: {exc}", "")
                refused.add(authority)
                continue
            for entry in listed:
                try:
                    decoded = decode_nonce(entry.account.owner, entry.account.raw_data)
                except NotDecodable as exc:
                    unverifiable[entry.pubkey] = (str(exc), authority)
                    continue
                if decoded.authority != authority:
                    why = f"listed under authority {authority}, its data names {decoded.authority}"
                    unverifiable[entry.pubkey] = (why, authority)
                    continue
                found[entry.pubkey] = decoded
        previous: Mapping[str, Any] | None = (state or {}).get("accounts")
        gone: dict[str, NonceState | None] = {}
        if previous is not None:
            missing = [
                account
                for account, entry in previous.items()
                if account not in found
                and account not in unverifiable
                and entry["authority"] not in refused
            ]
            for keys in chunks(missing):
                answer = await ledger.get_multiple_accounts(keys)
                for account, read in zip(keys, answer.value, strict=True):
                    now: NonceState | None = None
                    if read is not None:
                        try:
                            now = decode_nonce(read.owner, read.raw_data)
                        except NotDecodable:
                            now = None  # closed as a nonce account (the key holds something else)
                    if now is not None and now.authority in watched:
                        found[account] = now  # still ours: the filter's index lagged
                    else:
                        gone[account] = now
        first: dict[str, str | None] = {}
        if previous is not None:
            new = [account for account in sorted(found) if account not in previous]
            for account in new[:SIGNATURE_LOOKUPS]:
                first[account] = await _first_signature(ledger, account)
        return NonceObservation(found, gone, unverifiable, frozenset(refused), first)

    def doubt(
        self,
        state: TargetState | None,
        observation: NonceObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        return None  # an account missing from the filter is read again before it is closed

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: NonceObservation,
        now: float,
    ) -> StepOutcome:
        watching = base.watching(rules, NonceAccountsRule, target)
        previous: dict[str, Any] | None = (state or {}).get("accounts")
        accounts: dict[str, Any] = dict(previous or {})
        for account in observation.gone:
            accounts.pop(account, None)
        for account, decoded in observation.found.items():
            accounts[account] = _entry(decoded)
        found = diff_nonces(previous, observation)

        def inventory(rule: NonceAccountsRule, seq: int) -> AlertMessage | None:
            return _inventory(rule, target, accounts, observation, seq) if rule.inventory else None

        def changes(rule: NonceAccountsRule, seq: int) -> list[AlertMessage]:
            return [_change_alert(rule, c, seq) for c in found if c["change"] in rule.changes]

        return snapshot_step(
            watching,
            state,
            ("accounts", accounts),
            now=now,
            inventory=inventory,
            changes=changes,
            failing={
                subject: (why, {"under": under})
                for subject, (why, under) in observation.unverifiable.items()
            },
            facts_of=_unverified_facts,
            # An account listed under a refused authority is not known either way: its
            # episode stays as it was.
            undecided=lambda episode: episode.get("under") in observation.refused,
        )


def _entry(decoded: NonceState) -> dict[str, Any]:
    return {
        "authority": decoded.authority,
        "nonce": decoded.nonce,
        "fee": decoded.lamports_per_signature,
    }


# -- the diff (pure) -------------------------------------------------------------------------


def diff_nonces(
    previous: Mapping[str, Any] | None, observation: NonceObservation
) -> list[dict[str, Any]]:
    """The changes from the stored accounts to the observation, by account (none without a
    previous snapshot): each ``{"change", "account", "old_authority", "new_authority",
    "old_nonce", "new_nonce", "first_signature"}``."""
    if previous is None:
        return []
    changes: list[dict[str, Any]] = []
    for account in sorted(observation.found.keys() | observation.gone.keys()):
        before = previous.get(account)
        old = None if before is None else _stored(before)
        if account in observation.gone:
            if old is None:
                continue
            moved = observation.gone[account]
            if moved is None:
                changes.append(_change("closed", account, old, None))
            else:
                changes.append(_change("authority_changed", account, old, moved))
            continue
        new = observation.found[account]
        if old is None:
            change = _change("created", account, None, new)
            change["first_signature"] = observation.first_signature.get(account)
            changes.append(change)
            continue
        if new.authority != old.authority:
            changes.append(_change("authority_changed", account, old, new))
        if new.nonce != old.nonce:
            changes.append(_change("advanced", account, old, new))
    return changes


def _change(
    change: Change, account: str, old: NonceState | None, new: NonceState | None
) -> dict[str, Any]:
    return {
        "change": change,
        "account": account,
        "old_authority": None if old is None else old.authority,
        "new_authority": None if new is None else new.authority,
        "old_nonce": None if old is None else old.nonce,
        "new_nonce": None if new is None else new.nonce,
        "first_signature": None,
    }


# -- alerts ----------------------------------------------------------------------------------


def _change_alert(rule: NonceAccountsRule, change: Mapping[str, Any], seq: int) -> AlertMessage:
    """One change, its subject the watched key it concerns (the authority it had, or has: a
    digest lists the keys)."""
    account = change["account"]
    facts = {"what": "change", **change, "count": 1}
    authority = (
        change["new_authority"] if change["change"] == "created" else change["old_authority"]
    )
    key = f"{rule.name}|{account}|{change['change']}|snapshot-{seq}|event"
    return messages.make_alert(rule, subject=authority, reason="event", dedup_key=key, facts=facts)


def _inventory(
    rule: NonceAccountsRule,
    target: str,
    accounts: Mapping[str, Any],
    observation: NonceObservation,
    seq: int,
) -> AlertMessage:
    """What exists at the rule's first poll, in one ``info`` notification, whatever the
    rule's severity."""
    listed = [
        {"account": account, "authority": entry["authority"], "nonce": entry["nonce"]}
        for account, entry in sorted(accounts.items())
    ]
    facts = {
        "what": "inventory",
        "authorities": authorities_of(target),
        "accounts": listed,
        "count": len(listed),
        "not_listed": sorted(observation.refused),
    }
    return inventory_alert(rule, target, seq, facts)


def _unverified_facts(subject: str, episode: Mapping[str, Any]) -> dict[str, Any]:
    under = episode.get("under", "")
    return {
        "what": "unverified",
        "account": subject if under else None,
        "authority": under or subject,
        "why": episode["why"],
        "since": iso(float(episode["since"])),
        "count": 1,
    }


def samples(rule: NonceAccountsRule) -> list[AlertMessage]:
    """The inventory, each change, then an account that cannot be verified and its resolution
    (``watcher check``)."""
    target = rule.targets[0]
    authority = authorities_of(target)[0]
    account, other = sample_key("nonce account"), sample_key("other authority")
    first = NonceState("current", authority, sample_key("nonce 1"), 5000)
    advanced = NonceState("current", authority, sample_key("nonce 2"), 5000)
    source = NonceAccountsSource()
    start = source.step([rule], target, None, NonceObservation({account: first}), SAMPLE_TIME)
    created = NonceObservation(
        {account: first, sample_key("new"): first},
        first_signature={sample_key("new"): sample_key("tx", 64)},
    )
    state = source.step([rule], target, start.state, created, SAMPLE_TIME)
    moved = NonceObservation({account: advanced}, gone={sample_key("new"): None})
    later = source.step([rule], target, state.state, moved, SAMPLE_TIME + 60)
    away = NonceObservation({}, gone={account: NonceState("current", other, advanced.nonce, 0)})
    last = source.step([rule], target, later.state, away, SAMPLE_TIME + 120)
    bad = NonceObservation({}, unverifiable={account: ("36 bytes of data", authority)})
    fired = source.step([rule], target, last.state, bad, SAMPLE_TIME + 180)
    resolved = source.step([rule], target, fired.state, NonceObservation({}), SAMPLE_TIME + 240)
    return [
        *state.alerts,
        *start.alerts,
        *later.alerts,
        *last.alerts,
        *fired.alerts,
        *resolved.alerts,
    ]


SOURCE = NonceAccountsSource()


KIND = base.Kind(
    model=NonceAccountsRule,
    source=SOURCE,
    wording=nonce_accounts_text,
    samples=samples,
    digest=base.DigestWords(
        ("nonce account change", "nonce account changes"),
        ("nonce account", "nonce accounts"),
        inventory_count,
    ),
)
