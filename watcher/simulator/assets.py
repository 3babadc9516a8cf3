"""The simulator's digital assets: getAssetsByGroup, getAssetsByCreator, searchAssets.

Assets are listed in creation order (the order they were added), or by the ``sortBy`` asked for
(``created``, ``id``; ``updated`` and ``recent_action`` as ``created``; ``none``: by id),
``sortDirection`` ``asc`` (default for ``id``) or ``desc`` (default otherwise). ``page`` counts
from 1; ``before``/``after`` are asset ids in that order (exclusive), not combined with
``page``. Default and maximum ``limit``: 1000.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final, get_args

from watcher.core.das_interfaces import NonCoreInterface
from watcher.simulator.params import (
    _checked_pubkey,
    _positional,
    invalid_params,
)

MAX_LIMIT: Final = 1000
# The interfaces the simulator knows (a rule test's assets are of these: ``watcher.ruletest``).
AssetInterface = NonCoreInterface
INTERFACES: Final = frozenset(get_args(AssetInterface))
# searchAssets' positions (0-based) of the criteria the simulator knows.
SEARCH_POSITIONS: Final = {
    "negate": 0,
    "conditionType": 1,
    "interface": 2,
    "ownerAddress": 3,
    "ownerType": 4,
    "creatorAddress": 5,
    "creatorVerified": 6,
    "authorityAddress": 7,
    "grouping": 8,
    "delegateAddress": 9,
    "frozen": 10,
    "supply": 11,
    "supplyMint": 12,
    "compressed": 13,
    "compressible": 14,
    "royaltyTargetType": 15,
    "royaltyTarget": 16,
    "royaltyAmount": 17,
    "burnt": 18,
    "sortBy": 19,
    "limit": 20,
    "page": 21,
    "before": 22,
    "after": 23,
    "jsonUri": 24,
}
_SIMULATED = frozenset(
    {
        "interface",
        "ownerAddress",
        "creatorAddress",
        "creatorVerified",
        "grouping",
        "delegateAddress",
        "frozen",
        "burnt",
        "jsonUri",
        "sortBy",
        "limit",
        "page",
        "before",
        "after",
    }
)


@dataclass(frozen=True)
class Asset:
    id: str
    owner: str
    created: int  # creation order
    interface: str = "V1_NFT"
    name: str = ""
    json_uri: str = ""
    collection: str | None = None
    creators: tuple[tuple[str, bool], ...] = ()  # (address, verified)
    delegate: str | None = None
    frozen: bool = False
    burnt: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self, *, fungible: bool = False) -> dict[str, Any]:
        """Every field of an asset, null where the asset has none (``uses``, ``supply``, from
        ``extra``); ``token_info`` only when asked for (``fungible``: getAssets' showFungible)."""
        share = 100 // len(self.creators) if self.creators else 0
        return {
            "interface": self.interface,
            "id": self.id,
            "content": {
                "$schema": "https://schema.metaplex.com/nft1.0.json",
                "json_uri": self.json_uri,
                "files": [],
                "metadata": {"name": self.name, "symbol": "", "description": "", "attributes": []},
                "links": {},
            },
            "authorities": [],
            "compression": {
                "eligible": False,
                "compressed": False,
                "data_hash": "",
                "creator_hash": "",
                "asset_hash": "",
                "tree": "",
                "seq": 0,
                "leaf_id": 0,
            },
            "grouping": (
                [{"group_key": "collection", "group_value": self.collection}]
                if self.collection
                else []
            ),
            "royalty": {
                "royalty_model": "creators",
                "target": None,
                "percent": 0.0,
                "basis_points": 0,
                "primary_sale_happened": False,
                "locked": False,
            },
            "creators": [
                {"address": address, "share": share, "verified": verified}
                for address, verified in self.creators
            ],
            "ownership": {
                "owner": self.owner,
                "frozen": self.frozen,
                "delegated": self.delegate is not None,
                "delegate": self.delegate,
                "ownership_model": "single",
            },
            "uses": self.extra.get("uses"),
            "supply": self.extra.get("supply"),
            "mutable": True,
            "burnt": self.burnt,
        } | ({"token_info": self.extra.get("token_info")} if fungible else {})


class AssetStore:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._assets: dict[str, Asset] = {}
        self._created = 0

    def set_asset(self, asset_id: str, **fields: Any) -> None:
        """Adds an asset (``owner`` required; created now) or changes the fields given."""
        with self._lock:
            known = self._assets.get(asset_id)
            if known is None:
                if fields.get("owner") is None:
                    raise ValueError(f"a new asset {asset_id} needs an owner")
                self._created += 1
                known = Asset(asset_id, fields.pop("owner"), self._created)
            self._assets[asset_id] = replace(known, **fields)

    def asset(self, asset_id: str) -> Asset | None:
        with self._lock:
            return self._assets.get(asset_id)

    def all(self) -> list[Asset]:
        with self._lock:
            return list(self._assets.values())

    # -- the RPC methods -------------------------------------------------------------------

    def get_assets_by_group(self, params: list[Any]) -> Any:
        key = _positional(params, 0, required=True)
        value = _positional(params, 1, required=True)
        if key != "collection" or not isinstance(value, str):
            raise invalid_params("Invalid params: groupKey must be collection, with a value")
        return self._page([asset for asset in self.all() if asset.collection == value], params, 2)

    def get_assets_by_creator(self, params: list[Any]) -> Any:
        creator = _checked_pubkey(_positional(params, 0, required=True))
        only_verified = _positional(params, 1, required=False)
        if only_verified is not None and not isinstance(only_verified, bool):
            raise invalid_params("Invalid params: onlyVerified must be a boolean")
        matching = [
            asset
            for asset in self.all()
            if any(
                address == creator and (verified or not only_verified)
                for address, verified in asset.creators
            )
        ]
        return self._page(matching, params, 2)

    def search_assets(self, params: list[Any]) -> Any:
        given = {
            name: params[position]
            for name, position in SEARCH_POSITIONS.items()
            if position < len(params) and params[position] is not None
        }
        unknown = sorted(set(given) - _SIMULATED)
        if unknown:
            raise invalid_params(f"Invalid params: the simulator does not search by {unknown}")
        if "interface" in given and given["interface"] not in INTERFACES:
            raise invalid_params(f"Invalid params: unknown variant `{given['interface']}`")
        matching = [asset for asset in self.all() if _matches(asset, given)]
        return self._page(matching, params, 19)

    def _page(self, assets: list[Asset], params: list[Any], at: int) -> dict[str, Any]:
        """Sort, then one page: ``params[at:at+5]`` are sortBy, limit, page, before, after."""
        sort = _positional(params, at, required=False) or {}
        limit = _count(_positional(params, at + 1, required=False), "limit")
        page = _count(_positional(params, at + 2, required=False), "page")
        before = _positional(params, at + 3, required=False)
        after = _positional(params, at + 4, required=False)
        if not isinstance(sort, dict):
            raise invalid_params("Invalid params: sortBy must be an object")
        by = sort.get("sortBy", "created")
        if by not in ("created", "updated", "recent_action", "id", "none"):
            raise invalid_params(f"Invalid params: unknown variant `{by}`")
        direction = sort.get("sortDirection", "asc" if by in ("id", "none") else "desc")
        if direction not in ("asc", "desc"):
            raise invalid_params(f"Invalid params: unknown variant `{direction}`")
        if limit is not None and not 1 <= limit <= MAX_LIMIT:
            raise invalid_params(f"Invalid params: limit must be 1 to {MAX_LIMIT}")
        if page is not None and page < 1:
            raise invalid_params("Invalid params: page starts at 1")
        if page is not None and (before or after):
            raise invalid_params("Invalid params: page cannot be combined with before/after")
        limit = limit or MAX_LIMIT
        ordered = sorted(
            assets,
            key=(lambda a: a.id) if by in ("id", "none") else (lambda a: (a.created, a.id)),
            reverse=direction == "desc",
        )
        ids = [asset.id for asset in ordered]
        for mark in (after, before):
            if mark is not None and mark not in ids:
                raise invalid_params(f"Invalid params: unknown asset id {mark}")
        if after is not None:
            ordered = ordered[ids.index(after) + 1 :]
        if before is not None:
            ordered = ordered[: [a.id for a in ordered].index(before)]
        start = ((page or 1) - 1) * limit if page is not None else 0
        items = ordered[start : start + limit]
        result: dict[str, Any] = {
            "total": len(assets),
            "limit": limit,
            "items": [a.to_json() for a in items],
        }
        if page is not None:
            result["page"] = page
        return result

    def get_assets(self, params: list[Any]) -> Any:
        ids = _positional(params, 0, required=True)
        if not isinstance(ids, list) or not ids or len(ids) > MAX_LIMIT:
            raise invalid_params(f"Invalid params: ids must be a list of 1 to {MAX_LIMIT} ids")
        config = _positional(params, 1, required=False)
        if config is not None and not isinstance(config, dict):
            raise invalid_params("Invalid params: invalid type: expected a config object")
        fungible = bool(config and config.get("showFungible"))
        found = [self.asset(_checked_pubkey(asset_id)) for asset_id in ids]
        return [None if asset is None else asset.to_json(fungible=fungible) for asset in found]

    def handlers(self) -> dict[str, Callable[[list[Any]], Any]]:
        return {
            "getAssets": self.get_assets,
            "getAssetsByGroup": self.get_assets_by_group,
            "getAssetsByCreator": self.get_assets_by_creator,
            "searchAssets": self.search_assets,
        }


def _count(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid_params(f"Invalid params: invalid type for `{name}`: expected u32")
    return value


def _matches(asset: Asset, given: dict[str, Any]) -> bool:
    tests: dict[str, Callable[[Any], bool]] = {
        "interface": lambda v: asset.interface == v,
        "ownerAddress": lambda v: asset.owner == v,
        "creatorAddress": lambda v: any(a == v for a, _ in asset.creators),
        "creatorVerified": lambda v: any(verified == v for _, verified in asset.creators),
        "grouping": lambda v: list(v) == ["collection", asset.collection],
        "delegateAddress": lambda v: asset.delegate == v,
        "frozen": lambda v: asset.frozen == v,
        "burnt": lambda v: asset.burnt == v,
        "jsonUri": lambda v: asset.json_uri == v,
    }
    return all(test(given[name]) for name, test in tests.items() if name in given)
