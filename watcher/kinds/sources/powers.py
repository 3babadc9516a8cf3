"""What the account-decoding kinds of "who can move the funds" share (``token_authorities``,
``upgrade_authority``, ``multisig_changed``): a set of watched accounts read with
getMultipleAccounts, each decoded into its *powers* (who holds which authority, a threshold...),
diffed field by field against the last poll's.

A target is a rule's accounts, comma-separated (sorted): one poll reads them all (100 keys a
call), so that a rule's first poll is one inventory. State::

    {"v": 1, "powers": {account: {field: value}}, "rules": [...], "seq": N,
     "unverified": {rule: {account: {"since", "why", "n"}}}}

An account that does not exist or does not decode as what the rule says it is cannot be
verified: one state alert per account and rule (resolved once it decodes), its last powers kept
as they were. A provider refusing the call (a permanent error) is that alert for every account
of the call; a transient failure fails the poll (never evidence).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from watcher.alerting import formatting, messages
from watcher.config.rule_models import EventRule, PositiveDuration
from watcher.core.clock import iso
from watcher.core.errors import PermanentRpcError
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.alert_samples import SAMPLE_TIME
from watcher.kinds.toolkit.layouts import NotDecodable
from watcher.kinds.toolkit.unverified import (
    inventory_alert,
    inventory_body,
    inventory_count,
    snapshot_step,
    unverified_body,
    unverified_words,
)
from watcher.ledger.batching import chunks
from watcher.ledger.models_accounts import Account
from watcher.ledger.plausibility import Doubt, SlotTip

Powers = dict[str, Any]  # field -> a key (or None: nobody), a number, or {member: value}


class PowersRule(EventRule):
    """A rule of a powers kind: its accounts (``watched``), ``inventory``, ``every``."""

    inventory: bool = True
    every: PositiveDuration = 60.0

    @property
    def targets(self) -> tuple[str, ...]:
        return (",".join(sorted(self.watched)),)


@dataclass(frozen=True)
class PowersObservation:
    powers: Mapping[str, Powers]
    unverifiable: Mapping[str, str] = field(default_factory=dict)  # account -> why


async def read_accounts(
    ledger: base.LedgerReader, keys: Sequence[str]
) -> tuple[dict[str, Account | None], str | None]:
    """The accounts (None: no such account), 100 keys a call; or, when the provider refuses
    the call, nothing and its error."""
    read: dict[str, Account | None] = {}
    for chunk in chunks(keys):
        try:
            answer = await ledger.get_multiple_accounts(chunk)
        except PermanentRpcError as exc:
            return {}, f"the provider refused getMultipleAccounts: {exc}"
        read.update(zip(chunk, answer.value, strict=True))
    return read, None


def decoded_each(
    keys: Sequence[str],
    read: Mapping[str, Account | None],
    refused: str | None,
    decode: Callable[[str, bytes], Powers],
    what: str,
) -> PowersObservation:
    """Each account decoded by ``decode(owner, data)``, or why it cannot be verified."""
    powers: dict[str, Powers] = {}
    unverifiable: dict[str, str] = {}
    for key in keys:
        if refused is not None:
            unverifiable[key] = refused
            continue
        account = read.get(key)
        if account is None:
            unverifiable[key] = f"no such account: not a {what}"
            continue
        try:
            powers[key] = decode(account.owner, account.raw_data)
        except NotDecodable as exc:
            unverifiable[key] = f"not a {what}: {exc}"
    return PowersObservation(powers, unverifiable)


Reader = Callable[[base.LedgerReader, Sequence[str]], Awaitable[PowersObservation]]


def decoding_reader(decode: Callable[[str, bytes], Powers], what: str) -> Reader:
    """The ``Reader`` of a kind whose accounts each decode on their own (a mint, a multisig):
    the accounts read, then each decoded by ``decode(owner, data)`` as a ``what``."""

    async def read(ledger: base.LedgerReader, keys: Sequence[str]) -> PowersObservation:
        accounts, refused = await read_accounts(ledger, keys)
        return decoded_each(keys, accounts, refused, decode, what)

    return read


class PowersSource(base.Slotless):
    """One powers kind's source: ``read`` turns a rule's accounts into their powers."""

    def __init__(self, name: str, kind: str, read: Reader, keys_per_call: int = 100) -> None:
        self.name = name
        # A target is a rule's accounts, comma-separated, read up to ``keys_per_call`` a call.
        self.facts = base.SourceFacts(
            ("getMultipleAccounts",), keys_per_call=keys_per_call, joined=True
        )
        self.rule_kinds: tuple[str, ...] = (kind,)
        self._read = read

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> PowersObservation:
        return await self._read(ledger, target.split(","))

    def doubt(
        self,
        state: TargetState | None,
        observation: PowersObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        return None  # each account is compared on its own; an undecodable one is said so

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: PowersObservation,
        now: float,
    ) -> StepOutcome:
        watching = [
            rule
            for rule in base.watching(rules, PowersRule, target)
            if rule.kind in self.rule_kinds
        ]
        previous: dict[str, Any] | None = (state or {}).get("powers")
        powers: dict[str, Any] = {**(previous or {}), **observation.powers}
        found = diff_powers(previous, observation)

        def inventory(rule: PowersRule, seq: int) -> AlertMessage | None:
            return _inventory(rule, target, powers, observation, seq) if rule.inventory else None

        def changes(rule: PowersRule, seq: int) -> list[AlertMessage]:
            return [_change_alert(rule, change, seq) for change in found]

        return snapshot_step(
            watching,
            state,
            ("powers", powers),
            now=now,
            inventory=inventory,
            changes=changes,
            failing={account: (why, {}) for account, why in observation.unverifiable.items()},
            facts_of=_unverified_facts,
        )


# -- the diff (pure) -------------------------------------------------------------------------


def diff_powers(
    previous: Mapping[str, Powers] | None, observation: PowersObservation
) -> list[dict[str, Any]]:
    """Each change of a power, by account then field: ``{"account", "field", "old", "new"}``
    (``"member"`` too for an entry of a mapping, e.g. a multisig's members: ``old`` None, it
    was added; ``new`` None, removed). An account decoded for the first time after the baseline
    (it could not be verified before) is one change of ``field`` "*", its powers as ``new``."""
    if previous is None:
        return []
    changes: list[dict[str, Any]] = []
    for account, now in sorted(observation.powers.items()):
        before = previous.get(account)
        if before is None:
            changes.append({"account": account, "field": "*", "old": None, "new": now})
            continue
        for name in sorted(before.keys() | now.keys()):
            old, new = before.get(name), now.get(name)
            if old == new:
                continue
            if isinstance(old, Mapping) or isinstance(new, Mapping):
                old_map, new_map = old or {}, new or {}
                for member in sorted(old_map.keys() | new_map.keys()):
                    if old_map.get(member) != new_map.get(member):
                        changes.append(
                            {
                                "account": account,
                                "field": name,
                                "member": member,
                                "old": old_map.get(member),
                                "new": new_map.get(member),
                            }
                        )
                continue
            changes.append({"account": account, "field": name, "old": old, "new": new})
    return changes


# -- alerts ----------------------------------------------------------------------------------


def _change_alert(rule: PowersRule, change: Mapping[str, Any], seq: int) -> AlertMessage:
    account = change["account"]
    facts = {"what": "change", "member": None, **change, "count": 1}
    member = f"/{change['member']}" if change.get("member") else ""
    key = f"{rule.name}|{account}|{change['field']}{member}|snapshot-{seq}|event"
    return messages.make_alert(rule, subject=account, reason="event", dedup_key=key, facts=facts)


def _inventory(
    rule: PowersRule,
    target: str,
    powers: Mapping[str, Powers],
    observation: PowersObservation,
    seq: int,
) -> AlertMessage:
    facts = {
        "what": "inventory",
        "accounts": [{"account": account, "powers": powers[account]} for account in sorted(powers)],
        "watched": target.split(","),
        "count": len(powers),
        "not_listed": sorted(observation.unverifiable),
    }
    return inventory_alert(rule, target, seq, facts)


def _unverified_facts(account: str, episode: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "what": "unverified",
        "account": account,
        "why": episode["why"],
        "since": iso(float(episode["since"])),
        "count": 1,
    }


# -- wording ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PowersWords:
    """How one powers kind names things: what an account is (``thing``: "mint"), each field
    (``labels``), which fields hold keys (shown as addresses; None reads ``nobody``), and an
    optional ``verb`` for a change (e.g. a program "redeployed")."""

    thing: str
    labels: Mapping[str, str]
    member: str = "member"  # what one entry of a mapping field is (a multisig's member)
    nobody: str = "none"
    verb: Callable[[Mapping[str, Any], formatting.Presentation], str | None] | None = None
    # A field's value in words (None: as a key or a number).
    show: Callable[[str, Any], str | None] | None = None

    def value(
        self, name: str, value: Any, shown: formatting.Presentation, *, short: bool = False
    ) -> str:
        said = None if self.show is None else self.show(name, value)
        if said is not None:
            return said
        if value is None:
            return self.nobody
        if isinstance(value, str):
            return shown.short(value) if short else shown.name(value)
        return str(value)

    def powers_line(self, powers: Mapping[str, Any], shown: formatting.Presentation) -> str:
        parts = []
        for name, label in self.labels.items():
            if name in powers:
                parts.append(f"{label} {self.value(name, powers[name], shown)}")
        return ", ".join(parts)


def powers_text(
    words: PowersWords,
) -> Callable[[messages.Facts, formatting.Presentation], tuple[str, str]]:
    """The default wording of a powers kind."""

    def text(
        facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
    ) -> tuple[str, str]:
        what = facts.get("what")
        if what == "inventory":
            return _inventory_text(words, facts, shown)
        if what == "unverified":
            return _unverified_text(words, facts, shown)
        return _change_text(words, facts, shown)

    return text


def _change_text(
    words: PowersWords, facts: messages.Facts, shown: formatting.Presentation
) -> tuple[str, str]:
    account, name = facts["account"], facts["field"]
    head = f"{messages.rule_head(facts)} {words.thing} {shown.short(account)}"
    body: list[str | None] = [
        messages.rule_line(facts),
        f"{words.thing.capitalize()}: {shown.name(account)}",
        shown.link("address", account),
    ]
    if name == "*":
        title = f"{head} can be verified: {words.powers_line(facts['new'], formatting.PLAIN)}"
        body.append(f"Now: {words.powers_line(facts['new'], shown)}")
        return title, formatting.lines(*body)
    label = words.labels.get(name, name)
    old, new = facts.get("old"), facts.get("new")
    special = words.verb(facts, shown) if words.verb is not None else None
    if facts.get("member"):
        member, label = facts["member"], words.member
        if old is None:
            said = f"{label} added: {shown.short(member)} ({words.value(name, new, shown)})"
        elif new is None:
            said = f"{label} removed: {shown.short(member)} (was {words.value(name, old, shown)})"
        else:
            said = (
                f"{label} {shown.short(member)} changed: {words.value(name, old, shown)} -> "
                f"{words.value(name, new, shown)}"
            )
        body += [f"Member: {shown.name(member)}", f"Was: {words.value(name, old, shown)}"]
        body.append(f"Now: {words.value(name, new, shown)}")
        return f"{head}: {said}", formatting.lines(*body)
    if special is not None:
        said = special
    elif new is None:
        said = f"{label} removed (was {words.value(name, old, shown, short=True)})"
    elif old is None:
        said = f"{label} set: {words.value(name, new, shown, short=True)}"
    else:
        said = (
            f"{label} changed: {words.value(name, old, shown, short=True)} -> "
            f"{words.value(name, new, shown, short=True)}"
        )
    body += [
        f"{label.capitalize()} was: {words.value(name, old, shown)}",
        f"{label.capitalize()} now: {words.value(name, new, shown)}",
    ]
    return f"{head}: {said}", formatting.lines(*body)


def _inventory_text(
    words: PowersWords, facts: messages.Facts, shown: formatting.Presentation
) -> tuple[str, str]:
    watched: Sequence[str] = facts["watched"]
    title = (
        f"{messages.rule_head(facts)} {formatting.plural(len(watched), 'watched ' + words.thing)}, "
        f"{len(facts['accounts'])} decoded (inventory)"
    )
    body = inventory_body(
        facts,
        shown,
        lambda entry: words.powers_line(entry["powers"], shown),
        intro=["Who holds each power at the first poll. From now on, each change is notified."],
        none="(none decoded)",
        not_listed="Cannot be verified (see its alert)",
    )
    return title, body


def _unverified_text(
    words: PowersWords, facts: messages.Facts, shown: formatting.Presentation
) -> tuple[str, str]:
    account = facts["account"]
    title, summary = unverified_words(
        facts, f"{words.thing} {shown.short(account)}", "decodes again"
    )
    about = [f"{words.thing.capitalize()}: {shown.name(account)}", shown.link("address", account)]
    return title, unverified_body(facts, about, summary)


def powers_kind(
    model: type[PowersRule],
    source: PowersSource,
    words: PowersWords,
    samples: Callable[[Any], list[AlertMessage]],
    item: tuple[str, str],
    subject: tuple[str, str],
) -> base.Kind[PowersObservation]:
    """A powers kind: worded by ``words``; its digests count ``item`` (singular, plural) per
    ``subject``, an inventory as many as it lists."""
    return base.Kind(
        model=model,
        source=source,
        wording=powers_text(words),
        samples=samples,
        digest=base.DigestWords(item, subject, inventory_count),
    )


def walk_samples(
    source: PowersSource, rule: PowersRule, first: Powers, later: Powers
) -> list[AlertMessage]:
    """A kind's samples: a change from ``first`` to ``later`` of the rule's first account, the
    inventory, then the account not decodable and decoding again (``watcher check``)."""
    target = rule.targets[0]
    account = target.split(",")[0]
    now = SAMPLE_TIME
    start = source.step([rule], target, None, PowersObservation({account: first}), now)
    moved = source.step([rule], target, start.state, PowersObservation({account: later}), now + 60)
    bad = PowersObservation({}, {account: "not decodable: 36 bytes of data"})
    fired = source.step([rule], target, moved.state, bad, now + 120)
    back = source.step([rule], target, fired.state, PowersObservation({account: later}), now + 180)
    return [*moved.alerts, *start.alerts, *fired.alerts, *back.alerts]
