"""The JSON-RPC client against a scripted node behind a loopback server, through production's
aiohttp poster: parsing, wire shape, errors, secrets."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
import structlog
from pydantic import BaseModel

from watcher.core.errors import (
    BadResponse,
    ConfigError,
    HttpClientError,
    InvalidRequest,
    NodeUnhealthy,
    PermanentRpcError,
    Problem,
    RateLimited,
    RpcError,
    RpcTimeout,
    ServerError,
    TransientRpcError,
    WatcherError,
)
from watcher.core.redact import REDACTOR
from watcher.ledger.models import SignatureEntry
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.ledger.rpc_methods import LedgerMethods, PrimedReader
from watcher.ledger.transport import Endpoint, EndpointSpec

from support.loopback import node_poster
from support.recorded import answer_bytes

KEY = "SeCrEtKeY-0123456789abcdefXYZ"
URL = f"https://rpc.example.com/v3/{KEY}"
PUBLIC_URL = "https://rpc.example.com/v3/***"
ADDRESS = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"

Reply = Callable[[httpx.Request], httpx.Response]


# -- a scripted node below the client --------------------------------------------------------------


def request_id(request: httpx.Request) -> Any:
    return json.loads(request.content)["id"]


def answer(body: dict[str, Any]) -> Reply:
    """A JSON body sent as it is (no id added)."""
    return lambda request: httpx.Response(200, json=body)


def result(value: Any) -> Reply:
    return lambda request: httpx.Response(
        200, json={"jsonrpc": "2.0", "result": value, "id": request_id(request)}
    )


def rpc_error(code: int, message: str, data: Any = None) -> Reply:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return lambda request: httpx.Response(
        200, json={"jsonrpc": "2.0", "error": error, "id": request_id(request)}
    )


def status(code: int, text: str = "", headers: dict[str, str] | None = None) -> Reply:
    return lambda request: httpx.Response(code, text=text, headers=headers)


def raw(body: bytes) -> Reply:
    return lambda request: httpx.Response(200, content=body)


def raises(make: Callable[[httpx.Request], Exception]) -> Reply:
    def reply(request: httpx.Request) -> httpx.Response:
        raise make(request)

    return reply


def recorded(name: str) -> Reply:
    """A recorded real answer: sent byte for byte when its id is ours, else with our id put in."""
    data = answer_bytes(name)

    def reply(request: httpx.Request) -> httpx.Response:
        body = json.loads(data)
        if body["id"] == request_id(request):
            return httpx.Response(200, content=data, headers={"content-type": "application/json"})
        return httpx.Response(200, json=body | {"id": request_id(request)})

    return reply


class FakeNode:
    """The inner transport's handler: replies from a script (the last one repeats) and keeps
    every request as it reached the wire."""

    def __init__(self, *script: Reply) -> None:
        self.script = list(script)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return reply(request)

    @property
    def bodies(self) -> list[Any]:
        return [json.loads(request.content) for request in self.requests]


class Sleeps(list[float]):
    """Stands in for asyncio.sleep: records the delays, returns at once."""

    async def __call__(self, delay: float) -> None:
        self.append(delay)


MakeClient = Callable[..., tuple[RpcClient, FakeNode, Sleeps]]
SETTINGS = {field.name for field in dataclasses.fields(RpcSettings)}


@pytest.fixture
async def make_client() -> AsyncIterator[MakeClient]:
    clients: list[RpcClient] = []

    def make(*script: Reply, **options: Any) -> tuple[RpcClient, FakeNode, Sleeps]:
        node, sleeps = FakeNode(*script), Sleeps()
        options = {"random": lambda: 0.5, **options}
        settings = RpcSettings(**{k: options.pop(k) for k in list(options) if k in SETTINGS})
        client = RpcClient(URL, settings, poster=node_poster(node), sleep=sleeps, **options)
        clients.append(client)
        return client, node, sleeps

    yield make
    for client in clients:
        await client.aclose()


@pytest.fixture
def default_structlog() -> Iterator[None]:
    """structlog's default configuration (prints to stdout), whatever other tests configured."""
    saved = structlog.get_config()
    structlog.reset_defaults()
    yield
    structlog.configure(**saved)


