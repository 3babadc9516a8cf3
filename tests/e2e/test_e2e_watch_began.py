"""End to end, a watch begins when it is asked for: `watcher run` over 240 addresses whose
first polls are paced at a budget of 20 calls a second (about 12 s to baseline them all), with
transactions landing before the start, between the start and each address's first poll, while
the daemon is down after a kill -9 in the middle of the first sweep, and after the first polls;
then a reload that adds 30 addresses. Every transaction made after the watch of its address
began is notified once; none made before it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey
from watcher.testing.daemon import DaemonProcess, alert_history, write_config
from watcher.testing.net import free_port
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import API_KEY

pytestmark = pytest.mark.e2e

ADDRESSES = [derived_pubkey(f"e2e watch-began address {index}") for index in range(240)]
WATCHER = [sys.executable, "-m", "watcher"]
ADDED = [derived_pubkey(f"e2e watch-began added {index}") for index in range(30)]


@pytest.fixture
def provider() -> Iterator[tuple[Ledger, SimulatorServer]]:
    ledger = Ledger(seed=35)
    with SimulatorServer(ledger, api_key=API_KEY) as server:
        yield ledger, server


def status(config: Path) -> dict[str, Any]:
    shown = subprocess.run(
        [*WATCHER, "status", "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, Any] = json.loads(shown.stdout)
    return found


def awaiting_in_metrics(port: int) -> tuple[float, float] | None:
    """``watcher_targets_awaiting_first_poll`` and the oldest wait, from /metrics."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    except httpx.HTTPError:
        return None
    found = {}
    for line in text.splitlines():
        for name in (
            "watcher_targets_awaiting_first_poll",
            "watcher_first_poll_oldest_wait_seconds",
        ):
            if line.startswith(f'{name}{{source="signatures"}} '):
                found[name] = float(line.split()[-1])
    if len(found) < 2:
        return None
    return found["watcher_targets_awaiting_first_poll"], found[
        "watcher_first_poll_oldest_wait_seconds"
    ]


def rule(addresses: list[str]) -> dict[str, object]:
    return {
        "name": "deposits",
        "kind": "new_transactions",
        "addresses": addresses,
        "every": "1s",
        "max_every": "10s",
        "group_wait": "0s",
        "notify": ["hooks"],
    }


def test_what_lands_after_the_watch_began_is_notified_however_late_the_first_poll(
    tmp_path: Path, provider: tuple[Ledger, SimulatorServer]
) -> None:
    ledger, server = provider
    port = free_port()

    def first_polled(address: str) -> bool:
        return any(
            request.method == "getSignaturesForAddress" and request.params[0] == address
            for request in list(server.requests)
        )

    def not_polled(addresses: list[str]) -> list[str]:
        polled = {
            request.params[0]
            for request in list(server.requests)
            if request.method == "getSignaturesForAddress"
        }
        return [address for address in addresses if address not in polled]

    # History: every address has some, and a few saw a transaction just before the start.
    before: list[str] = []
    for address in ADDRESSES[::8]:
        before += ledger.add_transactions(address, 2)
    made = time.time()
    # The watch begins in a later second than the history's (blockTime is whole seconds).
    wait_until(lambda: int(time.time()) > int(made), 3, "the next second")
    after: list[str] = []  # made after the watch began: each must be notified once
    with JsonReceiver() as receiver:
        config = write_config(
            tmp_path,
            rpc_url=server.url,
            channels={"hooks": [receiver.url]},
            rules=[rule(ADDRESSES)],
            extra={
                "rpc": {"timeout": "2s", "max_attempts": 3, "budget": "1728k/day"},
                "http": {"listen": f"127.0.0.1:{port}"},
            },
        )
        daemon = DaemonProcess(config)
        try:
            daemon.start()
            wait_until(lambda: "watch began" in daemon.output(), 20, "the watch began")
            # Visible while the first sweep is paced: how many wait, and for how long.
            waits = wait_until(lambda: awaiting_in_metrics(port), 20, "the gauges")
            assert 0 < waits[0] <= len(ADDRESSES) and waits[1] >= 0.0
            shown = status(config)
            [signatures] = shown["awaiting_first_poll"]
            assert signatures["source"] == "signatures" and 0 < signatures["targets"] <= 240
            # While the first sweep is paced: transactions on addresses not polled yet,
            # a burst of three on one of them.
            waiting = not_polled(ADDRESSES)[-60:]
            for address in waiting[:20]:
                after += ledger.add_transactions(address, 3 if address == waiting[0] else 1)
            # A kill -9 in the middle of the first sweep, transactions while it is down.
            wait_until(lambda: len(not_polled(ADDRESSES)) < 160, 30, "a third polled")
            daemon.kill()
            for address in not_polled(ADDRESSES)[-20:]:
                after += ledger.add_transactions(address, 1)
            daemon.start()
            wait_until(lambda: not not_polled(ADDRESSES), 60, "every address's first poll")
            wait_until(lambda: not status(config)["awaiting_first_poll"], 20, "none waiting")
            # After the first polls, as ever.
            for address in ADDRESSES[1:40:4]:
                after += ledger.add_transactions(address, 1)
            # A reload adds addresses: their history before it stays quiet, what lands after
            # it and before their first poll is notified.
            for address in ADDED:
                before += ledger.add_transactions(address, 1)
            made = time.time()
            wait_until(lambda: int(time.time()) > int(made), 3, "the next second")
            rules_file = tmp_path / "rules" / "rules.yaml"
            rules_file.write_text(yaml.safe_dump({"rules": [rule(ADDRESSES + ADDED)]}))
            assert daemon.proc is not None
            daemon.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: '"event": "reloaded"' in daemon.output(), 20, "the reload")
            late = not_polled(ADDED)
            for address in late[:10]:
                after += ledger.add_transactions(address, 1)
            assert late, "the added addresses were all polled before the reload was seen"

            def history() -> list[dict[str, Any]]:
                return alert_history(config)

            def listed(alerts: list[dict[str, Any]]) -> list[str]:
                return [s["signature"] for a in alerts for s in a["facts"]["signatures"]]

            # Waited for at the receiver: each look with `watcher alerts` starts a process
            # (the CPU the daemon needs meanwhile), so it is asked once they are all told.
            wait_until(lambda: told(receiver) >= len(after), 60, "every transaction told")
            wait_until(
                lambda: set(after) <= set(listed(history())),
                60,
                "every transaction after the watch began in an alert",
            )
            wait_until(
                lambda: all(a["status"] == "sent" for a in history()), 30, "every alert sent"
            )
            assert daemon.stop() == 0
        finally:
            daemon.kill()
    alerts = history()
    # Once each, and nothing of the history before the watch began.
    assert sorted(listed(alerts)) == sorted(after)
    # One alert per address that saw news: the burst is one, with its count.
    assert len(alerts) == len(after) - 2
    assert sorted(a["facts"]["count"] for a in alerts)[-1] == 3
    began = [a for a in alerts if "Since the watch began at" in a["body"]]
    assert len(began) == 20 + 20 + 10  # the first polls' (start, kill -9, reload)
    # And the receiver was told of each of them (alone, or counted in a digest's title).
    assert told(receiver) == len(after)


def told(receiver: JsonReceiver) -> int:
    """Transactions the receiver was told of: each alone, or counted in a digest's title."""
    counts = [
        re.match(r"\[WARNING\] deposits: (\d+) new transactions? ", note["title"])
        for note in receiver.received
    ]
    return sum(int(match.group(1)) for match in counts if match)
