"""The ledger simulator over real HTTP: answers shaped like a mainnet node's, faults, scenarios."""

from __future__ import annotations

import io
import itertools
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from watcher.simulator import (
    DEMO,
    SCENARIOS,
    Ledger,
    ProviderLimits,
    SimulatorServer,
    Step,
    recorded,
    run_scenario,
    serve,
)
from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey
from watcher.simulator.nonces import DEMO_STAGED_NONCE, SYSTEM_PROGRAM

ADDRESS = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
MINT = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
# Key order of the recorded answers (fixtures/testnet_getSignaturesForAddress_2021-06-30.json,
# mainnet_getTokenLargestAccounts_2021-07-15.json, mainnet_getVoteAccounts_2025-08-21_sava.json,
# mainnet_getClusterNodes_2025-08-22_sava.json); newer nodes add transactionIndex.
SIGNATURE_KEYS = [
    "blockTime",
    "confirmationStatus",
    "err",
    "memo",
    "signature",
    "slot",
    "transactionIndex",
]
HOLDER_KEYS = ["address", "amount", "decimals", "uiAmount", "uiAmountString"]
VOTE_KEYS = [
    "activatedStake",
    "commission",
    "epochCredits",
    "epochVoteAccount",
    "lastVote",
    "nodePubkey",
    "rootSlot",
    "votePubkey",
]
NODE_KEYS = [
    "featureSet",
    "gossip",
    "pubkey",
    "pubsub",
    "rpc",
    "serveRepair",
    "shredVersion",
    "tpu",
    "tpuForwards",
    "tpuForwardsQuic",
    "tpuQuic",
    "tpuVote",
    "tvu",
    "version",
]
# Three entries of mainnet_getTokenLargestAccounts_2021-07-15.json, exact wire bytes.
RAY_TOP3 = (
    '[{"address":"fArUAncZwVbMimiWv5cPUfFsapdLd8QMXZE4VXqFagR","amount":"176769990000046",'
    '"decimals":6,"uiAmount":176769990.000046,"uiAmountString":"176769990.000046"},'
    '{"address":"DmKR61BQk5zJTNCK9rrt8fM8HrDH6DSdE3Rt7sXKoAKb","amount":"166500000000000",'
    '"decimals":6,"uiAmount":166500000.0,"uiAmountString":"166500000"},'
    '{"address":"HoVhs7NAzcAaavr2tc2aaTynJ6kwhdfC2B2Z7EthKpeo","amount":"111000000000000",'
    '"decimals":6,"uiAmount":111000000.0,"uiAmountString":"111000000"}]'
)


class Rpc:
    """A tiny JSON-RPC caller over a real httpx client."""

    def __init__(self, server: SimulatorServer) -> None:
        self.server = server
        self.http = httpx.Client(timeout=5)

    def post(self, body: Any, url: str | None = None, **kwargs: Any) -> httpx.Response:
        return self.http.post(url or self.server.url, json=body, **kwargs)

    def raw(self, method: str, params: list[Any] | None = None) -> httpx.Response:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
        if params is not None:
            body["params"] = params
        return self.post(body)

    def result(self, method: str, params: list[Any] | None = None) -> Any:
        answer = self.raw(method, params)
        assert answer.status_code == 200, answer.text
        assert "error" not in answer.json(), answer.text
        return answer.json()["result"]

    def error(self, method: str, params: list[Any] | None = None) -> dict[str, Any]:
        answer = self.raw(method, params)
        assert answer.status_code == 200  # JSON-RPC errors arrive with HTTP 200
        error: dict[str, Any] = answer.json()["error"]
        return error


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(seed=7)


@pytest.fixture
def mainnet() -> Ledger:
    return Ledger.from_mainnet(seed=7)


def _serve(ledger: Ledger, **options: Any) -> Iterator[Rpc]:
    with SimulatorServer(ledger, **options) as server:
        rpc = Rpc(server)
        yield rpc
        rpc.http.close()


@pytest.fixture
def rpc(ledger: Ledger) -> Iterator[Rpc]:
    yield from _serve(ledger)


@pytest.fixture
def mainnet_rpc(mainnet: Ledger) -> Iterator[Rpc]:
    yield from _serve(mainnet)


# -- getSignaturesForAddress ---------------------------------------------------------------