# An answer nested 100,000 deep: the JSON decoder gives up with RecursionError.
DEEP_JSON = b'{"jsonrpc": "2.0", "id": 1, "result": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"

SIGNATURES = json.loads(answer_bytes("testnet_getSignaturesForAddress_2021-06-30.json"))
OK = result(SIGNATURES["result"])


# -- parsing real answers --------------------------------------------------------------------------


def check_signatures(entries: Any) -> None:
    assert [e.slot for e in entries] == [83027168, 83026947, 83026888]
    first = entries[0]
    assert first.signature.startswith("aLoUEJQHE3JBocPVEdKZ1JUKW89")
    assert (first.block_time, first.confirmation_status, first.err) == (
        1624651458,
        "finalized",
        None,
    )


def check_largest_2021(accounts: Any) -> None:
    assert len(accounts) == 20
    assert accounts[0].address == "fArUAncZwVbMimiWv5cPUfFsapdLd8QMXZE4VXqFagR"
    assert (accounts[0].amount, accounts[0].decimals) == (176769990000046, 6)
    assert [a.amount for a in accounts] == sorted((a.amount for a in accounts), reverse=True)


def check_largest_2025(accounts: Any) -> None:
    assert len(accounts) == 20
    assert accounts[0].address == "BGLx2hbcLHk5ajMeLB2SP2zw5ZHqYTCazNJEB9uGcz3q"
    assert (accounts[0].amount, accounts[0].decimals) == (854699973338, 8)


def check_votes_testnet(votes: Any) -> None:
    assert votes.delinquent == []
    (account,) = votes.current
    assert account.vote_pubkey == "CZVUMA5W21V5VdtNV5R22FQr3MuCixcPr5j3pZYH8bdu"
    assert account.node_pubkey == "FVD3oRjHRyDsGTwisgZrZPV6vbbRvkgx8hm6ctmBG1Ne"
    assert (account.activated_stake, account.last_vote) == (45239332995339, 81975455)


def check_votes_mainnet(votes: Any) -> None:
    assert (len(votes.current), len(votes.delinquent)) == (1040, 48)
    assert votes.delinquent[0].vote_pubkey == "EkLA4nA5jtM2t2FkNWo6XWAyvQyaJJUZoX5p7LMawoaz"


def check_nodes_mainnet(nodes: Any) -> None:
    assert len(nodes) == 6455
    assert (nodes[0].version, nodes[0].feature_set) == ("2.3.7", 3640012085)
    assert sum(node.version == "0.703.20300" for node in nodes) == 149


Call = Callable[[RpcClient], Awaitable[Any]]


@pytest.mark.parametrize(
    ("fixture", "call", "check"),
    [
        (
            "testnet_getSignaturesForAddress_2021-06-30.json",
            lambda c: c.get_signatures_for_address(ADDRESS),
            check_signatures,
        ),
        (
            "mainnet_getTokenLargestAccounts_2021-07-15.json",
            lambda c: c.get_token_largest_accounts("RAY"),
            check_largest_2021,
        ),
        (
            "mainnet_getTokenLargestAccounts_2025-08-22_sava.json",
            lambda c: c.get_token_largest_accounts("MINT"),
            check_largest_2025,
        ),
        (
            "testnet_getVoteAccounts_votePubkey_2021-06-22.json",
            lambda c: c.get_vote_accounts(),
            check_votes_testnet,
        ),
        (
            "mainnet_getVoteAccounts_2025-08-21_sava.json",
            lambda c: c.get_vote_accounts(),
            check_votes_mainnet,
        ),
        (
            "mainnet_getClusterNodes_2025-08-22_sava.json",
            lambda c: c.get_cluster_nodes(),
            check_nodes_mainnet,
        ),
    ],
)
async def test_parses_real_recorded_answers(
    make_client: MakeClient, fixture: str, call: Call, check: Callable[[Any], None]
) -> None:
    client, node, sleeps = make_client(recorded(fixture))
    check(await call(client))
    assert (len(node.requests), sleeps) == (1, [])


