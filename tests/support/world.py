"""The world the end-to-end tests run in: a small cluster on the simulator, the rules that watch
it, a real `watcher run` process delivering to a real local json:// receiver."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey
from watcher.testing.daemon import DaemonProcess, write_config
from watcher.testing.receivers import JsonReceiver, wait_until

API_KEY = "k3yTH4tMustN3v3rL3ak0ut9f8e7d6c5b4a3"
TREASURY = derived_pubkey("e2e treasury")
MINT = derived_pubkey("e2e mint")
HOLDERS = [derived_pubkey(f"e2e holder {i}") for i in range(21)]
OUR_VOTE, OUR_NODE = derived_pubkey("e2e our vote"), derived_pubkey("e2e our node")
BIG_VOTE, BIG_NODE = derived_pubkey("e2e big vote"), derived_pubkey("e2e big node")
DRIFT_VOTE, DRIFT_NODE = derived_pubkey("e2e drift vote"), derived_pubkey("e2e drift node")
FEATURE_SET = 3640012085


def small_cluster(clock: Callable[[], float] = time.time) -> Ledger:
    """A cluster with history: 5 old transactions, 20 holders, three validators on 2.3.6.
    ``clock``: the ledger's (its blockTimes), for a daemon started at another wall clock."""
    ledger = Ledger(seed=7, clock=clock)
    ledger.add_transactions(TREASURY, 5, ago=60)  # before the watch: never notified
    ledger.set_holders(MINT, [(h, 1_000_000 * (100 - i)) for i, h in enumerate(HOLDERS[:20])])
    for vote, node, stake in (
        (BIG_VOTE, BIG_NODE, 10_000_000_000_000_000),
        (OUR_VOTE, OUR_NODE, 50_000_000_000_000),
        (DRIFT_VOTE, DRIFT_NODE, 40_000_000_000_000),
    ):
        ledger.set_validator(vote, node, stake=stake)
        ledger.set_node(node, version="2.3.6", feature_set=FEATURE_SET)
    return ledger


def rules(every: str = "200ms") -> list[dict[str, Any]]:
    """The event rules send at once (``group_wait: 0s``): each watches one target, so a poll's
    news is one alert with no company to wait for, and the tests wait on every message."""
    return [
        {
            "name": "treasury",
            "kind": "new_transactions",
            "addresses": [TREASURY],
            "every": every,
            "group_wait": "0s",
            "notify": ["hooks"],
        },
        {
            "name": "whales",
            "kind": "holder_changes",
            "mints": [MINT],
            "min_change_pct": 10,
            "every": every,
            "group_wait": "0s",
            "notify": ["hooks"],
            "severity": "info",
        },
        {
            "name": "my-validator",
            "kind": "delinquent_validators",
            "validators": [OUR_VOTE],
            "every": every,
            "notify": ["hooks"],
            "severity": "critical",
        },
        {
            "name": "drift",
            "kind": "version_drift",
            "validators": [DRIFT_NODE],
            "every": every,
            "notify": ["hooks"],
        },
    ]


@dataclass
class World:
    ledger: Ledger
    server: SimulatorServer
    receiver: JsonReceiver
    daemon: DaemonProcess
    config: Path

    def notes(self) -> list[dict[str, Any]]:
        return self.receiver.received

    def wait_notes(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        return wait_until(
            lambda: self.notes() if len(self.notes()) >= count else None,
            timeout,
            f"{count} notifications (have {len(self.notes())}: {self.titles()})\n"
            + self.daemon.output()[-3000:],
        )

    def titles(self) -> list[str]:
        return [note["title"] for note in self.notes()]

    def polls(self, method: str) -> int:
        return self.server.count(method)

    def wait_polls(self, method: str, more: int = 3) -> None:
        """Let the daemon poll ``method`` ``more`` more times (nothing else to wait on when
        asserting that nothing happens)."""
        target = self.polls(method) + more
        wait_until(lambda: self.polls(method) >= target, 15.0, f"{more} more {method} polls")

    def wait_polls_of(self, methods: Iterable[str], more: int) -> None:
        """``wait_polls`` of each of ``methods`` at once: the sources are swept side by side,
        and waiting for them one after the other waited out their intervals over and over."""
        targets = {method: self.polls(method) + more for method in methods}
        wait_until(
            lambda: all(self.polls(method) >= count for method, count in targets.items()),
            15.0 * len(targets),  # the deadline the waits one after the other had in all
            f"{more} more polls of each of " + ", ".join(targets),
        )


def make_world(tmp_path: Path, ledger: Ledger, **config: Any) -> Iterator[World]:
    with SimulatorServer(ledger, api_key=API_KEY) as server, JsonReceiver() as receiver:
        channels = config.pop("channels", {"hooks": [receiver.url]})
        path = write_config(
            tmp_path,
            rpc_url=server.url,
            channels=channels,
            rules=config.pop("rules", rules()),
            extra=config,
        )
        daemon = DaemonProcess(path)
        try:
            yield World(ledger, server, receiver, daemon, path)
        finally:
            daemon.kill()


def all_polled(world: World) -> None:
    world.wait_polls_of(
        (
            "getSignaturesForAddress",
            "getTokenLargestAccounts",
            "getVoteAccounts",
            "getClusterNodes",
        ),
        2,
    )