def test_signatures_newest_first_with_the_recorded_shape(ledger: Ledger, rpc: Rpc) -> None:
    first = ledger.add_transactions(ADDRESS, memo="hello")
    failed = ledger.add_transactions(ADDRESS, err={"InstructionError": [0, {"Custom": 1}]})
    answer = rpc.raw("getSignaturesForAddress", [ADDRESS])
    # json.loads keeps the wire's key order in dicts.
    assert list(answer.json()) == ["jsonrpc", "result", "id"]
    entries = answer.json()["result"]
    assert [list(e) for e in entries] == [SIGNATURE_KEYS, SIGNATURE_KEYS]
    assert [e["signature"] for e in entries] == failed + first
    assert entries[0]["err"] == {"InstructionError": [0, {"Custom": 1}]}
    assert entries[1]["memo"] == "[5] hello"
    assert entries[0]["slot"] > entries[1]["slot"]
    assert all(86 <= len(e["signature"]) <= 88 for e in entries)
    assert {e["confirmationStatus"] for e in entries} == {"finalized"}


def test_paging_with_exclusive_before_and_until(ledger: Ledger, rpc: Rpc) -> None:
    s = ledger.add_transactions(ADDRESS, 6)  # newest first: s[0] .. s[5]

    def page(**config: Any) -> list[str]:
        return [e["signature"] for e in rpc.result("getSignaturesForAddress", [ADDRESS, config])]

    assert page(limit=2) == s[:2]
    assert page(limit=2, before=s[1]) == s[2:4]
    assert page(until=s[3]) == s[:3]
    assert page(before=s[0], until=s[5]) == s[1:5]
    assert page(limit=2, before=s[0], until=s[5]) == s[1:3]
    # An unknown until is silently ignored; an unknown before gives nothing.
    stranger = (
        "5hxW7AwmeEW9iq1TGBDfB8CmRfTrzHoNd7TakWrDnZzUbKtdG3GXqvYpftvw4jGcH1vsUVe3b5kyjgmJHxhDAsTm"
    )
    assert page(limit=3, until=stranger) == s[:3]
    assert page(before=stranger) == []
    assert page() == s  # no upper limit given: the default 1000 covers them all


def test_default_limit_is_1000_and_before_pages_past_it(ledger: Ledger, rpc: Rpc) -> None:
    sigs = ledger.add_transactions(ADDRESS, 1205, same_slot=True)
    first = rpc.result("getSignaturesForAddress", [ADDRESS])
    assert [e["signature"] for e in first] == sigs[:1000]
    assert first[0]["transactionIndex"] == 1204 and first[-1]["transactionIndex"] == 205
    rest = rpc.result("getSignaturesForAddress", [ADDRESS, {"before": first[-1]["signature"]}])
    assert [e["signature"] for e in rest] == sigs[1000:]


@pytest.mark.parametrize("limit", [0, 1001, -1])
def test_limit_out_of_range_is_refused(rpc: Rpc, limit: int) -> None:
    error = rpc.error("getSignaturesForAddress", [ADDRESS, {"limit": limit}])
    assert error == {"code": -32602, "message": "Invalid limit; max 1000"}


def test_processed_commitment_is_refused_confirmed_accepted(rpc: Rpc) -> None:
    error = rpc.error("getSignaturesForAddress", [ADDRESS, {"commitment": "processed"}])
    assert error == {
        "code": -32602,
        "message": "Method does not support commitment below `confirmed`",
    }
    assert rpc.result("getSignaturesForAddress", [ADDRESS, {"commitment": "confirmed"}]) == []


def test_bad_keys_and_min_context_slot_get_node_errors(ledger: Ledger, rpc: Rpc) -> None:
    assert (
        rpc.error("getSignaturesForAddress", ["not-base58-0OIl"])["message"]
        == "Invalid param: Invalid"
    )
    assert rpc.error("getSignaturesForAddress", ["abc"])["message"] == "Invalid param: WrongSize"
    error = rpc.error("getSignaturesForAddress", [ADDRESS, {"minContextSlot": ledger.slot + 5}])
    assert error == {
        "code": -32016,
        "message": "Minimum context slot has not been reached",
        "data": {"contextSlot": ledger.slot},
    }


