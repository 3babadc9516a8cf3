"""A small seeded ledger, the four base rules watching it, and an in-process daemon polling it on a
manual clock, for the tests of evidence, quorum and rounds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watcher.app import Daemon
from watcher.checks import load_config
from watcher.core.events import AlertMessage
from watcher.kinds import RULE_MODELS, SOURCES
from watcher.kinds.ruleset import RuleSet
from watcher.kinds.toolkit.signature_cursor import Cursor
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey
from watcher.testing.daemon import write_config

TREASURY = derived_pubkey("evidence treasury")
MINT = derived_pubkey("evidence mint")
HOLDERS = [derived_pubkey(f"evidence holder {i}") for i in range(21)]
OUR_VOTE, OUR_NODE = derived_pubkey("evidence our vote"), derived_pubkey("evidence our node")
BIG_VOTE, BIG_NODE = derived_pubkey("evidence big vote"), derived_pubkey("evidence big node")
FEATURE_SET = 3640012085
START = 1_790_000_000.0  # the injected clock (2026-09)


def small_cluster(clock: Callable[[], float]) -> Ledger:
    ledger = Ledger(seed=11, clock=clock)
    ledger.add_transactions(TREASURY, 5)
    ledger.set_holders(MINT, [(h, 1_000_000 * (100 - i)) for i, h in enumerate(HOLDERS[:20])])
    for vote, node, stake in (
        (BIG_VOTE, BIG_NODE, 10_000_000_000_000_000),
        (OUR_VOTE, OUR_NODE, 50_000_000_000_000),
    ):
        ledger.set_validator(vote, node, stake=stake)
        ledger.set_node(node, version="2.3.6", feature_set=FEATURE_SET)
    return ledger


def base_rules() -> list[dict[str, Any]]:
    return [
        {
            "name": "treasury",
            "kind": "new_transactions",
            "addresses": [TREASURY],
            "every": "1s",
            "notify": ["hooks"],
        },
        {
            "name": "whales",
            "kind": "holder_changes",
            "mints": [MINT],
            "min_change_pct": 10,
            "every": "1s",
            "notify": ["hooks"],
        },
        {
            "name": "my-validator",
            "kind": "delinquent_validators",
            "validators": [OUR_VOTE],
            "every": "1s",
            "notify": ["hooks"],
        },
        {
            "name": "drift",
            "kind": "version_drift",
            "validators": [OUR_NODE],
            "every": "1s",
            "notify": ["hooks"],
        },
    ]


API_KEY = "evid3nc3K3yTh4tMustN3v3rL3ak"


@dataclass
class World:
    ledger: Ledger
    daemon: Daemon
    now: list[float]
    server: SimulatorServer

    def server_calls(self) -> int:
        """Every JSON-RPC call the simulator received (each call of a batch counts)."""
        return self.server.log.count()

    async def poll(self, source: str, target: str) -> None:
        self.now[0] += 1.0
        await self.daemon.pipeline.poll(SOURCES[source], target)

    async def alerts(self) -> list[AlertMessage]:
        """The stored alerts, oldest first."""
        return [record.alert for record in reversed(await self.daemon.store.history(limit=1000))]

    async def titles(self) -> list[str]:
        return [alert.title for alert in await self.alerts()]

    async def state(self, source: str, target: str) -> dict[str, Any]:
        return await self.daemon.store.load_state(source, target) or {}

    async def cursor(self) -> Cursor:
        return Cursor.from_json((await self.state("signatures", TREASURY))["cursor"])

    def rewrite(self, method: str, fn: Callable[[Any], Any], count: int = 1) -> None:
        self.ledger.faults.rewrite(method, fn, count=count)


@asynccontextmanager
async def daemon_worlds(tmp_path: Path) -> AsyncIterator[Callable[..., World]]:
    """Makes Worlds (each a simulator and an in-process Daemon on a manual clock); stops them
    all at the end, the daemon's HTTP session closed on the test's own event loop."""
    made: list[tuple[SimulatorServer, Daemon]] = []

    def make(
        rules: list[dict[str, Any]] | None = None,
        unchecked: Any = (),
        rpc: dict[str, Any] | None = None,
    ) -> World:
        """``unchecked``: rule dicts added after ``check`` (which would refuse them); ``rpc``:
        more keys of the ``rpc`` section."""
        now = [START]
        ledger = small_cluster(lambda: now[0])
        server = SimulatorServer(ledger, api_key=API_KEY)
        server.start()
        config = write_config(
            tmp_path,
            rpc_url=server.url,
            channels={"hooks": ["json://127.0.0.1:9/"]},
            rules=rules if rules is not None else base_rules(),
            extra={
                "state_path": str(tmp_path / "state" / "watcher.db"),
                "rpc": {"timeout": "2s", "max_attempts": 1, **(rpc or {})},
            },
        )
        settings, loaded = load_config(config)
        extra = [RULE_MODELS[r["kind"]].model_validate(r) for r in unchecked]
        daemon = Daemon(settings, RuleSet([*loaded, *extra]), clock=lambda: now[0])
        made.append((server, daemon))
        return World(ledger, daemon, now, server)

    try:
        yield make
    finally:
        for server, daemon in made:
            await daemon.close()
            await daemon.store.close()
            server.stop()
