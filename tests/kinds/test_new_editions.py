"""Kind ``new_editions``: the pure step, the answer model, the simulator's getNftEditions over
real HTTP and paging through it with the real client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from watcher.kinds import KINDS, word
from watcher.kinds.new_editions import EditionsObservation, NewEditionsRule, new_editions
from watcher.ledger.models_das import Edition, EditionList
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey

MASTER = derived_pubkey("master")
PRINTS = [derived_pubkey(f"print-{n}") for n in range(1, 31)]
SOURCE = KINDS["new_editions"].source


def editions(*numbers: int) -> tuple[Edition, ...]:
    return tuple(Edition(mint=PRINTS[n - 1], edition=n) for n in numbers)


def seen(*numbers: int, max_supply: int | None = 30) -> EditionsObservation:
    return EditionsObservation(editions(*numbers), len(numbers), max_supply)


@given(st.sets(st.integers(1, 30)), st.integers(0, 30))
def test_every_edition_above_the_last_seen_is_new_once(numbers: set[int], last: int) -> None:
    fresh = new_editions(editions(*numbers), last)
    assert [e.edition for e in fresh] == sorted(n for n in numbers if n > last)


def test_baseline_then_new_prints_with_supply() -> None:
    rules = [NewEditionsRule(name="prints", mints=(MASTER,))]
    first = SOURCE.step(rules, MASTER, None, seen(1, 2), 0.0)
    assert first.alerts == () and first.state["seen"] == 2
    second = SOURCE.step(rules, MASTER, first.state, seen(1, 2, 3, 4), 60.0)
    [alert] = second.alerts
    worded = word(alert, rules[0])
    short = f"{MASTER[:4]}…{MASTER[-4:]}"
    assert worded.title == f"[WARNING] prints: 2 new editions of {short} (supply 4 of 30)"
    assert f"- edition #3: {PRINTS[2]}" in worded.body
    # A print burnt (no longer listed) is not news; nor is its number coming back.
    burnt = SOURCE.step(rules, MASTER, second.state, seen(1, 2, 3), 120.0)
    assert burnt.alerts == () and burnt.state["seen"] == 4
    unlimited = SOURCE.step(rules, MASTER, burnt.state, seen(1, 2, 3, 5, max_supply=None), 180.0)
    assert "(supply 4 of unlimited)" in word(unlimited.alerts[0], rules[0]).title


def test_an_unfinished_listing_is_never_evidence() -> None:
    partial = EditionsObservation(editions(1), 1, None, complete=False)
    doubt = SOURCE.doubt(None, partial, 0.0)
    assert doubt is not None and not doubt.confirmable


@pytest.mark.parametrize(
    "change",
    [
        {"supply": 5, "max_supply": 4},
        {"editions": [{"mint": PRINTS[0], "edition": 1}, {"mint": PRINTS[1], "edition": 1}]},
        {"editions": [{"mint": PRINTS[0], "edition": 0}]},
        {"editions": [{"mint": "0OIl", "edition": 1}]},
        {"supply": "1"},
    ],
)
def test_a_malformed_edition_list_is_refused(change: dict[str, Any]) -> None:
    good = {
        "total": 1,
        "limit": 10,
        "page": 1,
        "supply": 1,
        "max_supply": 10,
        "editions": [{"mint": PRINTS[0], "edition": 1}],
    }
    EditionList.model_validate(good)
    with pytest.raises(ValidationError):
        EditionList.model_validate({**good, **change})


@pytest.fixture
def server() -> Iterator[SimulatorServer]:
    ledger = Ledger(seed=2)
    eds = das_of(ledger).editions
    eds.set_master(MASTER, 30)
    for mint in PRINTS[:25]:
        eds.print_edition(MASTER, mint)
    with SimulatorServer(ledger) as server:
        yield server


def call(server: SimulatorServer, params: list[Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "getNftEditions", "params": params}
    answer: dict[str, Any] = httpx.post(server.url, json=body, timeout=5).json()
    return answer


def test_simulator_lists_prints_by_page(server: SimulatorServer) -> None:
    page = call(server, [MASTER, 3, 10])["result"]
    assert (page["total"], page["supply"], page["max_supply"], page["page"]) == (25, 25, 30, 3)
    assert [e["edition"] for e in page["editions"]] == list(range(21, 26))
    for params in ([PRINTS[0]], [MASTER, 0], [MASTER, 1, 1001], [MASTER, None, None, "x"], []):
        assert call(server, params)["error"]["code"] == -32602


async def test_observe_reads_every_page(
    server: SimulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("watcher.kinds.new_editions.PAGE_LIMIT", 10)
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        observed = await SOURCE.observe(client, MASTER, None)
        assert [e.edition for e in observed.editions] == list(range(1, 26))
        assert observed.complete and observed.max_supply == 30
        monkeypatch.setattr("watcher.kinds.new_editions.MAX_PAGES", 2)
        assert not (await SOURCE.observe(client, MASTER, None)).complete
