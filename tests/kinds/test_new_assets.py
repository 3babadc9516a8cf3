"""Kind ``new_assets``: the pure cursor and step, the rule's keys, the answer models, the
simulator's asset listings over real HTTP, and paging through them with the real client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from watcher.kinds import KINDS, word
from watcher.kinds.new_assets import AssetsObservation, NewAssetsRule, new_since, request_of
from watcher.kinds.rule_files import read_rules
from watcher.ledger.models_das import Asset, AssetPage
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey

COLLECTION = derived_pubkey("collection")
CREATOR = derived_pubkey("creator")
OWNER = derived_pubkey("owner")
IDS = [derived_pubkey(f"asset-{n}") for n in range(30)]
SOURCE = KINDS["new_assets"].source
TARGET = f"collection={COLLECTION}"


def asset_json(asset_id: str, **change: Any) -> dict[str, Any]:
    return {
        "id": asset_id,
        "interface": "V1_NFT",
        "burnt": False,
        "content": {"json_uri": "https://x/1.json", "metadata": {"name": "Lad", "symbol": ""}},
        "grouping": [{"group_key": "collection", "group_value": COLLECTION}],
        "creators": [{"address": CREATOR, "share": 100, "verified": True}],
        "ownership": {"owner": OWNER, "frozen": False, "delegated": False, "delegate": None},
        **change,
    }


def asset(asset_id: str) -> Asset:
    return Asset.model_validate(asset_json(asset_id))


# -- the cursor ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listed", "recent", "new", "found"),
    [
        (["c", "b", "a"], ["a"], ["c", "b"], True),
        (["c", "b", "a"], ["c", "b"], [], True),
        (["c", "b", "a"], ["x", "b"], ["c"], True),  # x (gone) is skipped: b still marks the end
        (["c", "b"], ["x"], ["c", "b"], False),
        ([], ["a"], [], False),
    ],
)
def test_new_since_stops_at_the_first_known_id(
    listed: list[str], recent: list[str], new: list[str], found: bool
) -> None:
    assert new_since(listed, recent) == (new, found)


@given(st.lists(st.sampled_from(IDS[:10]), unique=True), st.integers(0, 10))
def test_every_asset_added_after_the_cursor_is_new_once(listed: list[str], cut: int) -> None:
    # listed is newest first; the poll before saw everything from position ``cut`` on.
    recent = listed[cut:]
    new, found = new_since(listed, recent)
    assert new == listed[: min(cut, len(listed))]
    assert found == bool(recent)


# -- the step --------------------------------------------------------------------------------


def test_baseline_then_one_digest_oldest_first() -> None:
    rules = [NewAssetsRule(name="mints", collection=COLLECTION)]
    first = SOURCE.step(rules, TARGET, None, AssetsObservation((asset(IDS[0]),), False), 0.0)
    assert first.alerts == ()
    assert first.state["recent"] == [IDS[0]]
    seen = AssetsObservation((asset(IDS[2]), asset(IDS[1])), found=True)
    second = SOURCE.step(rules, TARGET, first.state, seen, 60.0)
    [alert] = second.alerts
    assert second.state["recent"] == [IDS[2], IDS[1], IDS[0]]
    worded = word(alert, rules[0])
    short = f"{COLLECTION[:4]}…{COLLECTION[-4:]}"
    assert worded.title == f"[WARNING] mints: 2 new assets in collection {short}"
    body = worded.body.splitlines()
    assert body.index(f"- Lad {IDS[1]} (V1_NFT), owner {OWNER}") < body.index(
        f"- Lad {IDS[2]} (V1_NFT), owner {OWNER}"
    )
    nothing = AssetsObservation((), found=True)
    assert SOURCE.step(rules, TARGET, second.state, nothing, 120.0).alerts == ()


def test_all_known_assets_gone_is_doubted_until_confirmed() -> None:
    state = {"v": 1, "recent": [IDS[0], IDS[1]], "rules": ["mints"], "seq": 1}
    doubt = SOURCE.doubt(state, AssetsObservation((asset(IDS[5]),), found=False), 0.0)
    assert doubt is not None and doubt.confirmable
    assert SOURCE.doubt(state, AssetsObservation((asset(IDS[5]),), found=True), 0.0) is None
    capped = AssetsObservation((asset(IDS[5]),), found=False, complete=False)
    assert SOURCE.doubt(state, capped, 0.0) is None  # many new ones: taken, "at least"


# -- the rule --------------------------------------------------------------------------------


def test_queries_and_their_requests() -> None:
    creator = NewAssetsRule(name="c", creator=CREATOR, only_verified=True)
    assert creator.targets == (f"creator={CREATOR},verified",)
    assert creator.watched == (CREATOR,)
    method, params = request_of(creator.targets[0], 2, 50)
    assert (method, params) == (
        "getAssetsByCreator",
        [CREATOR, True, {"sortBy": "created", "sortDirection": "desc"}, 50, 2],
    )
    search = NewAssetsRule.model_validate(
        {"name": "s", "search": {"ownerAddress": OWNER, "interface": "V1_NFT"}}
    )
    method, params = request_of(search.targets[0], 1, 10)
    assert method == "searchAssets" and len(params) == 24
    assert (params[2], params[3], params[19:22]) == (
        "V1_NFT",
        OWNER,
        [{"sortBy": "created", "sortDirection": "desc"}, 10, 1],
    )
    assert search.watched == (search.targets[0],)


def test_rule_mistakes_are_reported_at_their_line(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(
        "rules:\n"
        f"  - name: a\n    kind: new_assets\n    collection: {COLLECTION}\n"
        f"    creator: {CREATOR}\n"
        "  - name: b\n    kind: new_assets\n    search: {owner: x}\n"
        f"  - name: c\n    kind: new_assets\n    collection: {COLLECTION}\n"
        "    only_verified: true\n"
    )
    _, problems = read_rules([path], None)
    text = [str(problem) for problem in problems]
    assert any(f"{path}:2:" in line and "exactly one of collection" in line for line in text)
    assert any(f"{path}:8:" in line and "owner" in line for line in text)
    assert any(f"{path}:9:" in line and "only_verified goes with creator" in line for line in text)


# -- the answer models -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"interface": "V9_NFT"},
        {"burnt": "false"},
        {"id": "not base58 0OIl"},
        {"ownership": {"owner": OWNER, "frozen": 0}},
        {"creators": [{"address": CREATOR, "share": 101, "verified": True}]},
    ],
)
def test_a_malformed_asset_is_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Asset.model_validate(asset_json(IDS[0], **change))


def test_a_page_repeating_an_asset_is_refused() -> None:
    one = asset_json(IDS[0])
    AssetPage.model_validate({"total": 1, "limit": 2, "page": 1, "items": [one]})
    with pytest.raises(ValidationError):
        AssetPage.model_validate({"total": 2, "limit": 2, "page": 1, "items": [one, one]})


# -- the simulator and the client ------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[SimulatorServer]:
    ledger = Ledger(seed=5)
    assets = das_of(ledger).assets
    for n, asset_id in enumerate(IDS[:25]):
        assets.set_asset(
            asset_id,
            owner=OWNER,
            collection=COLLECTION,
            name=f"Lad #{n}",
            creators=((CREATOR, n % 2 == 0),),
        )
    with SimulatorServer(ledger) as server:
        yield server


def call(server: SimulatorServer, method: str, params: list[Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer: dict[str, Any] = httpx.post(server.url, json=body, timeout=5).json()
    return answer


def test_simulator_lists_newest_first_by_page(server: SimulatorServer) -> None:
    newest = {"sortBy": "created", "sortDirection": "desc"}
    page = call(server, "getAssetsByGroup", ["collection", COLLECTION, newest, 10, 1])["result"]
    assert (page["total"], page["limit"], page["page"]) == (25, 10, 1)
    assert [item["id"] for item in page["items"]] == IDS[24:14:-1]
    last = call(server, "getAssetsByGroup", ["collection", COLLECTION, newest, 10, 3])["result"]
    assert [item["id"] for item in last["items"]] == IDS[4::-1]
    verified = call(server, "getAssetsByCreator", [CREATOR, True])["result"]
    assert verified["total"] == 13
    found = call(server, "searchAssets", [None, None, "V1_NFT", OWNER])["result"]
    assert found["total"] == 25
    AssetPage.model_validate(page)


# The asset object of the interface, every field (token_info: only when getAssets is asked
# showFungible), and the fields of its objects.
ASSET_FIELDS = {
    "interface",
    "id",
    "content",
    "authorities",
    "compression",
    "grouping",
    "royalty",
    "creators",
    "ownership",
    "uses",
    "supply",
    "mutable",
    "burnt",
}
CONTENT_FIELDS = {"$schema", "json_uri", "files", "metadata", "links"}
COMPRESSION_FIELDS = {
    "eligible",
    "compressed",
    "data_hash",
    "creator_hash",
    "asset_hash",
    "tree",
    "seq",
    "leaf_id",
}
ROYALTY_FIELDS = {
    "royalty_model",
    "target",
    "percent",
    "basis_points",
    "primary_sale_happened",
    "locked",
}
OWNERSHIP_FIELDS = {"owner", "frozen", "delegated", "delegate", "ownership_model"}


def fields_of(asset: dict[str, Any]) -> dict[str, set[str]]:
    return {
        "asset": set(asset),
        "content": set(asset["content"]),
        "compression": set(asset["compression"]),
        "royalty": set(asset["royalty"]),
        "ownership": set(asset["ownership"]),
    }


EVERY_FIELD = {
    "asset": ASSET_FIELDS,
    "content": CONTENT_FIELDS,
    "compression": COMPRESSION_FIELDS,
    "royalty": ROYALTY_FIELDS,
    "ownership": OWNERSHIP_FIELDS,
}


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("getAssetsByGroup", ["collection", COLLECTION, None, 3]),
        ("getAssetsByCreator", [CREATOR, False, None, 3]),
        ("searchAssets", [None, None, "V1_NFT", OWNER]),
    ],
)
def test_simulator_answers_every_field_of_an_asset(
    server: SimulatorServer, method: str, params: list[Any]
) -> None:
    items = call(server, method, params)["result"]["items"]
    assert items and all(fields_of(item) == EVERY_FIELD for item in items)
    assert all(item["uses"] is None and item["supply"] is None for item in items)  # none here


def test_simulator_get_assets_answers_every_field_and_token_info_when_asked(
    server: SimulatorServer,
) -> None:
    [plain] = call(server, "getAssets", [[IDS[0]]])["result"]
    assert fields_of(plain) == EVERY_FIELD
    [fungible] = call(server, "getAssets", [[IDS[0]], {"showFungible": True}])["result"]
    assert fields_of(fungible) == {**EVERY_FIELD, "asset": ASSET_FIELDS | {"token_info"}}
    assert fungible["token_info"] is None


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("getAssetsByGroup", ["collection"]),
        ("getAssetsByGroup", ["collection", COLLECTION, {"sortBy": "price"}]),
        ("getAssetsByGroup", ["collection", COLLECTION, None, 1001]),
        ("getAssetsByGroup", ["collection", COLLECTION, None, 10, 0]),
        ("getAssetsByCreator", ["nope"]),
        ("searchAssets", [None, None, "V9_NFT"]),
    ],
)
def test_simulator_refuses_bad_params(
    server: SimulatorServer, method: str, params: list[Any]
) -> None:
    assert call(server, method, params)["error"]["code"] == -32602


async def test_observe_pages_down_to_the_last_seen(
    server: SimulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("watcher.kinds.new_assets.PAGE_LIMIT", 4)
    state = {"v": 1, "recent": [IDS[3], IDS[2]], "rules": [], "seq": 1}
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        seen = await SOURCE.observe(client, TARGET, state)
        assert seen.found and [a.id for a in seen.assets] == IDS[24:3:-1]
        monkeypatch.setattr("watcher.kinds.new_assets.MAX_PAGES", 2)
        capped = await SOURCE.observe(client, TARGET, state)
        assert not capped.complete and len(capped.assets) == 8
        baseline = await SOURCE.observe(client, TARGET, None)
    assert len(baseline.assets) == 25 and not baseline.found
