"""Several RPC endpoints: the health order (pure, with the time as a value) and failover of the
real client between two simulators on loopback (one refusing connections or answering 503)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from watcher.core.errors import InvalidRequest, RpcError, RpcTimeout, ServerError
from watcher.ledger.rpc import EndpointSpec, RpcClient, RpcSettings
from watcher.ledger.transport import COOLDOWN_FIRST, COOLDOWN_MAX, EndpointPool
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey

VOTE, NODE = derived_pubkey("endpoints vote"), derived_pubkey("endpoints node")
KEY_A, KEY_B = "3ndp0intAK3yN3v3rSh0wn", "3ndp0intBK3yN3v3rSh0wn"

# -- the order (pure) ------------------------------------------------------------------------


def test_healthy_endpoints_keep_the_order_of_the_settings() -> None:
    pool = EndpointPool(["a", "b", "c"])
    assert pool.order(0.0) == ["a", "b", "c"]
    pool.succeeded("b")
    assert pool.order(1.0) == ["a", "b", "c"]


def test_a_failed_endpoint_goes_last_while_it_cools_down() -> None:
    pool = EndpointPool(["a", "b", "c"])
    pool.failed("a", 10.0)
    assert pool.order(10.0) == ["b", "c", "a"]
    assert pool.order(10.0 + COOLDOWN_FIRST - 0.1) == ["b", "c", "a"]


def test_a_failed_endpoint_is_probed_once_its_cool_down_is_over_then_rests_again() -> None:
    pool = EndpointPool(["a", "b"])
    pool.failed("a", 0.0)
    assert pool.order(COOLDOWN_FIRST) == ["a", "b"]  # the probe
    # Only one call gets the probe: the others of the sweep go to the healthy endpoint.
    assert pool.order(COOLDOWN_FIRST) == ["b", "a"]
    pool.succeeded("a")
    assert pool.order(COOLDOWN_FIRST + 0.1) == ["a", "b"]  # back to first place


def test_each_failure_in_a_row_doubles_the_cool_down() -> None:
    pool = EndpointPool(["a", "b"])
    pool.failed("a", 0.0)
    pool.failed("a", 0.0)  # the failed probe
    assert pool.order(COOLDOWN_FIRST) == ["b", "a"]
    assert pool.order(2 * COOLDOWN_FIRST) == ["a", "b"]


def test_an_endpoint_failing_for_days_rests_the_longest_cool_down_and_is_still_probed() -> None:
    pool = EndpointPool(["a", "b"])
    for _ in range(5000):  # more failures in a row than a float's doubling allows
        pool.failed("a", 0.0)
    assert pool.order(COOLDOWN_MAX - 0.1) == ["b", "a"]
    assert pool.order(COOLDOWN_MAX) == ["a", "b"]  # the probe


def test_when_all_have_failed_every_endpoint_is_still_tried_due_soonest_first() -> None:
    pool = EndpointPool(["a", "b", "c"])
    pool.failed("b", 0.0)
    pool.failed("a", 1.0)
    pool.failed("c", 1.0)
    pool.failed("c", 1.0)
    assert pool.order(2.0) == ["b", "a", "c"]


def test_the_endpoint_that_answered_is_kept_over_one_that_failed_since() -> None:
    pool = EndpointPool(["a", "b"])
    pool.failed("a", 0.0)
    pool.succeeded("b")
    assert pool.order(1.0) == ["b", "a"]


# -- the client against two real simulators ---------------------------------------------------


def cluster() -> Ledger:
    ledger = Ledger(seed=3)
    ledger.set_validator(VOTE, NODE, stake=50_000_000_000_000)
    ledger.set_node(NODE, version="2.3.6")
    return ledger


@pytest.fixture
def servers() -> Iterator[tuple[SimulatorServer, SimulatorServer]]:
    with (
        SimulatorServer(cluster(), api_key=KEY_A) as a,
        SimulatorServer(cluster(), api_key=KEY_B) as b,
    ):
        yield a, b


def client(urls: list[str | EndpointSpec], now: list[float]) -> RpcClient:
    async def no_sleep(seconds: float) -> None:
        return None

    settings = RpcSettings(timeout=2.0, max_attempts=2)
    return RpcClient(urls, settings, sleep=no_sleep, clock=lambda: now[0])


async def test_a_refused_endpoint_fails_over_to_the_next_within_the_call(
    servers: tuple[SimulatorServer, SimulatorServer],
) -> None:
    a, b = servers
    refused = a.url
    a.stop()  # nothing listens there any more: connection refused
    now = [0.0]
    async with client([refused, b.url], now) as rpc:
        accounts = await rpc.get_vote_accounts()
        assert [v.vote_pubkey for v in accounts.current] == [VOTE]
        assert rpc.stats.failovers == 1
        assert rpc.stats.retries == 0  # no backoff: the other endpoint answered at once
        # While the refused one cools down, calls go straight to the healthy one.
        await rpc.get_vote_accounts()
        assert rpc.stats.failovers == 1
    assert b.count("getVoteAccounts") == 2


async def test_a_5xx_endpoint_is_probed_after_its_cool_down_and_taken_back_when_it_answers(
    servers: tuple[SimulatorServer, SimulatorServer],
) -> None:
    a, b = servers
    a.ledger.faults.inject("http_503_html", count=2)
    now = [100.0]
    async with client([a.url, EndpointSpec(b.url, max_rps=10)], now) as rpc:
        await rpc.get_cluster_nodes()  # a: 503, then b
        assert (a.count(), b.count()) == (1, 1)
        now[0] += 1.0
        await rpc.get_cluster_nodes()  # a cools down: b only
        assert (a.count(), b.count()) == (1, 2)
        now[0] += COOLDOWN_FIRST
        await rpc.get_cluster_nodes()  # the probe: a, still 503, then b
        assert (a.count(), b.count()) == (2, 3)
        now[0] += 2 * COOLDOWN_FIRST
        await rpc.get_cluster_nodes()  # the next probe: a answers
        now[0] += 1.0
        await rpc.get_cluster_nodes()  # a is first again
        assert (a.count(), b.count()) == (4, 3)
        assert rpc.endpoints[1].max_rps == 10


async def test_when_every_endpoint_fails_the_call_fails_after_its_rounds(
    servers: tuple[SimulatorServer, SimulatorServer],
) -> None:
    a, b = servers
    a.ledger.faults.inject("http_503_html", count=10)
    refused = b.url
    b.stop()
    async with client([a.url, refused], [0.0]) as rpc:
        with pytest.raises((ServerError, RpcTimeout)) as caught:
            await rpc.get_vote_accounts()
    assert caught.value.attempts == 2  # max_attempts counts rounds
    assert a.count("getVoteAccounts") == 2
    assert KEY_A not in str(caught.value) and KEY_B not in str(caught.value)


async def test_an_error_about_the_request_is_not_failed_over(
    servers: tuple[SimulatorServer, SimulatorServer],
) -> None:
    a, b = servers
    a.ledger.faults.inject("rpc_error", code=-32602, message="Invalid params")
    async with client([a.url, b.url], [0.0]) as rpc:
        with pytest.raises(InvalidRequest):
            await rpc.get_vote_accounts()
    assert b.count() == 0


async def test_a_pinned_reader_asks_its_endpoint_only(
    servers: tuple[SimulatorServer, SimulatorServer],
) -> None:
    a, b = servers
    a.ledger.faults.inject("http_503_html", count=10)
    async with client([a.url, b.url], [0.0]) as rpc:
        first, second = rpc.readers()
        with pytest.raises(ServerError):
            await first.get_vote_accounts()
        await second.get_vote_accounts()
    assert (a.count(), b.count()) == (2, 1)
    assert first.public_url == a.url.replace(KEY_A, "***")


async def test_no_key_of_any_endpoint_shows_in_errors_or_logs(
    servers: tuple[SimulatorServer, SimulatorServer],
) -> None:
    a, b = servers
    a.ledger.faults.inject("http_503_html", count=10)
    refused = b.url
    b.stop()
    with structlog.testing.capture_logs() as logs:
        async with client([a.url, refused], [0.0]) as rpc:
            with pytest.raises(RpcError) as caught:
                await rpc.get_vote_accounts()
    shown = [str(caught.value), caught.value.message, rpc.public_url, repr(logs)]
    assert "rpc failover" in shown[-1] and "rpc retry" in shown[-1]
    assert rpc.public_url == f"{a.url}, {refused}".replace(KEY_A, "***").replace(KEY_B, "***")
    for text in shown:
        assert KEY_A not in text and KEY_B not in text
