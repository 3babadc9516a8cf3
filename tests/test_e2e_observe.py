"""End to end, what an operator watches: ``/metrics`` and ``/healthz`` on ``http.listen`` from
the real daemon polling the simulator, and how they change while the endpoint fails."""

from __future__ import annotations

import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_e2e_service import tx_rule

from receivers import wait_until
from test_e2e import API_KEY, TREASURY, World, make_world, small_cluster


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""  # not listening (yet)


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    http = {"listen": f"127.0.0.1:{free_port()}"}
    yield from make_world(tmp_path, small_cluster(), rules=[tx_rule(TREASURY)], http=http)


def test_metrics_and_healthz_follow_the_endpoints_health(world: World) -> None:
    listen = yaml.safe_load(world.config.read_text())["http"]["listen"]
    base = f"http://{listen}"
    polls = 'watcher_polls_total{source="signatures"}'
    failures = 'watcher_poll_failures_total{source="signatures"}'
    world.daemon.start()
    wait_until(lambda: metric(get(f"{base}/metrics")[1], polls) >= 2, 15, "two polls counted")
    assert get(f"{base}/healthz") == (200, "ok\n")
    text = get(f"{base}/metrics")[1]
    assert metric(text, failures) == 0
    assert metric(text, "watcher_outbox_depth") == 0
    assert metric(text, "watcher_firing_alerts") == 0
    assert 'watcher_rpc_latency_seconds_count{method="getSignaturesForAddress"}' in text
    assert metric(text, 'watcher_last_successful_poll_timestamp_seconds{source="signatures"}') > 0

    world.ledger.faults.inject("http_503_html", method="getSignaturesForAddress", count=10_000)
    _status, body = wait_until(
        lambda: (answer := get(f"{base}/healthz"))[0] == 503 and answer, 15, "/healthz 503"
    )
    assert body.startswith("polls failing: ") and "failed rounds in a row" in body
    text = get(f"{base}/metrics")[1]
    assert metric(text, failures) >= 1
    assert metric(text, "watcher_rpc_retries_total") >= 1

    world.ledger.faults.clear()
    wait_until(lambda: get(f"{base}/healthz") == (200, "ok\n"), 15, "/healthz 200 again")
    assert API_KEY not in get(f"{base}/metrics")[1] + get(f"{base}/healthz")[1]
    assert world.daemon.stop() == 0


def test_nothing_listens_without_http_listen(tmp_path: Path) -> None:
    port = free_port()
    for world in make_world(tmp_path, small_cluster(), rules=[tx_rule(TREASURY)]):
        world.daemon.start()
        world.wait_polls("getSignaturesForAddress", 2)
        assert get(f"http://127.0.0.1:{port}/healthz") == (0, "")
        assert world.daemon.stop() == 0
