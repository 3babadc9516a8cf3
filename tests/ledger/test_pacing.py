"""max_rps: the pacer's slots with an injected clock, and the client's requests waiting for them."""

from __future__ import annotations

import heapq
import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from watcher.ledger.pacing import HEADROOM, Pacer, Ticket, paced
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.ledger.transport import EndpointSpec

from support.loopback import node_poster

KEY = "SeCrEtKeY-0123456789abcdefXYZ"


def test_slots_are_evenly_spaced_with_no_burst_after_a_quiet_spell() -> None:
    pacer = Pacer(10, headroom=0)
    assert [pacer.reserve(0.0) for _ in range(4)] == pytest.approx([0.0, 0.1, 0.2, 0.3])
    # Long quiet: the next request goes at once, the one after it waits a full spacing.
    assert pacer.reserve(100.0) == 0.0
    assert pacer.reserve(100.0) == pytest.approx(0.1)
    assert pacer.reserve(100.25) == pytest.approx(0.0)  # its slot (100.2) has passed


def test_a_late_request_pushes_the_next_slot() -> None:
    pacer = Pacer(10, headroom=0.02)  # spacing 0.102 s, tolerance 10 ms
    assert pacer.reserve(0.0) == 0.0
    pacer.late(Ticket(0.0, opens_spell=False), 0.005)  # 5 ms late: within the tolerance
    assert pacer.reserve(0.05) == pytest.approx(0.052)  # slot 0.102
    pacer.late(Ticket(0.102, opens_spell=False), 0.142)  # 40 ms late: the loop was busy
    assert pacer.reserve(0.15) == pytest.approx(0.094)  # slot 0.244, not 0.204
    pacer.late(Ticket(0.244, opens_spell=False), 0.244)
    assert pacer.reserve(0.244) == pytest.approx(0.102)


def test_headroom_widens_the_spacing() -> None:
    assert Pacer(50).spacing == pytest.approx((1 + HEADROOM) / 50)
    with pytest.raises(ValueError, match="positive"):
        Pacer(0)


@given(
    rate=st.sampled_from([1.0, 2.5, 10.0, 50.0, 500.0]),
    arrivals=st.lists(st.floats(min_value=0, max_value=5), min_size=1, max_size=300),
)
def test_no_one_second_window_holds_more_than_max_rps(rate: float, arrivals: list[float]) -> None:
    pacer = Pacer(rate, headroom=0)
    sent = [now + pacer.reserve(now) for now in sorted(arrivals)]
    assert sent == sorted(sent)
    for first, when in enumerate(sent):
        # Requests sent in the window [when, when + 1): at most max_rps of them.
        in_window = sum(1 for other in sent[first:] if other < when + 1 - 1e-9)
        assert in_window <= math.ceil(rate)


@given(
    instances=st.integers(min_value=1, max_value=8),
    rate=st.sampled_from([5.0, 10.0, 20.0, 100.0]),
    slowed=st.integers(min_value=0, max_value=3),
)
def test_instances_sharing_a_key_never_sum_above_its_max_rps(
    instances: int, rate: float, slowed: int
) -> None:
    pacers = [Pacer(rate) for _ in range(instances)]
    for pacer in pacers:
        for _ in range(slowed):
            pacer.slow_down()
        before = pacer.spacing / pacer.base_spacing
        pacer.set_share(1 / instances)
        # A slow-down after a 429 is kept; the pace and the window are the share's.
        assert pacer.spacing / pacer.base_spacing == pytest.approx(before)
        assert pacer.spacing >= instances / rate
    assert sum(1 / pacer.base_spacing for pacer in pacers) <= rate
    if 1 < instances <= rate:  # (a window lets at least one request through)
        assert sum(pacer.limit for pacer in pacers) <= rate
    pacers[0].set_share(1.0)
    assert pacers[0].limit == math.ceil(rate)
    with pytest.raises(ValueError, match="share"):
        pacers[0].set_share(0)