def test_ignore_until_answers_like_a_lagging_node(ledger: Ledger, rpc: Rpc) -> None:
    s = ledger.add_transactions(ADDRESS, 5)
    ledger.faults.ignore_until = True
    got = rpc.result("getSignaturesForAddress", [ADDRESS, {"until": s[1], "limit": 4}])
    assert [e["signature"] for e in got] == s[:4]  # old s[1..3] come back as if new
    ledger.faults.clear()
    got = rpc.result("getSignaturesForAddress", [ADDRESS, {"until": s[1], "limit": 4}])
    assert [e["signature"] for e in got] == s[:1]


def test_quiet_history_gives_every_unknown_address_one_old_transaction(
    ledger: Ledger, rpc: Rpc
) -> None:
    assert SCENARIOS["quiet-history"].new_ledger().old_transaction_everywhere
    ledger.old_transaction_everywhere = True

    def page(address: str, **config: Any) -> list[dict[str, Any]]:
        return list(rpc.result("getSignaturesForAddress", [address, config]))

    (old,) = page(ADDRESS)
    assert list(old) == SIGNATURE_KEYS and old["err"] is None
    assert old["blockTime"] < 1_700_000_001 and old["slot"] < recorded.MAINNET_TIP_SLOT
    assert page(ADDRESS, limit=1) == [old]  # the same every time
    assert page(ADDRESS, until=old["signature"]) == [] == page(ADDRESS, before=old["signature"])
    (other,) = page(derived_pubkey("another address"))
    assert other["signature"] != old["signature"]
    # An address with transactions of its own answers those.
    mine = ledger.add_transactions(ADDRESS)
    assert [entry["signature"] for entry in page(ADDRESS)] == mine


# -- getTokenLargestAccounts ----------------------------------------------------------------


def test_largest_accounts_match_the_recorded_wire_bytes(ledger: Ledger, rpc: Rpc) -> None:
    recorded_top3 = json.loads(RAY_TOP3)
    ledger.set_holders(MINT, [(e["address"], int(e["amount"])) for e in recorded_top3])
    answer = rpc.raw("getTokenLargestAccounts", [MINT])
    assert answer.text.startswith(
        f'{{"jsonrpc":"2.0","result":{{"context":{{"apiVersion":"2.2.7","slot":{ledger.slot}}},'
    )
    assert answer.text.endswith(',"value":' + RAY_TOP3 + '},"id":1}')


def test_largest_accounts_top_20_by_amount(ledger: Ledger, rpc: Rpc) -> None:
    holders = [(derived_pubkey(f"holder {i}"), 1000 + i) for i in range(25)]
    ledger.set_holders(MINT, holders, decimals=2)
    value = rpc.result("getTokenLargestAccounts", [MINT])["value"]
    assert [v["address"] for v in value] == [a for a, _ in reversed(holders)][:20]
    assert value[0] == {
        "address": holders[24][0],
        "amount": "1024",
        "decimals": 2,
        "uiAmount": 10.24,
        "uiAmountString": "10.24",
    }
    ledger.set_holder_amount(MINT, holders[0][0], 5000)
    ledger.remove_holder(MINT, holders[24][0])
    value = rpc.result("getTokenLargestAccounts", [MINT])["value"]
    assert value[0]["address"] == holders[0][0] and len(value) == 20
    assert holders[24][0] not in {v["address"] for v in value}
    supply = rpc.result("getTokenSupply", [MINT])["value"]
    assert supply["amount"] == str(sum(a for _, a in holders[1:24]) + 5000)


def test_largest_accounts_unknown_mint(rpc: Rpc) -> None:
    assert rpc.error("getTokenLargestAccounts", [MINT]) == {
        "code": -32602,
        "message": "Invalid param: could not find mint",
    }


def test_recorded_holders_are_served_as_recorded() -> None:
    ledger = Ledger.from_mainnet(holders_mint=MINT)
    with SimulatorServer(ledger) as server:
        rpc = Rpc(server)
        answer = rpc.raw("getTokenLargestAccounts", [MINT, {"commitment": "finalized"}])
        result = answer.json()["result"]
        assert result["value"] == recorded.token_largest_accounts()["value"]
        assert list(result) == ["context", "value"]
        assert list(result["context"]) == ["apiVersion", "slot"]
        assert {tuple(v) for v in result["value"]} == {tuple(HOLDER_KEYS)}


# -- getVoteAccounts and getClusterNodes ----------------------------------------------------


