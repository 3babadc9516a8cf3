"""Kind ``asset_changed``: a watched asset's owner, delegate, frozen, burnt or json_uri changed
(source ``asset``, getAssets).

State per asset: ``{"v": 1, "fields": {owner, delegate, frozen, burnt, json_uri}, "rules":
[...], "seq": N}``.

Doubts: an asset the service does not know (null), after being seen, is never taken (a burnt
asset stays listed, with ``burnt: true``).
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
from watcher.ledger.models_das import Asset
from watcher.ledger.plausibility import Doubt, SlotTip, picture_of

STATE_VERSION = 1
FIELDS = ("owner", "delegate", "frozen", "burnt", "json_uri")


def fields_of(asset: Asset) -> dict[str, Any]:
    return {
        "owner": asset.ownership.owner,
        "delegate": asset.ownership.delegate,
        "frozen": asset.ownership.frozen,
        "burnt": asset.burnt,
        "json_uri": asset.content.json_uri,
    }


def changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One item per watched field whose value differs, in ``FIELDS`` order."""
    return [
        {"field": name, "old": old.get(name), "new": new.get(name)}
        for name in FIELDS
        if old.get(name) != new.get(name)
    ]


class AssetChangedRule(EventRule):
    kind: Literal["asset_changed"] = "asset_changed"
    assets: Pubkeys
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.assets


@dataclass(frozen=True)
class AssetObservation:
    asset: Asset | None  # None: the service does not know the asset


class AssetSource(base.Slotless):
    name = "asset"
    facts = base.SourceFacts(("getAssets",))
    rule_kinds: tuple[str, ...] = ("asset_changed",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> AssetObservation:
        [asset] = await ledger.get_assets([target])
        return AssetObservation(asset)

    def doubt(
        self,
        state: TargetState | None,
        observation: AssetObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        if observation.asset is None:
            return Doubt("the service does not know this asset", picture_of("unknown"), False)
        return None

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: AssetObservation,
        now: float,
    ) -> StepOutcome:
        assert observation.asset is not None  # doubted otherwise
        new = fields_of(observation.asset)
        watching = base.watching(rules, AssetChangedRule, target)
        seen, seq = base.baselines(state)
        alerts: list[AlertMessage] = []
        if state and "fields" in state:
            changes = changed_fields(state["fields"], new)
            for rule in watching:
                if changes and rule.name in seen:
                    alerts.append(_alert(rule, observation.asset, changes, seq))
        new_state: TargetState = {
            "v": STATE_VERSION,
            "fields": new,
            **base.baselines_state(seen, (rule.name for rule in watching), seq),
        }
        return StepOutcome(state=new_state, alerts=tuple(alerts))


def _alert(
    rule: AssetChangedRule, asset: Asset, changes: list[dict[str, Any]], seq: int
) -> AlertMessage:
    facts = {
        "asset": asset.id,
        "name": asset.content.metadata.name,
        "count": len(changes),
        "changes": changes,
    }
    return messages.snapshot_event(rule, subject=asset.id, target=asset.id, seq=seq, facts=facts)


def samples(rule: AssetChangedRule) -> list[AlertMessage]:
    """One event changing every watched field of the rule's first asset (``watcher check``)."""

    def asset(owner: str, delegate: str | None, frozen: bool, uri: str) -> Asset:
        return Asset.model_validate(
            {
                "id": rule.assets[0],
                "interface": "V1_NFT",
                "burnt": frozen,
                "content": {"json_uri": uri, "metadata": {"name": "Sample"}},
                "ownership": {"owner": owner, "delegate": delegate, "frozen": frozen},
            }
        )

    before = asset(sample_key("old owner"), None, False, "https://example.com/1.json")
    after = asset(
        sample_key("new owner"), sample_key("delegate"), True, "https://example.com/2.json"
    )
    return [_alert(rule, after, changed_fields(fields_of(before), fields_of(after)), 1)]


SOURCE = AssetSource()


def asset_changed_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    changes: Sequence[Mapping[str, Any]] = facts["changes"]
    asset = facts["asset"]
    what = ", ".join(change["field"] for change in changes)
    title = f"{messages.rule_head(facts)} asset {shown.short(asset)} changed: {what}"
    name = f" ({facts['name']})" if facts.get("name") else ""
    body = formatting.lines(
        messages.rule_line(facts),
        f"Asset: {shown.name(asset)}{name}",
        shown.link("address", asset),
        f"{formatting.plural(len(changes), 'change')}:",
        "",
        *(_change_line(change, shown) for change in changes),
    )
    return title, body


def _change_line(change: Mapping[str, Any], shown: formatting.Presentation) -> str:
    def value(item: Any) -> str:
        if item is None:
            return "none"
        if isinstance(item, bool):
            return "yes" if item else "no"
        return shown.name(item) if change["field"] in ("owner", "delegate") else str(item)

    return f"- {change['field']}: {value(change['old'])} -> {value(change['new'])}"


KIND = base.Kind(
    model=AssetChangedRule,
    source=SOURCE,
    wording=asset_changed_text,
    samples=samples,
    digest=base.DigestWords(
        ("asset change", "asset changes"), ("asset", "assets"), base.count_listed("changes")
    ),
)
