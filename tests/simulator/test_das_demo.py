"""The demo ledger holds what the program and asset example rules watch: `watcher demo` can
take each of their baselines (an unknown asset or master edition would never be evidence)."""

from __future__ import annotations

from pathlib import Path

from watcher.kinds import KINDS
from watcher.kinds.rule_files import load_rules
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import SCENARIOS, SimulatorServer

REPO = Path(__file__).resolve().parents[2]
OURS = {"token_accounts", "new_assets", "program_accounts", "asset_changed", "new_editions"}


async def test_every_example_target_of_these_kinds_is_observed_without_doubt() -> None:
    rules = [rule for rule in load_rules([REPO / "rules"], None) if rule.kind in OURS]
    assert {rule.kind for rule in rules} == OURS
    with SimulatorServer(SCENARIOS["demo"].new_ledger()) as server:
        async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
            for rule in rules:
                source = KINDS[rule.kind].source
                for target in rule.targets:
                    observation = await source.observe(client, target, None)
                    assert source.doubt(None, observation, 0.0) is None, (rule.name, target)
                    assert source.step([rule], target, None, observation, 0.0).alerts == ()
