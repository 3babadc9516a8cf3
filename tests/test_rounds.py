"""A round's summary line (`round`, info level) says what the sweep did: its targets, failures,
the RPC calls it made and the alerts it committed, counted per sweep even when sweeps overlap."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from watcher.alerting.ruleset import Job

from support.seeded import MINT, TREASURY, World, daemon_worlds


@pytest.fixture
def make_world(tmp_path: Path) -> Iterator[Callable[..., World]]:
    yield from daemon_worlds(tmp_path)


def rounds(logs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {line["source"]: line for line in logs if line["event"] == "round"}


async def test_the_summary_counts_the_calls_the_node_saw_and_the_alerts_committed(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    signatures = Job("signatures", 1.0, (TREASURY,))
    holders = Job("holders", 1.0, (MINT,))
    await asyncio.gather(world.daemon.sweep(signatures), world.daemon.sweep(holders))  # baseline

    world.ledger.add_transactions(TREASURY, 3)
    before_alerts = len(world.alerts())
    before_calls = world.server_calls()
    world.now[0] += 5
    with capture_logs() as logs:
        await asyncio.gather(world.daemon.sweep(signatures), world.daemon.sweep(holders))
    said = rounds(logs)
    assert said["signatures"]["targets"] == 1 and said["signatures"]["failed"] == 0
    assert said["signatures"]["alerts"] == len(world.alerts()) - before_alerts > 0
    assert said["holders"]["alerts"] == 0  # nothing moved: the sweeps' counts stay apart
    assert said["holders"]["calls"] == 1
    assert said["signatures"]["calls"] + said["holders"]["calls"] == (
        world.server_calls() - before_calls
    )
