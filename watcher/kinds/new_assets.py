"""Kind ``new_assets``: assets new in a collection (getAssetsByGroup), by a creator
(getAssetsByCreator) or matching a search (searchAssets), newest first (source ``assets``).

A target is one query: ``collection=MINT``, ``creator=PUBKEY`` (``creator=PUBKEY,verified``
with ``only_verified``) or ``search={json of the criteria, keys sorted}``.

State per target: ``{"v": 1, "recent": [ids, newest first, at most KEPT], "rules": [...],
"seq": N}``. Each poll lists the assets newest first (sorted by ``created``), page by page, until
one of ``recent`` shows up: what comes before it is new. The first poll only reads one page.

Doubts: a listing that ends without any asset of ``recent`` (all of them gone at once) is taken
once seen three polls in a row (then everything listed counts as new).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from watcher.alerting import formatting, messages
from watcher.config.rule_models import EventRule, PositiveDuration, Pubkey
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds import base
from watcher.kinds.toolkit.alert_samples import sample_key
from watcher.ledger.models_das import Asset
from watcher.ledger.plausibility import Doubt, SlotTip, picture_of

STATE_VERSION = 1
PAGE_LIMIT = 100  # most polls find the last seen asset on the first page
BASELINE_LIMIT = 50  # the first poll reads this many, newest first
KEPT = 50  # ids kept as the cursor: one of them is enough to find where new assets end
MAX_PAGES = 50  # more new assets than this many pages in one poll: the rest is not listed
LISTED = 20
NEWEST_FIRST = {"sortBy": "created", "sortDirection": "desc"}

Interface = Literal[
    "V1_NFT",
    "V1_PRINT",
    "LEGACY_NFT",
    "V2_NFT",
    "FungibleAsset",
    "Custom",
    "Identity",
    "Executable",
]


class Search(BaseModel):
    """searchAssets' criteria, by the service's names, camelCase (sorting and paging are the
    daemon's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    negate: bool | None = None
    conditionType: Literal["all", "any"] | None = None
    interface: Interface | None = None
    ownerAddress: Pubkey | None = None
    ownerType: Literal["single", "token"] | None = None
    creatorAddress: Pubkey | None = None
    creatorVerified: bool | None = None
    authorityAddress: Pubkey | None = None
    grouping: Annotated[tuple[str, str], Field()] | None = None
    delegateAddress: Pubkey | None = None
    frozen: bool | None = None
    supply: Annotated[int, Field(ge=0)] | None = None
    supplyMint: Pubkey | None = None
    compressed: bool | None = None
    compressible: bool | None = None
    royaltyTargetType: Literal["creators", "fanout", "single"] | None = None
    royaltyTarget: Pubkey | None = None
    royaltyAmount: Annotated[int, Field(ge=0)] | None = None
    burnt: bool | None = None
    jsonUri: str | None = None

    @model_validator(mode="after")
    def _some_criterion(self) -> Search:
        if not self.model_fields_set:
            raise ValueError("name at least one criterion")
        return self

    def key(self) -> str:
        return json.dumps(self.model_dump(exclude_none=True), sort_keys=True, separators=(",", ":"))


# searchAssets' positional order; sortBy, limit, page, before, after sit at 19..23, jsonUri at 24.
SEARCH_ORDER = (
    "negate",
    "conditionType",
    "interface",
    "ownerAddress",
    "ownerType",
    "creatorAddress",
    "creatorVerified",
    "authorityAddress",
    "grouping",
    "delegateAddress",
    "frozen",
    "supply",
    "supplyMint",
    "compressed",
    "compressible",
    "royaltyTargetType",
    "royaltyTarget",
    "royaltyAmount",
    "burnt",
)


class NewAssetsRule(EventRule):
    kind: Literal["new_assets"] = "new_assets"
    collection: Pubkey | None = None
    creator: Pubkey | None = None
    only_verified: bool = False
    search: Search | None = None
    every: PositiveDuration = 60.0

    @model_validator(mode="after")
    def _exactly_one_query(self) -> NewAssetsRule:
        given = [key for key in ("collection", "creator", "search") if getattr(self, key)]
        if len(given) != 1:
            raise ValueError("name exactly one of collection, creator, search")
        if self.only_verified and not self.creator:
            raise ValueError("only_verified goes with creator")
        return self

    @property
    def targets(self) -> tuple[str, ...]:
        if self.collection:
            return (f"collection={self.collection}",)
        if self.creator:
            return (f"creator={self.creator}" + (",verified" if self.only_verified else ""),)
        assert self.search is not None
        return (f"search={self.search.key()}",)

    @property
    def watched(self) -> tuple[str, ...]:
        return (self.collection or self.creator or self.targets[0],)


def request_of(target: str, page: int, limit: int) -> tuple[str, list[Any]]:
    """The method and positional params of one page (newest first) of a target's listing."""
    what, _, value = target.partition("=")
    tail = [NEWEST_FIRST, limit, page]
    if what == "collection":
        return "getAssetsByGroup", ["collection", value, *tail]
    if what == "creator":
        creator, _, verified = value.partition(",")
        return "getAssetsByCreator", [creator, verified == "verified", *tail]
    criteria = json.loads(value)
    params: list[Any] = [criteria.get(name) for name in SEARCH_ORDER]
    params += [*tail, None, None]
    if "jsonUri" in criteria:
        params.append(criteria["jsonUri"])
    return "searchAssets", params


def subject_of(target: str) -> str:
    what, _, value = target.partition("=")
    return value.partition(",")[0] if what in ("collection", "creator") else target


# -- what is new (pure) ----------------------------------------------------------------------


def new_since(listed: Sequence[str], recent: Sequence[str]) -> tuple[list[str], bool]:
    """The ids listed (newest first) before the first one of ``recent``, and whether one was
    found."""
    known = set(recent)
    for index, asset_id in enumerate(listed):
        if asset_id in known:
            return list(listed[:index]), True
    return list(listed), False


@dataclass(frozen=True)
class AssetsObservation:
    assets: tuple[Asset, ...]  # newest first, down to the first known one (or the end)
    found: bool  # one of the state's recent ids was listed
    complete: bool = True  # False: stopped at MAX_PAGES


class AssetsSource(base.Slotless):
    name = "assets"
    facts = base.SourceFacts(("getAssetsByGroup/Creator/searchAssets",))
    rule_kinds: tuple[str, ...] = ("new_assets",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> AssetsObservation:
        recent: list[str] = list((state or {}).get("recent", ()))
        if not state or "recent" not in state:
            method, params = request_of(target, 1, BASELINE_LIMIT)
            page = await ledger.get_asset_page(method, params)
            return AssetsObservation(tuple(page.items), found=False)
        listed: list[Asset] = []
        for number in range(1, MAX_PAGES + 1):
            method, params = request_of(target, number, PAGE_LIMIT)
            page = await ledger.get_asset_page(method, params)
            fresh, found = new_since([asset.id for asset in page.items], recent)
            listed += page.items[: len(fresh)]
            if found or len(page.items) < PAGE_LIMIT:
                return AssetsObservation(tuple(listed), found=found)
        return AssetsObservation(tuple(listed), found=False, complete=False)

    def doubt(
        self,
        state: TargetState | None,
        observation: AssetsObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        if not state or not state.get("recent") or observation.found or not observation.complete:
            return None
        reason = f"none of the {len(state['recent'])} newest assets seen is listed any more"
        return Doubt(reason, picture_of([asset.id for asset in observation.assets][:KEPT]))

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: AssetsObservation,
        now: float,
    ) -> StepOutcome:
        watching = base.watching(rules, NewAssetsRule, target)
        seen, seq = base.baselines(state)
        recent: list[str] = list((state or {}).get("recent", ()))
        ids = [asset.id for asset in observation.assets]
        alerts: list[AlertMessage] = []
        if state and "recent" in state and observation.assets:
            for rule in watching:
                if rule.name in seen:
                    alerts.append(_alert(rule, target, observation, seq))
        new_state: TargetState = {
            "v": STATE_VERSION,
            "recent": (ids + [i for i in recent if i not in set(ids)])[:KEPT],
            **base.baselines_state(seen, (rule.name for rule in watching), seq),
        }
        return StepOutcome(state=new_state, alerts=tuple(alerts))


def _alert(
    rule: NewAssetsRule, target: str, observation: AssetsObservation, seq: int
) -> AlertMessage:
    what, subject = target.partition("=")[0], subject_of(target)
    facts = {
        "query": what,
        "of": subject,
        "count": len(observation.assets),
        "complete": observation.complete,
        "assets": [
            {
                "id": asset.id,
                "name": asset.content.metadata.name,
                "interface": asset.interface,
                "owner": asset.ownership.owner,
                "collection": asset.collection,
            }
            for asset in reversed(observation.assets)  # oldest first, as they were made
        ],
    }
    key = f"{rule.name}|{target}|listing-{seq}|event"
    return messages.make_alert(rule, subject=subject, reason="event", dedup_key=key, facts=facts)


def samples(rule: NewAssetsRule) -> list[AlertMessage]:
    """One event listing two new assets (``watcher check``)."""
    made = tuple(
        Asset.model_validate(
            {
                "id": sample_key(f"asset {n}"),
                "interface": "V1_NFT",
                "burnt": False,
                "content": {
                    "json_uri": "https://example.com/a.json",
                    "metadata": {"name": f"A {n}"},
                },
                "grouping": [{"group_key": "collection", "group_value": sample_key("collection")}],
                "ownership": {"owner": sample_key("owner"), "frozen": False},
            }
        )
        for n in (2, 1)
    )
    return [_alert(rule, rule.targets[0], AssetsObservation(made, found=True), 1)]


SOURCE = AssetsSource()


# -- wording ---------------------------------------------------------------------------------


def new_assets_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    assets: Sequence[Mapping[str, Any]] = facts["assets"]
    noun = formatting.plural(len(assets), "new asset")
    if not facts.get("complete", True):
        noun = f"{noun} (at least)"
    query, of = facts["query"], facts["of"]
    where = (
        f"by creator {shown.short(of)}"
        if query == "creator"
        else (
            f"in collection {shown.short(of)}" if query == "collection" else "matching the search"
        )
    )
    title = f"{messages.rule_head(facts)} {noun} {where}"
    listed: list[str | None] = []
    for asset in assets[:LISTED]:
        name = f"{asset['name']} " if asset.get("name") else ""
        line = f"- {name}{asset['id']} ({asset['interface']}), owner {shown.name(asset['owner'])}"
        listed += [line, shown.link("address", asset["id"])]
    more = len(assets) - LISTED
    body = formatting.lines(
        messages.rule_line(facts),
        f"Collection: {shown.name(of)}" if query == "collection" else None,
        f"Creator: {shown.name(of)}" if query == "creator" else None,
        f"Search: {of.partition('=')[2]}" if query == "search" else None,
        "",
        *listed,
        f"... and {more} more" if more > 0 else None,
    )
    return title, body


def _query_named(facts: Mapping[str, Any]) -> base.Named:
    """A query in a digest as its lone alert's body says it: its collection or creator, or
    its search criteria (no link)."""
    query, of = facts["query"], str(facts["of"])
    if query in ("collection", "creator"):
        return base.Named(of, "address", noun=str(query).capitalize())
    return base.Named(of.partition("=")[2], "", noun="Search")


KIND = base.Kind(
    model=NewAssetsRule,
    source=SOURCE,
    wording=new_assets_text,
    samples=samples,
    digest=base.DigestWords(
        ("new asset", "new assets"),
        ("query", "queries"),
        base.count_listed("assets"),
        subject_named=_query_named,
    ),
)
