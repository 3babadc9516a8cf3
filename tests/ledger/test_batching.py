"""rpc.batch_size: concurrent calls coalesced into batches, against a scripted node."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import structlog

from watcher.core.errors import InvalidRequest, RpcError
from watcher.ledger.batching import DEFAULT_BATCH_SIZE, Batcher
from watcher.ledger.rpc import RpcClient, RpcSettings

from support.loopback import node_poster

KEY = "SeCrEtKeY-0123456789abcdefXYZ"
URL = f"https://rpc.example.com/v3/{KEY}"


def _answer(call: dict[str, Any]) -> dict[str, Any]:
    params = call.get("params") or [""]
    if params[0] == "bad":
        return {
            "jsonrpc": "2.0",
            "id": call["id"],
            "error": {"code": -32602, "message": "Invalid param: WrongSize"},
        }
    return {"jsonrpc": "2.0", "id": call["id"], "result": [params[0]]}


class Node:
    """Answers each call with ``[its first param]``; ``batches=False`` refuses batches."""

    def __init__(self, *, batches: bool = True) -> None:
        self.batches = batches
        self.sizes: list[int] = []  # calls per HTTP request, in order

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if isinstance(body, list):
            self.sizes.append(len(body))
            if not self.batches:
                return httpx.Response(
                    400,
                    json={
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": -32600, "message": "batch requests are not supported"},
                    },
                )
            return httpx.Response(200, json=[_answer(call) for call in body])
        self.sizes.append(1)
        return httpx.Response(200, json=_answer(body))


MakeClient = Callable[..., tuple[RpcClient, Node]]


@pytest.fixture
async def make_client() -> AsyncIterator[MakeClient]:
    clients: list[RpcClient] = []

    def make(*, batches: bool = True, **options: Any) -> tuple[RpcClient, Node]:
        node = Node(batches=batches)
        client = RpcClient(URL, RpcSettings(**options), poster=node_poster(node))
        clients.append(client)
        return client, node

    yield make
    for client in clients:
        await client.aclose()


async def _concurrently(client: RpcClient, method: str, params: list[str]) -> list[Any]:
    calls = (client.call(method, [p], list[str]) for p in params)
    return list(await asyncio.gather(*calls, return_exceptions=True))


async def test_concurrent_calls_share_batches_of_batch_size(make_client: MakeClient) -> None:
    client, node = make_client(batch_size=10)
    params = [f"mint{i}" for i in range(25)]
    values = await _concurrently(client, "getTokenLargestAccounts", params)
    assert values == [[p] for p in params]  # each caller gets its own answer
    assert node.sizes == [10, 10, 5]
    assert client.stats.calls == 25 and client.stats.requests == 3


async def test_historical_calls_are_capped_at_10_per_batch(make_client: MakeClient) -> None:
    client, node = make_client(batch_size=50)
    values = await _concurrently(client, "getSignaturesForAddress", [f"a{i}" for i in range(25)])
    assert len(values) == 25 and node.sizes == [10, 10, 5]
    assert client.batcher is not None and client.batcher.cap("getSignaturesForAddress") == 10
    assert client.batcher.cap("getTokenLargestAccounts") == 50


async def test_batch_size_1_sends_one_call_per_request(make_client: MakeClient) -> None:
    client, node = make_client(batch_size=1)
    await _concurrently(client, "getTokenLargestAccounts", ["a", "b", "c"])
    assert node.sizes == [1, 1, 1] and client.batcher is None


async def test_one_bad_call_fails_only_itself(make_client: MakeClient) -> None:
    client, node = make_client(batch_size=10)
    values = await _concurrently(client, "getSignaturesForAddress", ["a", "bad", "c"])
    assert values[0] == ["a"] and values[2] == ["c"]
    assert isinstance(values[1], InvalidRequest) and values[1].code == -32602
    assert node.sizes == [3]  # a permanent error is not retried


async def test_a_refused_batch_is_detected_once_then_single_calls(
    make_client: MakeClient,
) -> None:
    client, node = make_client(batches=False, batch_size=10)
    with structlog.testing.capture_logs() as logs:
        first = await _concurrently(client, "getSignaturesForAddress", ["a", "b", "c"])
        second = await _concurrently(client, "getSignaturesForAddress", ["d", "e"])
    assert first == [["a"], ["b"], ["c"]] and second == [["d"], ["e"]]
    # One refused batch, then its calls one by one; later calls go singly from the start.
    assert node.sizes == [3, 1, 1, 1, 1, 1]
    refused = [e for e in logs if "refuses batches" in e["event"]]
    assert len(refused) == 1 and refused[0]["log_level"] == "warning"
    assert refused[0]["endpoint"] == "https://rpc.example.com/v3/***"
    assert client.stats.failovers == 0 and client.stats.failures == {}


async def test_batches_waiting_when_the_refusal_comes_go_singly_unsent(
    make_client: MakeClient,
) -> None:
    client, node = make_client(batches=False, batch_size=10, max_concurrency=1)
    params = [f"a{i}" for i in range(25)]
    values = await _concurrently(client, "getSignaturesForAddress", params)
    assert values == [[p] for p in params]
    # The first batch is refused; the two queued behind it are never sent as batches.
    assert node.sizes == [10] + [1] * 25
    assert client.stats.requests == 26


async def test_a_partial_batch_waiting_to_leave_collects_the_next_calls() -> None:
    sent: list[list[Any]] = []
    gate = asyncio.Event()

    async def send(method: str, params: Any, model: Any, on_sent: Callable[[], None]) -> list[Any]:
        await gate.wait()  # the pacer: nothing leaves yet
        on_sent()
        sent.append(list(params))
        return [p[0] for p in params]

    batcher = Batcher(send, 4)
    first = asyncio.ensure_future(batcher.call("m", ["a"], None))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # "a" went as a partial batch and waits at the gate
    later = [asyncio.ensure_future(batcher.call("m", [p], None)) for p in "bcdefg"]
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(first, *later) == list("abcdefg")
    # b..e filled a batch at once; f and g waited for the partial "a" to leave.
    assert sorted(sent) == [[["a"]], [["b"], ["c"], ["d"], ["e"]], [["f"], ["g"]]]


async def test_a_failing_send_fails_each_caller() -> None:
    async def send(method: str, params: Any, model: Any, on_sent: Callable[[], None]) -> list[Any]:
        raise RpcError("boom")

    batcher = Batcher(send, 4)
    outcomes = await asyncio.gather(
        batcher.call("m", [1], None), batcher.call("m", [2], None), return_exceptions=True
    )
    assert [str(o) for o in outcomes] == ["boom", "boom"]
    assert DEFAULT_BATCH_SIZE == 10


def test_rpc_settings_defaults_and_limits() -> None:
    from pydantic import ValidationError

    from watcher.config.sections import RpcSettings

    defaults = RpcSettings()
    assert (defaults.max_rps, defaults.batch_size) == (None, DEFAULT_BATCH_SIZE)
    assert RpcSettings.model_validate({"max_rps": 2.5, "batch_size": 1}).max_rps == 2.5
    for wrong in ({"max_rps": 0}, {"batch_size": 0}, {"batch_size": 101}):
        with pytest.raises(ValidationError):
            RpcSettings.model_validate(wrong)


async def test_callers_woken_by_a_batch_fill_the_next_one() -> None:
    """A batch's callers are all woken in the same turn: each makes its next call at once, so
    the next batch leaves full (woken one per turn, they trickled out as partial batches)."""
    sent: list[int] = []

    async def send(method: str, params: Any, model: Any, on_sent: Callable[[], None]) -> list[Any]:
        on_sent()
        await asyncio.sleep(0)  # the answer comes back on a later turn
        sent.append(len(params))
        return [p[0] for p in params]

    batcher = Batcher(send, 4)

    async def worker(name: str) -> list[Any]:
        return [await batcher.call("m", [f"{name}{i}"], None) for i in range(3)]

    assert await asyncio.gather(*(worker(w) for w in "abcd")) == [
        [f"{w}{i}" for i in range(3)] for w in "abcd"
    ]
    assert sent == [4, 4, 4]


async def test_calls_coming_a_turn_apart_still_share_a_batch() -> None:
    """A partial batch leaves on the first turn that brought no new call: calls made one turn
    apart fill it; a lone call leaves two turns after it was made."""
    sent: list[list[Any]] = []

    async def send(method: str, params: Any, model: Any, on_sent: Callable[[], None]) -> list[Any]:
        on_sent()
        sent.append([p[0] for p in params])
        return [p[0] for p in params]

    batcher = Batcher(send, 10)
    calls = []
    for name in "abcd":
        calls.append(asyncio.ensure_future(batcher.call("m", [name], None)))
        await asyncio.sleep(0)
    assert await asyncio.gather(*calls) == list("abcd")
    assert await batcher.call("m", ["e"], None) == "e"
    assert sent == [list("abcd"), ["e"]]
