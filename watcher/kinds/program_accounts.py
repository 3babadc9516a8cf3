"""Kind ``program_accounts``: accounts created or closed under a program (source ``programs``,
getProgramAccounts with the rule's filters, data sliced away).

A target is one query: ``PROGRAM`` or ``PROGRAM [filters as JSON]``.

State per target: ``{"v": 1, "accounts": [pubkeys, sorted], "rules": [...], "refused":
[rules told the answer was too large], "seq": N}``. An answer larger than a rule's
``max_accounts`` is not diffed for it: the rule gets one alert saying so (again only after an
answer within the limit), and the snapshot is kept as it was.

Doubts: every account of the snapshot gone at once is taken once seen three polls in a row. An
account the answer says another program owns is not taken while new; the same ones three polls
in a row are the ledger's own: they are then set aside (never in the snapshot, remembered in
``"set_aside"`` while listed) and the rest taken, so one odd entry never mutes the query.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from watcher.alerting import formatting, messages
from watcher.config.rule_models import EventRule, PositiveDuration, Pubkey
from watcher.core.events import SET_ASIDE_KEY, AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.alert_samples import sample_key
from watcher.ledger.plausibility import Doubt, SlotTip, picture_of

STATE_VERSION = 1
LISTED = 20
MAX_FILTERS = 4


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Memcmp(_Strict):
    offset: Annotated[int, Field(ge=0)]
    bytes: Annotated[str, Field(min_length=1, pattern="^[1-9A-HJ-NP-Za-km-z]+$")]


class Filter(_Strict):
    """``{dataSize: N}`` or ``{memcmp: {offset, bytes}}`` (bytes in base58), as the service
    takes them."""

    dataSize: Annotated[int, Field(ge=0)] | None = None  # the service's name
    memcmp: Memcmp | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Filter:
        if (self.dataSize is None) == (self.memcmp is None):
            raise ValueError("a filter is either {dataSize: N} or {memcmp: {offset, bytes}}")
        return self


class ProgramAccountsRule(EventRule):
    kind: Literal["program_accounts"] = "program_accounts"
    program: Pubkey
    filters: Annotated[tuple[Filter, ...], Field(max_length=MAX_FILTERS)] = ()
    max_accounts: Annotated[int, Field(ge=1)] = 10000
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return (self.program,)

    @property
    def targets(self) -> tuple[str, ...]:
        if not self.filters:
            return (self.program,)
        wire = [item.model_dump(exclude_none=True) for item in self.filters]
        return (f"{self.program} {json.dumps(wire, separators=(',', ':'), sort_keys=True)}",)


def query_of(target: str) -> tuple[str, list[dict[str, Any]]]:
    program, _, filters = target.partition(" ")
    return program, json.loads(filters) if filters else []


# -- the diff (pure) -------------------------------------------------------------------------


def diff_keys(old: Sequence[str], new: Sequence[str]) -> tuple[list[str], list[str]]:
    """(created, closed), each sorted."""
    before, after = set(old), set(new)
    return sorted(after - before), sorted(before - after)


# SET_ASIDE_KEY (watcher.core.events): accounts listed as another program's, taken as such


@dataclass(frozen=True)
class ProgramObservation:
    pubkeys: tuple[str, ...]
    foreign: tuple[str, ...] = ()  # accounts the answer says another program owns


class ProgramAccountsSource(base.Slotless):
    name = "programs"
    facts = base.SourceFacts(("getProgramAccounts",))
    rule_kinds: tuple[str, ...] = ("program_accounts",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> ProgramObservation:
        program, filters = query_of(target)
        accounts = await ledger.get_program_accounts(program, filters)
        foreign = tuple(a.pubkey for a in accounts if a.account.owner != program)
        return ProgramObservation(tuple(a.pubkey for a in accounts), foreign)

    def doubt(
        self,
        state: TargetState | None,
        observation: ProgramObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        foreign = sorted(set(observation.foreign) - set((state or {}).get(SET_ASIDE_KEY, ())))
        if foreign:
            reason = f"{formatting.plural(len(foreign), 'account')} owned by another program"
            return Doubt(reason, picture_of("foreign", foreign))
        if not state or "accounts" not in state:
            return None
        previous = set(state["accounts"])
        if len(previous) > 1 and not previous & set(observation.pubkeys):
            reason = f"all {len(previous)} accounts of the last snapshot gone at once"
            return Doubt(reason, picture_of(sorted(observation.pubkeys)))
        return None

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: ProgramObservation,
        now: float,
    ) -> StepOutcome:
        watching = base.watching(rules, ProgramAccountsRule, target)
        seen, seq = base.baselines(state)
        refused = set((state or {}).get("refused", ()))
        foreign = set(observation.foreign)  # another program's: never this one's accounts
        observation = replace(
            observation, pubkeys=tuple(key for key in observation.pubkeys if key not in foreign)
        )
        count = len(observation.pubkeys)
        previous: list[str] | None = (state or {}).get("accounts")
        alerts: list[AlertMessage] = []
        largest = max((rule.max_accounts for rule in watching), default=0)
        keep = count <= largest
        for rule in watching:
            if count > rule.max_accounts:
                if rule.name not in refused:
                    alerts.append(_too_many(rule, target, count, seq))
                    refused.add(rule.name)
                continue
            refused.discard(rule.name)
            if previous is None or rule.name not in seen:
                continue
            created, closed = diff_keys(previous, observation.pubkeys)
            if created or closed:
                alerts.append(_alert(rule, target, created, closed, seq))
        new_state: TargetState = {
            "v": STATE_VERSION,
            "refused": sorted(refused),
            **base.baselines_state(
                seen, (r.name for r in watching if count <= r.max_accounts), seq
            ),
        }
        if foreign:
            new_state[SET_ASIDE_KEY] = sorted(foreign)
        if keep:
            new_state["accounts"] = sorted(observation.pubkeys)
        elif previous is not None:
            new_state["accounts"] = previous
        return StepOutcome(state=new_state, alerts=tuple(alerts))


def _alert(
    rule: ProgramAccountsRule, target: str, created: list[str], closed: list[str], seq: int
) -> AlertMessage:
    program, filters = query_of(target)
    facts = {
        "program": program,
        "filters": filters,
        "count": len(created) + len(closed),
        "created": created,
        "closed": closed,
        "too_many": None,
    }
    return messages.snapshot_event(rule, subject=program, target=target, seq=seq, facts=facts)


def _too_many(rule: ProgramAccountsRule, target: str, count: int, seq: int) -> AlertMessage:
    program, filters = query_of(target)
    facts = {
        "program": program,
        "filters": filters,
        "count": 1,
        "created": [],
        "closed": [],
        "too_many": count,
        "max_accounts": rule.max_accounts,
    }
    key = f"{rule.name}|{target}|snapshot-{seq}|too-many"
    return messages.make_alert(rule, subject=program, reason="event", dedup_key=key, facts=facts)


def samples(rule: ProgramAccountsRule) -> list[AlertMessage]:
    """Accounts created and closed, then more accounts than ``max_accounts`` (``watcher check``)."""
    target = rule.targets[0]
    created, closed = [sample_key("created")], [sample_key("closed")]
    return [
        _alert(rule, target, created, closed, 1),
        _too_many(rule, target, rule.max_accounts + 1, 2),
    ]


SOURCE = ProgramAccountsSource()


# -- wording ---------------------------------------------------------------------------------


def program_accounts_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    program = facts["program"]
    filters = facts.get("filters") or []
    filter_line = f"Filters: {json.dumps(filters)}" if filters else None
    if facts.get("too_many") is not None:
        title = (
            f"{messages.rule_head(facts)} {facts['too_many']} accounts under "
            f"{shown.short(program)}, "
            f"more than max_accounts {facts['max_accounts']}: not compared"
        )
        body = formatting.lines(
            messages.rule_line(facts),
            f"Program: {shown.name(program)}",
            filter_line,
            "",
            f"getProgramAccounts answered {facts['too_many']} accounts; the rule compares at "
            f"most {facts['max_accounts']} (max_accounts). Narrow its filters or raise "
            "max_accounts; nothing is compared until an answer fits.",
        )
        return title, body
    created: Sequence[str] = facts["created"]
    closed: Sequence[str] = facts["closed"]
    noun = formatting.plural(len(created) + len(closed), "account change")
    parts = [f"{len(created)} created"] if created else []
    parts += [f"{len(closed)} closed"] if closed else []
    title = f"{messages.rule_head(facts)} {noun} under {shown.short(program)} ({', '.join(parts)})"
    listed: list[str | None] = []
    for change, keys in (("created", created), ("closed", closed)):
        for key in keys[:LISTED]:
            listed += [f"- {change}: {shown.name(key)}", shown.link("address", key)]
        if len(keys) > LISTED:
            listed.append(f"... and {len(keys) - LISTED} more {change}")
    body = formatting.lines(
        messages.rule_line(facts), f"Program: {shown.name(program)}", filter_line, "", *listed
    )
    return title, body


def _count(facts: Mapping[str, Any]) -> int:
    return int(facts.get("count") or 1)


KIND = base.Kind(
    model=ProgramAccountsRule,
    source=SOURCE,
    wording=program_accounts_text,
    samples=samples,
    digest=base.DigestWords(("account change", "account changes"), ("program", "programs"), _count),
)