# -- what goes on the wire -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("commitment", "call", "method", "params"),
    [
        (
            "finalized",
            lambda c: c.get_signatures_for_address(ADDRESS),
            "getSignaturesForAddress",
            [ADDRESS, {"commitment": "finalized", "limit": 1000}],
        ),
        (
            "confirmed",
            lambda c: c.get_signatures_for_address(
                ADDRESS, before="B" * 88, until="U" * 88, limit=5
            ),
            "getSignaturesForAddress",
            [
                ADDRESS,
                {"commitment": "confirmed", "limit": 5, "before": "B" * 88, "until": "U" * 88},
            ],
        ),
        (
            "finalized",
            lambda c: c.get_signatures_for_address(ADDRESS, until="U" * 88),
            "getSignaturesForAddress",
            [ADDRESS, {"commitment": "finalized", "limit": 1000, "until": "U" * 88}],
        ),
        (  # nodes refuse commitment below confirmed for this method
            "processed",
            lambda c: c.get_signatures_for_address(ADDRESS),
            "getSignaturesForAddress",
            [ADDRESS, {"commitment": "confirmed", "limit": 1000}],
        ),
        (
            "confirmed",
            lambda c: c.get_token_largest_accounts("MINT"),
            "getTokenLargestAccounts",
            ["MINT", {"commitment": "confirmed"}],
        ),
        (
            "processed",
            lambda c: c.get_vote_accounts(),
            "getVoteAccounts",
            [{"commitment": "processed", "keepUnstakedDelinquents": True}],
        ),
        ("finalized", lambda c: c.get_cluster_nodes(), "getClusterNodes", None),
    ],
)
async def test_request_body(
    make_client: MakeClient, commitment: str, call: Call, method: str, params: Any
) -> None:
    empty = {
        "getSignaturesForAddress": [],
        "getTokenLargestAccounts": {"context": {"slot": 1}, "value": []},
        "getVoteAccounts": {"current": [], "delinquent": []},
        "getClusterNodes": [],
    }
    client, node, _ = make_client(result(empty[method]), commitment=commitment)
    await call(client)
    (request,) = node.requests
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/json"
    expected: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        expected["params"] = params
    assert node.bodies == [expected]


async def test_every_request_gets_a_new_increasing_id(make_client: MakeClient) -> None:
    client, node, _ = make_client(status(503), OK, OK)
    await client.get_signatures_for_address(ADDRESS)
    await client.get_signatures_for_address(ADDRESS)
    assert [body["id"] for body in node.bodies] == [1, 2, 3]