def test_mainnet_vote_accounts_are_the_recording(mainnet: Ledger, mainnet_rpc: Rpc) -> None:
    answer = mainnet_rpc.raw("getVoteAccounts", [{"commitment": "finalized"}])
    result = answer.json()["result"]
    assert (len(result["current"]), len(result["delinquent"])) == (1040, 48)
    assert result == recorded.vote_accounts()
    assert list(result) == ["current", "delinquent"]
    assert {tuple(a) for a in result["current"] + result["delinquent"]} == {tuple(VOTE_KEYS)}
    mainnet.tick(10)  # voting validators keep up with the tip; delinquent ones stay put
    later = mainnet_rpc.result("getVoteAccounts")
    assert later["current"][0]["lastVote"] == result["current"][0]["lastVote"] + 10
    assert later["delinquent"] == result["delinquent"]


def test_vote_accounts_follow_delinquency(mainnet: Ledger, mainnet_rpc: Rpc) -> None:
    vote, node = mainnet.pick_validator("2.3.6")
    only = mainnet_rpc.result("getVoteAccounts", [{"votePubkey": vote}])
    assert [a["votePubkey"] for a in only["current"]] == [vote] and only["delinquent"] == []
    mainnet.mark_delinquent(node)  # by identity
    only = mainnet_rpc.result("getVoteAccounts", [{"votePubkey": vote}])
    assert only["current"] == [] and only["delinquent"][0]["nodePubkey"] == node
    assert mainnet.slot - only["delinquent"][0]["lastVote"] > 128
    mainnet.mark_current(vote)  # by vote account
    assert mainnet_rpc.result("getVoteAccounts", [{"votePubkey": vote}])["current"]
    mainnet.remove_validator(vote)
    assert mainnet_rpc.result("getVoteAccounts", [{"votePubkey": vote}]) == {
        "current": [],
        "delinquent": [],
    }


def test_unstaked_delinquents_need_keep_unstaked(ledger: Ledger, rpc: Rpc) -> None:
    vote, node = derived_pubkey("vote"), derived_pubkey("node")
    ledger.set_validator(vote, node, stake=0, delinquent=True)
    assert rpc.result("getVoteAccounts")["delinquent"] == []
    kept = rpc.result("getVoteAccounts", [{"keepUnstakedDelinquents": True}])["delinquent"]
    assert [a["votePubkey"] for a in kept] == [vote]
    assert [list(a) for a in kept] == [VOTE_KEYS]


def test_mainnet_cluster_nodes_and_stake_by_version(mainnet_rpc: Rpc) -> None:
    answer = mainnet_rpc.raw("getClusterNodes")
    nodes = answer.json()["result"]
    assert len(nodes) == 6455 and nodes == recorded.cluster_nodes()
    assert {tuple(n) for n in nodes} == {tuple(NODE_KEYS)}
    votes = mainnet_rpc.result("getVoteAccounts")
    version = {n["pubkey"]: n["version"] for n in nodes}
    stake: Counter[str] = Counter()
    for account in votes["current"] + votes["delinquent"]:
        stake[version.get(account["nodePubkey"]) or "?"] += account["activatedStake"]
    total = sum(stake.values())
    share = {v: s / total for v, s in stake.items()}
    assert 0.75 < share["2.3.6"] < 0.77 and 0.10 < share["2.3.5"] < 0.12
    frankendancer = sum(s for v, s in share.items() if v.startswith("0.70"))
    assert 0.10 < frankendancer < 0.12


def test_nodes_drift_and_vanish(mainnet: Ledger, mainnet_rpc: Rpc) -> None:
    _, node = mainnet.pick_validator("2.3.6")
    feature_set = mainnet.node(node)["featureSet"]  # type: ignore[index]
    mainnet.set_node(node, version="2.3.5")
    by_key = {n["pubkey"]: n for n in mainnet_rpc.result("getClusterNodes")}
    assert by_key[node]["version"] == "2.3.5" and by_key[node]["featureSet"] == feature_set
    mainnet.set_node(node, version="3.0.0", feature_set=688298317)
    mainnet.remove_node(DEMO.drift_node)
    newcomer = derived_pubkey("new node")
    mainnet.set_node(newcomer, version=None)
    by_key = {n["pubkey"]: n for n in mainnet_rpc.result("getClusterNodes")}
    assert (by_key[node]["version"], by_key[node]["featureSet"]) == ("3.0.0", 688298317)
    assert DEMO.drift_node not in by_key
    assert list(by_key[newcomer]) == NODE_KEYS and by_key[newcomer]["version"] is None


