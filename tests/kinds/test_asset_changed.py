"""Kind ``asset_changed``: the pure field diff and step, the simulator's getAssets over real HTTP
and the real client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.core.errors import RpcError
from watcher.kinds import KINDS, word
from watcher.kinds.asset_changed import (
    FIELDS,
    AssetChangedRule,
    AssetObservation,
    changed_fields,
)
from watcher.ledger.models_das import Asset
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey

ASSET = derived_pubkey("asset")
OWNER, BUYER, DELEGATE = (derived_pubkey(name) for name in ("owner", "buyer", "delegate"))
SOURCE = KINDS["asset_changed"].source


def asset(**ownership: Any) -> Asset:
    return Asset.model_validate(
        {
            "id": ASSET,
            "interface": "V1_NFT",
            "burnt": ownership.pop("burnt", False),
            "content": {"json_uri": ownership.pop("json_uri", "https://x/1.json")},
            "ownership": {"owner": OWNER, "frozen": False, "delegate": None, **ownership},
        }
    )


values = st.fixed_dictionaries(
    {
        "owner": st.sampled_from([OWNER, BUYER]),
        "delegate": st.sampled_from([None, DELEGATE]),
        "frozen": st.booleans(),
        "burnt": st.booleans(),
        "json_uri": st.sampled_from(["a", "b"]),
    }
)


@given(values, values)
def test_one_item_per_field_that_differs(old: dict[str, Any], new: dict[str, Any]) -> None:
    changes = changed_fields(old, new)
    assert [c["field"] for c in changes] == [f for f in FIELDS if old[f] != new[f]]
    assert all(old[c["field"]] == c["old"] and new[c["field"]] == c["new"] for c in changes)


def test_baseline_then_each_change_named_and_nothing_twice() -> None:
    rules = [AssetChangedRule(name="vault", assets=(ASSET,))]
    first = SOURCE.step(rules, ASSET, None, AssetObservation(asset()), 0.0)
    assert first.alerts == ()
    moved = AssetObservation(asset(owner=BUYER, delegate=DELEGATE))
    second = SOURCE.step(rules, ASSET, first.state, moved, 60.0)
    [alert] = second.alerts
    worded = word(alert, rules[0])
    assert worded.title.endswith(f"asset {ASSET[:4]}…{ASSET[-4:]} changed: owner, delegate")
    assert f"- owner: {OWNER} -> {BUYER}" in worded.body
    assert f"- delegate: none -> {DELEGATE}" in worded.body
    assert SOURCE.step(rules, ASSET, second.state, moved, 120.0).alerts == ()
    uri = SOURCE.step(
        rules,
        ASSET,
        second.state,
        AssetObservation(asset(owner=BUYER, delegate=DELEGATE, json_uri="https://y")),
        180.0,
    )
    assert [c["field"] for c in uri.alerts[0].facts["changes"]] == ["json_uri"]


def test_an_unknown_asset_is_never_evidence() -> None:
    doubt = SOURCE.doubt(None, AssetObservation(None), 0.0)
    assert doubt is not None and not doubt.confirmable
    assert SOURCE.doubt(None, AssetObservation(asset()), 0.0) is None


@pytest.fixture
def server() -> Iterator[SimulatorServer]:
    ledger = Ledger(seed=4)
    das_of(ledger).assets.set_asset(ASSET, owner=OWNER, frozen=True, json_uri="https://x")
    with SimulatorServer(ledger) as server:
        yield server


def test_simulator_answers_one_asset_per_id_null_when_unknown(server: SimulatorServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "getAssets", "params": [[ASSET, BUYER]]}
    known, unknown = httpx.post(server.url, json=body, timeout=5).json()["result"]
    assert unknown is None
    assert (known["ownership"]["owner"], known["ownership"]["frozen"]) == (OWNER, True)
    params: list[Any]
    for params in ([], [[]], [["nope"]], [ASSET]):
        bad = {**body, "params": params}
        assert httpx.post(server.url, json=bad, timeout=5).json()["error"]["code"] == -32602


async def test_observe_reads_the_asset(server: SimulatorServer) -> None:
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        seen = await SOURCE.observe(client, ASSET, None)
        assert seen.asset is not None and seen.asset.content.json_uri == "https://x"
        assert (await SOURCE.observe(client, BUYER, None)).asset is None
        with pytest.raises(RpcError):
            await client.get_assets(["nope"])