@pytest.mark.parametrize(
    ("options", "call", "message"),
    [
        ({"commitment": "max"}, None, "commitment must be one of"),
        ({"max_attempts": 0}, None, "at least 1"),
        ({}, lambda c: c.get_signatures_for_address(ADDRESS, limit=0), "between 1 and 1000"),
        ({}, lambda c: c.get_signatures_for_address(ADDRESS, limit=1001), "between 1 and 1000"),
    ],
)
async def test_refuses_arguments_the_node_would_refuse(
    make_client: MakeClient, options: dict[str, Any], call: Call | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        client, node, _ = make_client(OK, **options)
        assert call is not None
        await call(client)
    if call is not None:
        assert node.requests == []


def test_refuses_a_url_that_is_not_http_without_showing_the_key() -> None:
    with pytest.raises(ValueError, match="http") as caught:
        RpcClient(f"ftp://rpc.example.com/v3/{KEY}")
    assert KEY not in str(caught.value)
    assert "ftp://rpc.example.com/v3/***" in str(caught.value)


# -- errors and retries ----------------------------------------------------------------------------

HTML_502 = (
    "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
)
JITTER = [0.25, 0.5, 1.0, 2.0]  # random()=0.5 times min(30, 0.5 * 2**n)


@pytest.mark.parametrize(
    ("script", "error", "requests", "sleeps"),
    [
        pytest.param(
            [status(429, headers={"Retry-After": "7"}), OK], None, 2, [7.0], id="429-retry-after"
        ),
        pytest.param(
            [status(429, headers={"Retry-After": "1000"}), OK], None, 2, [60.0], id="429-capped"
        ),
        pytest.param([status(429), OK], None, 2, [0.25], id="429-without-retry-after"),
        pytest.param(
            [rpc_error(429, "Too many requests for a specific RPC call"), OK],
            None,
            2,
            [0.25],
            id="json-rpc-429",
        ),
        pytest.param([status(503, HTML_502), OK], None, 2, [0.25], id="503-html"),
        pytest.param([status(502, HTML_502)], ServerError, 5, JITTER, id="502-exhausted"),
        pytest.param([raw(b"<html>oops</html>")], BadResponse, 5, JITTER, id="garbage-exhausted"),
        pytest.param([raw(b"")], BadResponse, 5, JITTER, id="empty-body"),
        pytest.param([raw(DEEP_JSON)], BadResponse, 5, JITTER, id="100000-deep-json"),
        pytest.param(
            [rpc_error(-32005, "Node is behind by 42 slots", {"numSlotsBehind": 42}), OK],
            None,
            2,
            [0.25],
            id="node-behind",
        ),
        pytest.param(
            [rpc_error(-32016, "Minimum context slot has not been reached")],
            NodeUnhealthy,
            5,
            JITTER,
            id="min-context-slot",
        ),
        pytest.param(
            [rpc_error(-32602, "Invalid limit; max 1000")],
            InvalidRequest,
            1,
            [],
            id="invalid-params",
        ),
        pytest.param(
            [rpc_error(-32601, "Method not found")], InvalidRequest, 1, [], id="no-method"
        ),
        pytest.param(
            [rpc_error(-32010, "excluded from account secondary indexes")],
            InvalidRequest,
            1,
            [],
            id="secondary-index",
        ),
        pytest.param([status(401, "Unauthorized")], HttpClientError, 1, [], id="401"),
        pytest.param([status(403)], HttpClientError, 1, [], id="403"),
        pytest.param([status(413, "Payload Too Large")], HttpClientError, 1, [], id="413"),
        pytest.param(
            [raises(lambda r: httpx.ReadTimeout("timed out")), OK],
            None,
            2,
            [0.25],
            id="read-timeout",
        ),
        pytest.param(
            [raises(lambda r: httpx.ConnectError("[Errno 111] Connection refused"))],
            RpcTimeout,
            5,
            JITTER,
            id="refused-exhausted",
        ),
        pytest.param(
            [raises(lambda r: httpx.ReadError("Connection reset by peer")), OK],
            None,
            2,
            [0.25],
            id="reset",
        ),
        pytest.param(
            [answer({"jsonrpc": "2.0", "result": [], "id": 999})],
            BadResponse,
            5,
            JITTER,
            id="id-mismatch",
        ),
        pytest.param([answer({"result": [], "id": 1})], BadResponse, 5, JITTER, id="no-jsonrpc"),
        pytest.param(
            [answer({"jsonrpc": "2.0", "id": 1})],
            BadResponse,
            5,
            JITTER,
            id="neither-result-nor-error",
        ),
        pytest.param(
            [answer({"jsonrpc": "2.0", "error": "boom", "id": 1})],
            BadResponse,
            5,
            JITTER,
            id="malformed-error",
        ),
        pytest.param(
            [result({"signature": "short", "slot": -1}), OK],  # not a list of entries
            None,
            2,
            [0.25],
            id="result-not-fitting-then-ok",
        ),
    ],
)
async def test_retries_transient_errors_only(
    make_client: MakeClient,
    script: list[Reply],
    error: type[RpcError] | None,
    requests: int,
    sleeps: list[float],
) -> None:
    client, node, slept = make_client(*script)
    if error is None:
        check_signatures(await client.get_signatures_for_address(ADDRESS))
    else:
        with pytest.raises(error) as caught:
            await client.get_signatures_for_address(ADDRESS)
        assert caught.value.attempts == requests
        assert caught.value.method == "getSignaturesForAddress"
        assert caught.value.transient == (requests > 1)
    assert len(node.requests) == requests
    assert slept == sleeps


async def test_backoff_grows_to_its_cap_with_full_jitter(make_client: MakeClient) -> None:
    draws = iter([1.0, 0.0, 0.5, 1.0, 1.0, 1.0])
    client, _, sleeps = make_client(
        status(500), max_attempts=7, backoff_base=1.0, backoff_max=4.0, random=lambda: next(draws)
    )
    with pytest.raises(ServerError):
        await client.get_cluster_nodes()
    assert sleeps == [1.0, 0.0, 2.0, 4.0, 4.0, 4.0]


@pytest.mark.parametrize(
    ("reply", "error_type", "attributes", "text"),
    [
        (
            status(429, "slow down", {"Retry-After": "3"}),
            RateLimited,
            {"retry_after": 3.0, "code": None},
            "getClusterNodes: HTTP 429 Too Many Requests: slow down",
        ),
        (
            rpc_error(-32005, "Node is behind by 42 slots", {"numSlotsBehind": 42}),
            NodeUnhealthy,
            {"slots_behind": 42, "code": -32005},
            "getClusterNodes: JSON-RPC error -32005: Node is behind by 42 slots",
        ),
        (
            rpc_error(-32602, "Invalid limit; max 1000"),
            InvalidRequest,
            {"code": -32602, "rpc_message": "Invalid limit; max 1000"},
            "getClusterNodes: JSON-RPC error -32602: Invalid limit; max 1000",
        ),
        (
            status(502, HTML_502),
            ServerError,
            {"status": 502},
            "getClusterNodes: HTTP 502 Bad Gateway: 502 Bad Gateway 502 Bad Gateway",
        ),
        (
            status(401, "Unauthorized"),
            HttpClientError,
            {"status": 401},
            "getClusterNodes: HTTP 401 Unauthorized: Unauthorized",
        ),
        (
            result([{"pubkey": 5, "featureSet": 1}]),
            BadResponse,
            {},
            "getClusterNodes: answer does not fit its model (1 error): 0.pubkey: "
            "Input should be a valid string",
        ),
        (
            raises(lambda r: httpx.ConnectTimeout("")),
            RpcTimeout,
            {},
            "getClusterNodes: ConnectTimeout",
        ),
    ],
)
async def test_errors_say_what_happened(
    make_client: MakeClient,
    reply: Reply,
    error_type: type[RpcError],
    attributes: dict[str, Any],
    text: str,
) -> None:
    client, _, _ = make_client(reply, max_attempts=1)
    with pytest.raises(error_type) as caught:
        await client.get_cluster_nodes()
    assert str(caught.value) == text
    for name, value in attributes.items():
        assert getattr(caught.value, name) == value


async def test_a_huge_body_gives_a_short_message(make_client: MakeClient) -> None:
    client, _, _ = make_client(status(500, "x" * 100_000), max_attempts=1)
    with pytest.raises(ServerError) as caught:
        await client.get_cluster_nodes()
    assert len(str(caught.value)) < 300


async def test_stats_count_calls_requests_retries_and_failures(make_client: MakeClient) -> None:
    client, _, _ = make_client(status(503), OK, rpc_error(-32602, "Invalid params"))
    await client.get_signatures_for_address(ADDRESS)
    with pytest.raises(InvalidRequest):
        await client.get_signatures_for_address(ADDRESS)
    stats = client.stats
    assert (stats.calls, stats.requests, stats.retries, stats.successes) == (2, 3, 1, 1)
    assert stats.errors == {"ServerError": 1, "InvalidRequest": 1}
    assert stats.failures == {"InvalidRequest": 1}


async def test_concurrency_is_capped(make_client: MakeClient) -> None:
    release, cap_reached = asyncio.Event(), asyncio.Event()
    in_flight = peak = 0

    async def slow(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 2:
            cap_reached.set()
        await release.wait()
        in_flight -= 1
        return OK(request)

    client = RpcClient(URL, RpcSettings(max_concurrency=2), poster=node_poster(slow))
    async with client:
        calls = [asyncio.create_task(client.get_signatures_for_address(ADDRESS)) for _ in range(5)]
        await asyncio.wait_for(cap_reached.wait(), timeout=5)
        for _ in range(20):  # give the other three every chance to get in
            await asyncio.sleep(0)
        assert (in_flight, peak) == (2, 2)
        release.set()
        answers = await asyncio.gather(*calls)
    assert len(answers) == 5 and peak == 2


async def test_call_accepts_a_model_class_or_a_type_adapter(make_client: MakeClient) -> None:
    class Health(BaseModel):
        ok: bool

    client, node, _ = make_client(result({"ok": True}))
    assert await client.call("getHealthLike", None, Health) == Health(ok=True)
    assert node.bodies[0] == {"jsonrpc": "2.0", "id": 1, "method": "getHealthLike"}


# -- batches ---------------------------------------------------------------------------------------


def batch_reply(per_id: Callable[[int, list[Any]], dict[str, Any]]) -> Reply:
    """Answers a batch, entries reversed (order is not guaranteed), each built by per_id."""

    def reply(request: httpx.Request) -> httpx.Response:
        calls = json.loads(request.content)
        entries = [{"jsonrpc": "2.0", "id": c["id"]} | per_id(c["id"], c["params"]) for c in calls]
        return httpx.Response(200, json=entries[::-1])

    return reply


async def test_batch_retries_only_the_calls_that_failed_transiently(
    make_client: MakeClient,
) -> None:
    def first(_: int, params: list[Any]) -> dict[str, Any]:
        if params[0] == "behind":
            return {"error": {"code": -32005, "message": "Node is behind by 3 slots"}}
        if params[0] == "bad":
            return {"error": {"code": -32602, "message": "Invalid param: not a pubkey"}}
        return {"result": SIGNATURES["result"]}

    def second(_: int, params: list[Any]) -> dict[str, Any]:
        return {"result": []}

    client, node, sleeps = make_client(batch_reply(first), batch_reply(second))
    outcomes = await client.call_batch(
        "getSignaturesForAddress", [["ok"], ["behind"], ["bad"]], list[SignatureEntry]
    )
    check_signatures(outcomes[0])
    assert outcomes[1] == []
    assert isinstance(outcomes[2], InvalidRequest) and outcomes[2].code == -32602
    assert [[call["params"] for call in body] for body in node.bodies] == [
        [["ok"], ["behind"], ["bad"]],
        [["behind"]],
    ]
    assert [call["id"] for body in node.bodies for call in body] == [1, 2, 3, 4]
    assert sleeps == [0.25]


async def test_batch_failing_as_a_whole_gives_every_pending_call_the_error(
    make_client: MakeClient,
) -> None:
    client, node, _ = make_client(status(413, "Payload Too Large"))
    outcomes = await client.call_batch("getClusterNodes", [None, None], list[Any])
    assert len(node.requests) == 1
    assert all(isinstance(o, HttpClientError) and o.status == 413 for o in outcomes)


async def test_batch_gives_up_after_max_attempts(make_client: MakeClient) -> None:
    client, node, _ = make_client(
        batch_reply(lambda i, p: {"error": {"code": -32004, "message": "Block not available"}}),
        max_attempts=3,
    )
    (outcome,) = await client.call_batch("getSignaturesForAddress", [["a"]], list[Any])
    assert isinstance(outcome, NodeUnhealthy) and outcome.attempts == 3
    assert len(node.requests) == 3


# -- the key stays secret --------------------------------------------------------------------------


async def test_the_key_reaches_the_wire_and_nothing_else(
    make_client: MakeClient,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    default_structlog: None,
) -> None:
    caplog.set_level(logging.DEBUG)
    # Even with httpx's and httpcore's debug lines turned on.
    caplog.set_level(logging.DEBUG, logger="httpx")
    caplog.set_level(logging.DEBUG, logger="httpcore")
    client, node, _ = make_client(
        raises(lambda r: httpx.ConnectError(f"cannot reach {r.url}")),
        status(503, f"<p>upstream {URL} failed</p>"),
        rpc_error(-32005, f"node behind for {KEY}"),
        status(429, f"quota exceeded for key {KEY}"),
        answer({"jsonrpc": "2.0", "result": [], "id": f"{KEY}"}),
        status(401, f"invalid api key {KEY}"),
        max_attempts=6,
    )
    with pytest.raises(HttpClientError) as caught:
        await client.get_signatures_for_address(ADDRESS)
    assert caught.value.attempts == 6

    # The inner transport got the real URL: the key reached the wire.
    assert {str(r.url) for r in node.requests} == {URL}
    # Everything above it saw the placeholder.
    assert client.public_url == PUBLIC_URL
    # Requests go straight to the transport (watcher.ledger.transport.Endpoint): httpx's client,
    # which logs a line per request with its URL, is not in the path.
    assert not [r for r in caplog.records if r.name == "httpx"]
    retries = capsys.readouterr().out
    assert retries.count("rpc retry") == 5 and PUBLIC_URL in retries
    for name in ["RpcTimeout", "ServerError", "NodeUnhealthy", "RateLimited", "BadResponse"]:
        assert name in retries

    error = caught.value
    seen = [str(error), repr(error), *map(str, error.args), retries, caplog.text]
    chained = error.__cause__ or error.__context__
    while chained is not None:
        seen += [str(chained), repr(chained)]
        chained = chained.__cause__ or chained.__context__
    assert not [text for text in seen if KEY in text]
    assert "invalid api key ***" in str(error)


async def test_errors_below_httpx_come_up_redacted_and_unchained() -> None:
    REDACTOR.add(KEY)

    class Refusing:
        """A poster whose every request fails, naming the real URL."""

        def __init__(self, url: str, **_options: Any) -> None:
            self.url = url

        async def post(self, body: bytes, headers: Any, trace: Any) -> httpx.Response:
            raise httpx.ConnectError(f"cannot reach {self.url}")

        async def aclose(self) -> None:
            return None

    endpoint = Endpoint(EndpointSpec(URL), timeout=1.0, max_concurrency=1, poster=Refusing)
    with pytest.raises(httpx.ConnectError) as caught:
        await endpoint.post_json(b"{}", {})
    assert str(caught.value) == f"cannot reach {PUBLIC_URL}"
    assert caught.value.__context__ is None and caught.value.__cause__ is None


async def test_userinfo_becomes_basic_auth_below_httpx() -> None:
    node = FakeNode(OK)
    client = RpcClient("https://alice:s3cr3t-pw@rpc.example.com/", poster=node_poster(node))
    async with client:
        await client.get_signatures_for_address(ADDRESS)
    assert client.public_url == "https://***:***@rpc.example.com/"
    (request,) = node.requests
    assert request.headers["authorization"] == "Basic YWxpY2U6czNjcjN0LXB3"  # alice:s3cr3t-pw
    assert str(request.url) == "https://rpc.example.com/"
    assert "s3cr3t-pw" in REDACTOR


@pytest.mark.parametrize(
    ("url", "public"),
    [
        ("https://rpc.example.com/Sh0rtK3y12ab", "https://rpc.example.com/***"),
        ("https://rpc.example.com/0dd1yPl4c3d/solana", "https://rpc.example.com/***/solana"),
        (
            "https://rpc.example.com/api/v2/k/x?t=abc",
            "https://rpc.example.com/api/v2/***/***?t=***",
        ),
    ],
)
async def test_the_real_url_reaches_the_wire_whatever_is_masked(url: str, public: str) -> None:
    node = FakeNode(OK)
    client = RpcClient(url, poster=node_poster(node))
    async with client:
        await client.get_signatures_for_address(ADDRESS)
    assert client.public_url == public
    (request,) = node.requests
    assert str(request.url) == url


# -- the error tree --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error_type", "base"),
    [
        (RpcTimeout, TransientRpcError),
        (RateLimited, TransientRpcError),
        (ServerError, TransientRpcError),
        (BadResponse, TransientRpcError),
        (NodeUnhealthy, TransientRpcError),
        (InvalidRequest, PermanentRpcError),
        (HttpClientError, PermanentRpcError),
    ],
)
def test_error_tree(error_type: type[RpcError], base: type[RpcError]) -> None:
    assert issubclass(error_type, base) and issubclass(base, RpcError)
    assert issubclass(RpcError, WatcherError)
    assert error_type.transient is (base is TransientRpcError)


def test_rpc_errors_redact_their_text_when_built() -> None:
    REDACTOR.add(KEY)
    error = InvalidRequest(f"bad {KEY}", method="m", code=-1, rpc_message=f"echo {KEY}")
    assert (str(error), error.rpc_message) == ("m: bad ***", "echo ***")
    assert repr(error) == "InvalidRequest('m: bad ***')"


def test_problems_read_file_line_message() -> None:
    problems = [
        Problem("rules/a.yaml", 12, "unknown key 'evry'"),
        Problem("watcher.yaml", None, "file not found"),
    ]
    error = ConfigError(problems)
    assert error.problems == problems
    assert str(error) == "rules/a.yaml:12: unknown key 'evry'\nwatcher.yaml: file not found"
    assert isinstance(error, WatcherError)


async def test_a_too_deeply_nested_answer_is_a_bad_answer_in_a_batch_too(
    make_client: MakeClient,
) -> None:
    client, _node, _sleeps = make_client(raw(DEEP_JSON), max_attempts=1)
    outcomes = await client.call_batch("getBalance", [[ADDRESS], [ADDRESS]], int)
    assert all(isinstance(outcome, BadResponse) for outcome in outcomes)
    assert "nested too deeply" in str(outcomes[0])


class _Asked(LedgerMethods):
    """A reader answering every call with the calls asked so far."""

    def __init__(self) -> None:
        super().__init__("confirmed")
        self.asked: list[tuple[str, Any]] = []

    async def call(self, method: str, params: Any, model: Any) -> Any:
        self.asked.append((method, params))
        return []


async def test_a_primed_reader_answers_its_call_once_and_asks_its_reader_for_the_rest() -> None:
    reader = _Asked()
    entry = SignatureEntry.model_validate({"signature": "5" * 88, "slot": 7})
    call = reader.signatures_call("Addr1", until="9" * 88, limit=1000)
    primed = PrimedReader(reader, call, [entry])
    assert primed.shared_reads is reader.shared_reads  # the polls' shared reads stay one
    # The same call: the answer in hand, not asked again; the next page is asked of the reader.
    assert await primed.get_signatures_for_address("Addr1", until="9" * 88) == [entry]
    assert reader.asked == []
    assert await primed.get_signatures_for_address("Addr1", until="9" * 88) == []
    assert reader.asked == [("getSignaturesForAddress", call.params)]

    failed = PrimedReader(reader, call, BadResponse("garbage", method="getSignaturesForAddress"))
    with pytest.raises(BadResponse, match="garbage"):
        await failed.get_signatures_for_address("Addr1", until="9" * 88)