# -- faults ---------------------------------------------------------------------------------


def test_http_429_carries_retry_after_then_recovers(ledger: Ledger, rpc: Rpc) -> None:
    ledger.faults.inject("http_429", retry_after=3)
    answer = rpc.raw("getClusterNodes")
    assert answer.status_code == 429 and answer.headers["Retry-After"] == "3"
    assert rpc.result("getClusterNodes") == []


@pytest.mark.parametrize(("kind", "status"), [("http_502_html", 502), ("http_503_html", 503)])
def test_proxy_errors_come_as_html(ledger: Ledger, rpc: Rpc, kind: str, status: int) -> None:
    ledger.faults.inject(kind, count=2)
    for _ in range(2):
        answer = rpc.raw("getVoteAccounts")
        assert answer.status_code == status
        assert answer.headers["Content-Type"].startswith("text/html")
        assert answer.text.startswith("<html>")
    assert rpc.raw("getVoteAccounts").status_code == 200


def test_garbage_and_truncated_bodies_are_not_json(ledger: Ledger, rpc: Rpc) -> None:
    ledger.add_transactions(ADDRESS, 3)
    whole = rpc.raw("getSignaturesForAddress", [ADDRESS]).text
    for kind in ("garbage", "truncated_json"):
        ledger.faults.inject(kind)
        answer = rpc.raw("getSignaturesForAddress", [ADDRESS])
        assert answer.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(answer.text)
    assert whole.startswith(answer.text) and 0 < len(answer.text) < len(whole)


def test_rpc_errors_in_a_200(ledger: Ledger, rpc: Rpc) -> None:
    ledger.faults.inject("rpc_error")
    ledger.faults.inject("rpc_error", code=-32009, message="Slot 5 was skipped")
    ledger.faults.inject("rpc_429")
    assert rpc.error("getVoteAccounts") == {
        "code": -32005,
        "message": "Node is behind by 42 slots",
        "data": {"numSlotsBehind": 42},
    }
    assert rpc.error("getVoteAccounts") == {"code": -32009, "message": "Slot 5 was skipped"}
    assert rpc.error("getVoteAccounts")["code"] == 429
    assert ledger.faults.pending() == 0


def test_wrong_shape_keeps_the_envelope(ledger: Ledger, rpc: Rpc) -> None:
    ledger.faults.inject("wrong_shape", method="getSignaturesForAddress")
    ledger.faults.inject("wrong_shape", method="getVoteAccounts")
    assert isinstance(rpc.result("getSignaturesForAddress", [ADDRESS]), dict)
    assert isinstance(rpc.result("getVoteAccounts"), list)
    assert isinstance(rpc.result("getSignaturesForAddress", [ADDRESS]), list)


def test_timeout_then_the_next_call_answers(ledger: Ledger, rpc: Rpc) -> None:
    ledger.faults.inject("timeout", seconds=5)
    with pytest.raises(httpx.ReadTimeout):
        rpc.http.post(
            rpc.server.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "getClusterNodes"},
            timeout=0.3,
        )
    assert rpc.result("getClusterNodes") == []


def test_faults_wait_for_their_method(ledger: Ledger, rpc: Rpc) -> None:
    ledger.faults.inject("http_503_html", method="getTokenLargestAccounts")
    assert rpc.raw("getVoteAccounts").status_code == 200
    assert ledger.faults.pending() == 1
    assert rpc.raw("getTokenLargestAccounts", [MINT]).status_code == 503
    with pytest.raises(ValueError, match="unknown fault kind"):
        ledger.faults.inject("meteor")


# -- the wire: batches, keys, sizes -----------------------------------------------------------


