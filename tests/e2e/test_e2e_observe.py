"""End to end, what an operator watches: ``/metrics`` and ``/healthz`` on ``http.listen`` from
the real daemon polling the simulator, and how they change while the endpoint fails."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.testing.daemon import tx_rule
from watcher.testing.net import free_port, get
from watcher.testing.receivers import wait_until

from support.world import API_KEY, OUR_VOTE, TREASURY, World, make_world, rules, small_cluster

pytestmark = pytest.mark.e2e


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


@pytest.fixture
def plain_world(tmp_path: Path) -> Iterator[World]:
    """Every kind of rule, no ``http`` section."""
    yield from make_world(tmp_path, small_cluster(), rules=rules())


def test_nothing_listens_without_http_listen(plain_world: World) -> None:
    port = free_port()
    plain_world.daemon.start()
    plain_world.wait_polls("getSignaturesForAddress", 2)
    assert get(f"http://127.0.0.1:{port}/healthz") == (0, "")
    assert plain_world.daemon.stop() == 0


def status(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WATCHER_")}
    return subprocess.run(
        [sys.executable, "-m", "watcher", "status", "--config", str(config), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_status_shows_what_fires_each_sources_last_round_and_the_outbox(
    plain_world: World,
) -> None:
    world = plain_world
    config = world.config
    world.daemon.start()
    world.ledger.mark_delinquent(OUR_VOTE)
    world.wait_notes(1)
    world.ledger.faults.inject("http_503_html", method="getClusterNodes", count=10_000)
    result = wait_until(
        lambda: (r := status(config, "--health")).returncode == 1 and r,
        15,
        "status --health exits 1 while getClusterNodes fails",
    )
    assert "watcher: unhealthy: nodes: every poll of its last round failed" in result.stderr
    world.ledger.faults.clear()
    assert world.daemon.stop() == 0

    result = status(config)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "firing: 1"
    assert lines[1].startswith(f"  CRITICAL my-validator {OUR_VOTE} since ")
    assert "sources: 4" in lines
    assert any(line.startswith("  signatures ") and "1 targets" in line for line in lines)
    assert lines[-1] == "deliveries: 0 pending, 0 dead"

    shown = json.loads(status(config, "--json").stdout)
    assert [f["rule"] for f in shown["firing"]] == ["my-validator"]
    assert {s["source"] for s in shown["sources"]} == {"holders", "nodes", "signatures", "votes"}
    assert shown["deliveries"] == {"pending": 0, "oldest_pending_at": None, "dead": 0}


def log_lines(world: World) -> list[dict[str, Any]]:
    return [json.loads(line) for line in world.daemon.output().splitlines() if line[:1] == "{"]


class PingReceiver:
    """A real local HTTP listener counting the GETs of a heartbeat (like healthchecks.io)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                receiver.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/ping/{PING_SECRET}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


PING_SECRET = "hc-5e3c7e7-uuid-never-logged"


@pytest.fixture
def pings() -> Iterator[PingReceiver]:
    receiver = PingReceiver()
    yield receiver
    receiver.close()


@pytest.fixture
def beat_world(tmp_path: Path, pings: PingReceiver) -> Iterator[World]:
    beat = {"url": pings.url, "every": "100ms"}
    yield from make_world(tmp_path, small_cluster(), rules=[tx_rule(TREASURY)], heartbeat=beat)


def test_the_heartbeat_pings_while_polls_succeed_and_stops_when_they_fail(
    beat_world: World, pings: PingReceiver
) -> None:
    world = beat_world
    world.daemon.start()
    wait_until(lambda: len(pings.paths) >= 2, 15, "two heartbeats")
    assert set(pings.paths) == {f"/ping/{PING_SECRET}"}

    world.ledger.faults.inject("http_503_html", method="getSignaturesForAddress", count=10_000)
    world.wait_polls("getSignaturesForAddress", 3)  # a whole round failed (3 attempts)
    before, logged, requests = (
        len(pings.paths),
        log_lines(world),
        world.polls("getSignaturesForAddress"),
    )
    world.wait_polls("getSignaturesForAddress", 9)  # three more failed rounds
    assert len(pings.paths) == before

    # The outage's log: one warning per failed round (not one per attempt or poll), the
    # round's summary line at info level, which carries the error.
    during = log_lines(world)[len(logged) :]
    rounds = (world.polls("getSignaturesForAddress") - requests) // 3 + 1
    warnings = [line for line in during if line["level"] == "warning"]
    # And APScheduler's "skipped: maximum number of running instances" said once, in our words.
    overran = "sweep overran its interval; runs are skipped until sweeps are faster"
    assert 1 <= len(warnings) <= rounds + 1, [w["event"] for w in warnings]
    assert {w["event"] for w in warnings} <= {"round failed", overran}
    summary = next(line for line in during if line["event"] == "round")
    assert summary["failed"] == summary["targets"] == 1 and "ServerError" in summary["error"]

    world.ledger.faults.clear()
    wait_until(lambda: len(pings.paths) > before, 15, "heartbeats again")
    assert world.daemon.stop() == 0
    assert PING_SECRET not in world.daemon.output()