class FakeTime:
    """A clock that moves only when the client sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.now += delay


async def test_client_requests_to_each_endpoint_keep_its_pace() -> None:
    time = FakeTime()
    seen: list[tuple[str, float]] = []

    def node(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.host, time.now))
        call = json.loads(request.content)
        return httpx.Response(200, json={"jsonrpc": "2.0", "result": [], "id": call["id"]})

    client = RpcClient(
        [f"https://a.example.com/v3/{KEY}", EndpointSpec(f"https://b.example.com/v3/{KEY}", 2)],
        RpcSettings(max_rps=5),
        poster=node_poster(node),
        clock=time,
        sleep=time.sleep,
    )
    async with client:
        for _ in range(6):
            await client.call("getClusterNodes", None, list[Any])
        b_reader = next(r for r in client.readers() if r.public_url.startswith("https://b"))
        for _ in range(3):
            await b_reader.call("getClusterNodes", None, list[Any])
    a_times = [at for host, at in seen if host == "a.example.com"]
    b_times = [at for host, at in seen if host == "b.example.com"]
    spacing_a, spacing_b = (1 + HEADROOM) / 5, (1 + HEADROOM) / 2
    assert a_times == pytest.approx([i * spacing_a for i in range(6)])
    # b's own max_rps (2) beats rpc.max_rps; its first request went at once.
    assert b_times == pytest.approx([a_times[-1] + i * spacing_b for i in range(3)])


def test_slow_down_widens_the_spacing_up_to_half_as_slow_again() -> None:
    pacer = Pacer(10, headroom=0)
    assert pacer.slow_down() and pacer.spacing == pytest.approx(0.105)
    for _ in range(20):
        pacer.slow_down()
    assert pacer.spacing == pytest.approx(0.15) and not pacer.slow_down()


async def test_a_429_within_max_rps_slows_the_pace_and_says_so_once() -> None:
    time = FakeTime()
    answers = iter([429, 429, 200, 200])

    def node(request: httpx.Request) -> httpx.Response:
        status = next(answers)
        if status == 429:
            return httpx.Response(429, headers={"Retry-After": "1"}, text="Too many requests")
        call = json.loads(request.content)
        return httpx.Response(200, json={"jsonrpc": "2.0", "result": [], "id": call["id"]})

    client = RpcClient(
        f"https://a.example.com/v3/{KEY}",
        RpcSettings(max_rps=10),
        poster=node_poster(node),
        clock=time,
        sleep=time.sleep,
    )
    with structlog.testing.capture_logs() as logs:
        async with client:
            assert await client.call("getClusterNodes", None, list[Any]) == []
            assert await client.call("getClusterNodes", None, list[Any]) == []
    pacer = client.endpoints[0].pacer
    assert pacer is not None and pacer.spacing == pytest.approx(pacer.base_spacing * 1.05**2)
    slower = [e for e in logs if e["event"].startswith("rpc endpoint answered 429")]
    assert len(slower) == 1 and slower[0]["max_rps"] == 10
    assert KEY not in str(logs)


async def test_paced_counts_when_a_request_leaves_and_a_cold_first_request_as_answered() -> None:
    time = FakeTime()
    pacer = Pacer(10, headroom=0.02)  # spacing 0.102 s, tolerance 10 ms
    async with paced(pacer, time, time.sleep) as first:
        time.now = 0.03  # its answer: it may have reached the provider only now
        await first["trace"]("http11.receive_response_headers.complete", {})
    async with paced(pacer, time, time.sleep) as second:
        assert time.now == pytest.approx(0.132)
        time.now = 0.2  # a new connection held it 68 ms before its headers went out
        await second["trace"]("http11.send_request_headers.started", {})
        await second["trace"]("http11.receive_response_headers.complete", {})  # warm: no push
    async with paced(pacer, time, time.sleep):
        assert time.now == pytest.approx(0.302)


class Provider(FakeTime):
    """A fake clock that also runs what is due as it moves on: requests leaving, answers."""

    def __init__(self) -> None:
        super().__init__()
        self._due: list[tuple[float, int, Callable[[], None]]] = []

    def at(self, when: float, event: Callable[[], None]) -> None:
        heapq.heappush(self._due, (when, len(self._due) + id(event), event))

    async def sleep(self, delay: float) -> None:
        self.run_until(self.now + delay)

    def run_until(self, end: float) -> None:
        while self._due and self._due[0][0] <= end:
            when, _, event = heapq.heappop(self._due)
            self.now = max(self.now, when)
            event()
        self.now = max(self.now, end)


@dataclass
class Sent:
    let_go: float
    left: float  # its headers went out
    answered: float
    opens_spell: bool


async def send_all(
    pacer: Pacer,
    provider: Provider,
    lags: list[float],
    rtt: float,
    asks: list[float] | None = None,
) -> list[Sent]:
    """Requests asking back to back (or each at its ``asks``), each leaving ``lag`` after it
    was let go (a busy loop, a new connection), answered ``rtt`` later."""
    sent: list[Sent] = []
    for i, lag in enumerate(lags):
        if asks is not None:
            provider.run_until(asks[i])
        ticket = await pacer.wait(provider, provider.sleep)
        request = Sent(provider.now, provider.now + lag, provider.now + lag + rtt, False)
        request.opens_spell = ticket.opens_spell
        sent.append(request)

        def leave(ticket: Ticket = ticket, request: Sent = request) -> None:
            pacer.sent(ticket, request.left)

        def answer(ticket: Ticket = ticket, request: Sent = request) -> None:
            pacer.answered(ticket, request.answered)
            pacer.done(ticket, request.answered)

        provider.at(request.left, leave)
        provider.at(request.answered, answer)
    provider.run_until(provider.now + 10)
    return sent


async def test_a_request_held_up_leaving_does_not_let_the_next_max_rps_into_its_second() -> None:
    # Seen on a loaded box: the first request of a spell spent 50 ms opening its connection,
    # the second found its slot due and left beside it, and the 19 after them, evenly spaced
    # from the first's answer, put the 21st request 0.996 s after the first: a 429.
    pacer, provider = Pacer(20), Provider()  # spacing 51.75 ms
    asks = [0.0, 0.052] + [0.052] * 40
    sent = await send_all(pacer, provider, [0.053] + [0.0] * 41, rtt=0.012, asks=asks)
    assert abs(sent[1].left - sent[0].left) < 0.002  # the two left together
    left = sorted(s.left for s in sent)
    assert left[20] - left[0] >= pacer.window  # > 1 s: 21 requests in no second


@given(
    rate=st.sampled_from([2.5, 10.0, 20.0, 50.0]),
    lags=st.lists(st.floats(0, 3), min_size=1, max_size=120),  # in spacings
    gaps=st.lists(st.sampled_from([0.0, 0.01, 0.02, 0.05, 0.5]), min_size=120, max_size=120),
    rtt=st.sampled_from([0.001, 0.012, 0.2]),
)
async def test_however_late_requests_leave_no_window_holds_more_than_max_rps(
    rate: float, lags: list[float], gaps: list[float], rtt: float
) -> None:
    pacer = Pacer(rate)
    asks = list(itertools.accumulate(gaps))
    sent = await send_all(pacer, Provider(), [lag * pacer.spacing for lag in lags], rtt, asks)
    # Any max_rps + 1 of them span a second and the network's share of the headroom, a
    # spell's first counted as it left or as late as its answer came back.
    limit = math.ceil(rate)
    for answered in (False, True):
        arrivals = sorted(s.answered if s.opens_spell and answered else s.left for s in sent)
        spans = [later - first for first, later in zip(arrivals, arrivals[limit:], strict=False)]
        assert all(span >= pacer.window - 1e-9 for span in spans)


async def test_on_time_the_window_never_holds_a_request_back() -> None:
    pacer, provider = Pacer(20), Provider()
    sent = await send_all(pacer, provider, [0.0] * 60, rtt=0.012)
    assert [s.let_go for s in sent] == pytest.approx([i * pacer.spacing for i in range(60)])