def test_batch_answers_in_order(ledger: Ledger, rpc: Rpc) -> None:
    sig = ledger.add_transactions(ADDRESS)
    ledger.faults.inject("rpc_error", method="getClusterNodes")
    calls = [
        {"jsonrpc": "2.0", "id": i, "method": m, "params": p}
        for i, (m, p) in enumerate(
            [("getSignaturesForAddress", [ADDRESS]), ("getClusterNodes", []), ("nope", [])]
        )
    ]
    answer = rpc.post(calls)
    assert answer.status_code == 200
    first, second, third = answer.json()
    assert first == {"jsonrpc": "2.0", "result": first["result"], "id": 0}
    assert [e["signature"] for e in first["result"]] == sig
    assert second["error"]["code"] == -32005 and second["id"] == 1
    assert third["error"] == {"code": -32601, "message": "Method not found"}
    assert rpc.server.count() == 3 and {r.batch_size for r in rpc.server.requests} == {3}


def test_batch_over_the_limit_and_empty_batch(ledger: Ledger) -> None:
    for rpc in _serve(ledger, limits=ProviderLimits(batch_limit=5)):
        call = {"jsonrpc": "2.0", "id": 1, "method": "getClusterNodes"}
        assert rpc.post([call] * 5).status_code == 200
        over = rpc.post([call] * 6)
        assert over.status_code == 413 and over.json()["error"]["code"] == -32600
        assert rpc.post([]).json()["error"] == {"code": -32600, "message": "Invalid request"}


def test_wrong_or_missing_key_is_401_and_recorded(rpc: Rpc) -> None:
    base = rpc.server.url.rsplit("/", 1)[0]
    body = {"jsonrpc": "2.0", "id": 1, "method": "getClusterNodes"}
    for url in (base + "/wrong", base + "/", base.rsplit("/", 1)[0] + "/"):
        answer = rpc.post(body, url=url)
        assert answer.status_code == 401
        assert answer.json() == {
            "jsonrpc": "2.0",
            "error": {"code": -32001, "message": "Unauthorized"},
            "id": None,
        }
    assert [r.path_ok for r in rpc.server.requests] == [False, False, False]
    rpc.result("getClusterNodes")
    assert rpc.server.count("getClusterNodes") == 4 and rpc.server.requests[-1].path_ok
    rpc.server.clear()
    assert rpc.server.requests == []


