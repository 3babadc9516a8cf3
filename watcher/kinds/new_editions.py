"""Kind ``new_editions``: new print editions of watched master editions (source ``editions``,
getNftEditions, every page).

State per master mint: ``{"v": 1, "seen": highest edition number seen, "supply": N,
"max_supply": N or null, "rules": [...], "seq": N}``. Editions are numbered in print order, so
every edition above ``seen`` is new.

Doubts: an answer of more than ``MAX_PAGES`` pages is not read to the end, and never taken.
A print burnt since is simply no longer listed (its number stays seen).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from watcher.alerting import formatting, messages
from watcher.config.rule_models import EventRule, PositiveDuration, Pubkeys
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.alert_samples import sample_key
from watcher.ledger.models_das import Edition
from watcher.ledger.plausibility import Doubt, SlotTip, picture_of

STATE_VERSION = 1
PAGE_LIMIT = 1000
MAX_PAGES = 20
LISTED = 20


def new_editions(editions: Sequence[Edition], seen: int) -> list[Edition]:
    """The editions numbered above ``seen``, by number."""
    return sorted((e for e in editions if e.edition > seen), key=lambda e: e.edition)


class NewEditionsRule(EventRule):
    kind: Literal["new_editions"] = "new_editions"
    mints: Pubkeys
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.mints


@dataclass(frozen=True)
class EditionsObservation:
    editions: tuple[Edition, ...]
    supply: int
    max_supply: int | None
    complete: bool = True


class EditionsSource(base.Slotless):
    name = "editions"
    facts = base.SourceFacts(("getNftEditions",))
    rule_kinds: tuple[str, ...] = ("new_editions",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> EditionsObservation:
        editions: list[Edition] = []
        for page in range(1, MAX_PAGES + 1):
            answer = await ledger.get_nft_editions(target, page=page, limit=PAGE_LIMIT)
            editions += answer.editions
            if len(answer.editions) < PAGE_LIMIT:
                return EditionsObservation(tuple(editions), answer.supply, answer.max_supply)
        return EditionsObservation(tuple(editions), answer.supply, answer.max_supply, False)

    def doubt(
        self,
        state: TargetState | None,
        observation: EditionsObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        if not observation.complete:
            reason = f"more than {MAX_PAGES * PAGE_LIMIT} editions: not read to the end"
            return Doubt(reason, picture_of("partial"), confirmable=False)
        return None

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: EditionsObservation,
        now: float,
    ) -> StepOutcome:
        watching = base.watching(rules, NewEditionsRule, target)
        rules_seen, seq = base.baselines(state)
        top = max((e.edition for e in observation.editions), default=0)
        alerts: list[AlertMessage] = []
        if state and "seen" in state:
            fresh = new_editions(observation.editions, int(state["seen"]))
            for rule in watching:
                if fresh and rule.name in rules_seen:
                    alerts.append(_alert(rule, target, fresh, observation, seq))
            top = max(top, int(state["seen"]))
        new_state: TargetState = {
            "v": STATE_VERSION,
            "seen": top,
            "supply": observation.supply,
            "max_supply": observation.max_supply,
            **base.baselines_state(rules_seen, (rule.name for rule in watching), seq),
        }
        return StepOutcome(state=new_state, alerts=tuple(alerts))


def _alert(
    rule: NewEditionsRule,
    master: str,
    fresh: Sequence[Edition],
    observation: EditionsObservation,
    seq: int,
) -> AlertMessage:
    facts = {
        "master": master,
        "count": len(fresh),
        "supply": observation.supply,
        "max_supply": observation.max_supply,
        "editions": [{"edition": e.edition, "mint": e.mint} for e in fresh],
    }
    return messages.snapshot_event(rule, subject=master, target=master, seq=seq, facts=facts)


def samples(rule: NewEditionsRule) -> list[AlertMessage]:
    """Two new prints of the rule's first master edition, limited and not (``watcher check``)."""
    fresh = tuple(Edition(mint=sample_key(f"print {n}"), edition=n) for n in (7, 8))
    master = rule.mints[0]
    return [
        _alert(rule, master, fresh, EditionsObservation(fresh, 8, max_supply), seq)
        for seq, max_supply in ((1, 100), (2, None))
    ]


SOURCE = EditionsSource()


def new_editions_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    editions: Sequence[Mapping[str, Any]] = facts["editions"]
    master = facts["master"]
    of = "unlimited" if facts.get("max_supply") is None else f"{facts['max_supply']:,}"
    supply = f"supply {facts['supply']:,} of {of}"
    title = (
        f"{messages.rule_head(facts)} {formatting.plural(len(editions), 'new edition')} of "
        f"{shown.short(master)} ({supply})"
    )
    listed: list[str | None] = []
    for edition in editions[:LISTED]:
        listed += [
            f"- edition #{edition['edition']}: {shown.name(edition['mint'])}",
            shown.link("address", edition["mint"]),
        ]
    more = len(editions) - LISTED
    body = formatting.lines(
        messages.rule_line(facts),
        f"Master edition: {shown.name(master)}",
        shown.link("address", master),
        f"Prints: {supply}",
        "",
        *listed,
        f"... and {more} more" if more > 0 else None,
    )
    return title, body


KIND = base.Kind(
    model=NewEditionsRule,
    source=SOURCE,
    wording=new_editions_text,
    samples=samples,
    digest=base.DigestWords(
        ("new edition", "new editions"),
        ("master edition", "master editions"),
        base.count_listed("editions"),
    ),
)