def test_big_bodies_bad_json_and_other_verbs(rpc: Rpc) -> None:
    huge = [{"jsonrpc": "2.0", "id": i, "method": "getClusterNodes"} for i in range(1200)]
    assert len(json.dumps(huge)) > 50 * 1024
    assert rpc.post(huge).status_code == 413
    bad = rpc.http.post(
        rpc.server.url, content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert bad.json() == {
        "jsonrpc": "2.0",
        "error": {"code": -32700, "message": "Parse error"},
        "id": None,
    }
    assert rpc.http.get(rpc.server.url).status_code == 405
    plain = rpc.http.post(rpc.server.url, content=b"{}", headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415


def test_wait_for_calls(ledger: Ledger, rpc: Rpc) -> None:
    worker = threading.Thread(target=lambda: [rpc.raw("getClusterNodes") for _ in range(3)])
    worker.start()
    assert rpc.server.wait_for_calls("getClusterNodes", 3, timeout=5)
    worker.join()
    assert not rpc.server.wait_for_calls("getVoteAccounts", 1, timeout=0.05)


# -- scenarios and serve() ---------------------------------------------------------------------


def test_demo_cast_is_real_mainnet(mainnet: Ledger) -> None:
    votes = mainnet.vote_accounts()
    current = {(a["votePubkey"], a["nodePubkey"]) for a in votes["current"]}
    assert (DEMO.delinquent_vote, DEMO.delinquent_node) in current
    assert (DEMO.drift_vote, DEMO.drift_node) in current
    for node in (DEMO.delinquent_node, DEMO.drift_node):
        assert mainnet.node(node)["version"] == DEMO.drift_from  # type: ignore[index]
    assert len(DEMO.holders) == 20


def test_demo_scenario_plays_every_change_in_order() -> None:
    scenario = SCENARIOS["demo"]
    ledger = scenario.new_ledger(seed=3)
    baseline = {a: len(ledger.signatures(a)) for a in (DEMO.treasury, DEMO.hot_wallet, DEMO.vault)}
    smallest = DEMO.holders[-1][0]
    seen: list[tuple[str, Any]] = []

    def top20() -> set[str]:
        return {v["address"] for v in ledger.largest_accounts(DEMO.mint) or []}

    def state(step: Step) -> None:
        accounts = ledger.vote_accounts(vote_pubkey=DEMO.delinquent_vote)
        delinquent = accounts["delinquent"]
        [ours] = accounts["current"] or delinquent
        seen.append(
            (
                step.description,
                (
                    len(ledger.signatures(DEMO.treasury)) - baseline[DEMO.treasury],
                    len(ledger.signatures(DEMO.hot_wallet)) - baseline[DEMO.hot_wallet],
                    DEMO.newcomer in top20(),
                    smallest in top20(),
                    ledger.holder_amount(DEMO.mint, DEMO.grower),
                    bool(delinquent),
                    ledger.node(DEMO.drift_node)["version"],  # type: ignore[index]
                    ours["commission"],
                    len(ledger.signatures(DEMO.vault)) - baseline[DEMO.vault],
                ),
            )
        )

    stop = threading.Event()
    grower = dict(DEMO.holders)[DEMO.grower]
    player = run_scenario(ledger, scenario, stop=stop, speed=40, on_step=state)
    player.join(timeout=10)
    assert not player.is_alive()
    assert [values for _, values in seen] == [
        (1, 0, False, True, grower, False, "2.3.6", 5, 0),
        (1, 25, False, True, grower, False, "2.3.6", 5, 0),
        (1, 25, True, False, grower, False, "2.3.6", 5, 0),
        (1, 25, True, False, grower * 13 // 10, False, "2.3.6", 5, 0),
        (1, 25, True, False, grower * 13 // 10, True, "2.3.6", 5, 0),
        (1, 25, True, False, grower * 13 // 10, True, "2.3.5", 5, 0),
        (1, 25, True, False, grower * 13 // 10, False, "2.3.5", 5, 0),
        (1, 25, True, False, grower * 13 // 10, False, "2.3.6", 5, 0),
        (1, 25, True, False, grower * 13 // 10, False, "2.3.6", 10, 0),
        (1, 25, True, False, grower * 13 // 10, False, "2.3.6", 10, 0),  # + a nonce account
        # The vault (rules/treasury_moves.yaml): 1,000 SOL out, 25,000 USDC in, 50 dust.
        (1, 25, True, False, grower * 13 // 10, False, "2.3.6", 10, 1),
        (1, 25, True, False, grower * 13 // 10, False, "2.3.6", 10, 2),
        (1, 25, True, False, grower * 13 // 10, False, "2.3.6", 10, 52),
    ]
    assert das_of(ledger).programs.data_of(SYSTEM_PROGRAM, DEMO_STAGED_NONCE) is not None
    times = [step.at_seconds for step in scenario.steps]
    assert times[-1] <= 37 and all(b - a >= 3 for a, b in itertools.pairwise(times))


def test_serve_prints_the_url_and_stops_on_request(wait_until: Callable[..., Any]) -> None:
    out = io.StringIO()
    stop = threading.Event()
    exit_codes: list[int] = []
    worker = threading.Thread(
        target=lambda: exit_codes.append(serve(0, "quiet", "k3y", out=out, stop=stop))
    )
    worker.start()
    try:
        line = wait_until(
            lambda: next((w for w in out.getvalue().split() if "/v3/k3y" in w), None),
            timeout=10,
            what="the URL line",
        )
        answer = httpx.post(line, json={"jsonrpc": "2.0", "id": 1, "method": "getVoteAccounts"})
        assert len(answer.json()["result"]["current"]) == 1040
    finally:
        stop.set()
        worker.join(timeout=10)
    assert exit_codes == [0]
    with pytest.raises(ValueError, match="unknown scenario"):
        serve(0, "nope")


def test_fuzz_faults_rewrite_one_result_or_answer_a_raw_body(ledger: Ledger, rpc: Rpc) -> None:
    ledger.faults.inject(
        "rewrite_result",
        method="getVoteAccounts",
        rewrite=lambda text: text.replace('"current"', '"kurrent"'),
    )
    ledger.faults.inject(
        "raw_http",
        method="getClusterNodes",
        status=502,
        body="<html>bad gateway</html>",
        content_type="text/html",
    )
    assert set(rpc.result("getVoteAccounts")) == {"kurrent", "delinquent"}
    answer = rpc.post({"jsonrpc": "2.0", "id": 1, "method": "getClusterNodes"})
    assert answer.status_code == 502 and answer.text == "<html>bad gateway</html>"
    assert set(rpc.result("getVoteAccounts")) == {"current", "delinquent"}
    assert ledger.faults.pending() == 0
