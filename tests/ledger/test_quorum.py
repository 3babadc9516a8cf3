"""quorum: 2 — a state alert fires or resolves only when two endpoints agree.

The daemon's own poll (``TargetPipeline.poll``) against two real simulators on loopback, each
with its own ledger; state is a real SQLite file. What the user would get is asserted: the
alerts recorded for delivery."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml

from watcher.app import Daemon
from watcher.checks import load_config
from watcher.kinds import SOURCES
from watcher.kinds.ruleset import Job, RuleSet
from watcher.ledger.quorum import agree, differences
from watcher.simulator import Ledger, SimulatorServer
from watcher.testing.daemon import write_config

from support.seeded import OUR_NODE, OUR_VOTE, START, TREASURY, base_rules, small_cluster
from support.values import step_outcome

KEY_A, KEY_B = "qu0rumAK3yTh4tMustN3v3rL3ak", "qu0rumBK3yTh4tMustN3v3rL3ak"


def with_endpoints(config: Path, urls: list[str], **extra: Any) -> Path:
    """The settings file with ``rpc_urls`` instead of ``rpc_url``."""
    data = yaml.safe_load(config.read_text())
    del data["rpc_url"]
    data.update(rpc_urls=urls, **extra)
    config.write_text(yaml.safe_dump(data))
    return config


@dataclass
class World:
    a: Ledger
    b: Ledger
    servers: tuple[SimulatorServer, SimulatorServer]
    daemon: Daemon
    now: list[float]

    async def poll(self, source: str = "votes") -> None:
        self.now[0] += 1.0
        await self.daemon.pipeline.poll(SOURCES[source], "cluster")

    async def titles(self) -> list[str]:
        history = await self.daemon.store.history(limit=1000)
        return [record.alert.title for record in reversed(history)]

    async def bodies(self) -> list[str]:
        history = await self.daemon.store.history(limit=1000)
        return [record.alert.body for record in reversed(history)]

    async def sweep(self, source: str = "votes", seconds: float = 60.0) -> MutableMapping[str, Any]:
        """One scheduled round of ``source`` after ``seconds``; its "round" log line."""
        self.now[0] += seconds
        with structlog.testing.capture_logs() as logs:
            await self.daemon.sweep(Job(source, 60.0, ("cluster",)))
        [line] = [entry for entry in logs if entry["event"] == "round"]
        return line


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    now = [START]
    a, b = small_cluster(lambda: now[0]), small_cluster(lambda: now[0])
    with (
        SimulatorServer(a, api_key=KEY_A) as server_a,
        SimulatorServer(b, api_key=KEY_B) as server_b,
    ):
        config = write_config(
            tmp_path,
            rpc_url="unused",
            channels={"hooks": ["json://127.0.0.1:9/"]},
            rules=base_rules(),
            extra={
                "state_path": str(tmp_path / "state" / "watcher.db"),
                "rpc": {"timeout": "2s", "max_attempts": 1},
                "health": {"disagreement_for": "2m"},
            },
        )
        with_endpoints(config, [server_a.url, server_b.url], quorum=2)
        settings, rules = load_config(config)
        daemon = Daemon(settings, RuleSet(rules), clock=lambda: now[0])
        try:
            yield (world := World(a, b, (server_a, server_b), daemon, now))
        finally:
            await world.daemon.close()
            await world.daemon.store.close()


async def test_one_endpoint_alone_cannot_fire_nor_resolve_a_delinquency(world: World) -> None:
    await world.poll()  # both agree: current, quiet
    world.a.mark_delinquent(OUR_VOTE)  # only endpoint A sees it
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            await world.poll()
    assert await world.titles() == []
    disagreements = [e for e in logs if e["event"].startswith("rpc endpoints disagree")]
    assert len(disagreements) == 1  # once per stretch

    world.b.mark_delinquent(OUR_VOTE)  # now both do
    await world.poll()
    [fired] = await world.titles()
    assert "delinquent" in fired and "my-validator" in fired

    world.a.mark_current(OUR_VOTE)  # one endpoint says it recovered: not enough
    for _ in range(2):
        await world.poll()
    assert await world.titles() == [fired]
    world.b.mark_current(OUR_VOTE)
    await world.poll()
    titles = await world.titles()
    assert len(titles) == 2 and "is voting again (current)" in titles[1]


def disagreements(daemon: Daemon, source: str = "votes") -> float:
    text = daemon.metrics.exposition().decode()
    found = re.search(rf'^watcher_rpc_disagreements_total{{source="{source}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


async def test_a_disagreement_is_answered_not_failed_and_alerts_past_its_threshold(
    world: World,
) -> None:
    """Endpoints that answer but disagree: the round succeeds (no failed poll, /healthz healthy,
    no rpc_unhealthy), each disagreement is counted, and rpc_disagreement fires once it lasted
    health.disagreement_for (2m here), naming both endpoints without their keys and what they
    disagree on; it resolves when they agree again."""
    await world.sweep()  # both agree: current, quiet
    world.a.mark_delinquent(OUR_VOTE)  # only endpoint A sees it
    for seconds in (60.0, 60.0, 59.0):  # the first disagreement, then 1m and 1m 59s after it
        line = await world.sweep(seconds=seconds)
        assert (line["targets"], line["failed"], line.get("disagreed")) == (1, 0, 1)
        await world.daemon.metrics.refresh()  # what /healthz reads first
        assert world.daemon.healthz().healthy, world.daemon.healthz().reason
        assert await world.titles() == []  # not evidence, and the disagreement is young
    assert disagreements(world.daemon) == 3
    assert world.daemon.health.failed_rounds == 0

    await world.sweep(seconds=2.0)  # 2m 1s of disagreement
    [fired] = await world.titles()
    assert fired == "[CRITICAL] rpc_disagreement: the RPC endpoints disagree on votes cluster"
    [body] = await world.bodies()
    endpoints = [
        server.url.replace(key, "***")
        for server, key in zip(world.servers, (KEY_A, KEY_B), strict=True)
    ]
    assert f"Endpoints: {endpoints[0]}, {endpoints[1]}" in body
    assert "Source: votes, target: cluster" in body
    assert (
        f"Differences: my-validator {OUR_VOTE}: {endpoints[0]} says firing (would notify firing); "
        f"{endpoints[1]} says inactive"
    ) in body
    assert KEY_A not in body and KEY_B not in body
    assert disagreements(world.daemon) == 4

    world.b.mark_delinquent(OUR_VOTE)  # now both do: evidence, and the disagreement is over
    line = await world.sweep()
    assert (line["failed"], line["disagreed"]) == (0, 0)
    titles = await world.titles()
    assert len(titles) == 3 and "rpc_unhealthy" not in " ".join(titles)
    assert "[RESOLVED] rpc_disagreement: the RPC endpoints agree again on votes cluster" in titles
    assert any("my-validator" in title and "delinquent" in title for title in titles)
    assert disagreements(world.daemon) == 4


async def test_a_firing_disagreement_survives_a_restart_and_resolves_once(world: World) -> None:
    await world.sweep()
    world.a.mark_delinquent(OUR_VOTE)
    for _ in range(4):
        await world.sweep()  # 3 minutes of disagreement: fired
    assert [t.split(":")[0] for t in await world.titles()] == ["[CRITICAL] rpc_disagreement"]

    old = world.daemon
    await old.close()
    await old.store.close()
    world.daemon = Daemon(old.settings, old.ruleset, clock=old.clock)  # a restart
    await world.sweep()  # still disagreeing: not announced again
    assert len(await world.titles()) == 1
    world.b.mark_delinquent(OUR_VOTE)
    await world.sweep()
    await world.sweep()
    resolved = [t for t in await world.titles() if t.startswith("[RESOLVED] rpc_disagreement")]
    assert len(resolved) == 1 and len(await world.titles()) == 3  # + my-validator delinquent


async def test_a_short_disagreement_says_nothing(world: World) -> None:
    await world.sweep()
    world.a.mark_delinquent(OUR_VOTE)
    await world.sweep()  # they disagree ...
    world.b.mark_delinquent(OUR_VOTE)
    await world.sweep()  # ... and agree before health.disagreement_for: only the delinquency
    [fired] = await world.titles()
    assert "my-validator" in fired and "delinquent" in fired


async def test_drift_needs_both_endpoints_too(world: World) -> None:
    await world.poll("nodes")
    world.a.set_node(OUR_NODE, version="2.3.4")
    await world.poll("nodes")
    assert await world.titles() == []
    world.b.set_node(OUR_NODE, version="2.3.4")
    await world.poll("nodes")
    [fired] = await world.titles()
    assert fired.startswith("[WARNING] drift:"), fired


async def test_with_one_endpoint_down_a_state_poll_is_a_failed_poll(world: World) -> None:
    await world.poll()
    world.a.mark_delinquent(OUR_VOTE)
    world.b.mark_delinquent(OUR_VOTE)
    world.b.faults.inject("http_503_html", count=5)  # only one endpoint answers
    before = await world.daemon.store.load_state("votes", "cluster")
    await world.poll()
    assert await world.titles() == []
    assert await world.daemon.store.load_state("votes", "cluster") == before
    assert world.daemon.health.failed_rounds == 0  # counted when the round is done
    verdict = world.daemon.health.round_done("votes", world.now[0])
    assert verdict is not None and verdict.last_error is not None


async def test_event_kinds_are_not_put_to_a_vote(world: World) -> None:
    """A new transaction seen by the endpoint asked is notified: failover covers event kinds."""
    await world.daemon.pipeline.poll(SOURCES["signatures"], TREASURY)  # the quiet baseline
    world.a.add_transactions(TREASURY, 2)  # only A (the first endpoint) has them
    world.now[0] += 1
    await world.daemon.pipeline.poll(SOURCES["signatures"], TREASURY)
    assert len(await world.titles()) == 1


def test_agreement_is_about_transitions_not_facts() -> None:
    firing = {"status": "firing", "number": 1, "details": {"last_vote": 10}}
    other_facts = {"status": "firing", "number": 1, "details": {"last_vote": 12}}
    pending = {"status": "pending", "number": 0, "details": {}}
    assert agree(
        [
            step_outcome("k1", episodes={"r": {"s": firing}}),
            step_outcome("k1", episodes={"r": {"s": other_facts}}),
        ]
    )
    assert not agree([step_outcome("k1"), step_outcome()])
    assert not agree(
        [step_outcome(episodes={"r": {"s": pending}}), step_outcome(episodes={"r": {}})]
    )


def test_the_differences_name_a_few_subjects_and_count_the_rest() -> None:
    firing = {"status": "firing", "number": 1}
    mine = step_outcome(episodes={"r": {f"s{i}": firing for i in range(5)}})
    theirs = step_outcome(episodes={"r": {"s0": firing}})
    said = differences(["https://a/v3/***", "https://b/v3/***"], [mine, theirs])
    assert said == (
        "r s1: https://a/v3/*** says firing; https://b/v3/*** says inactive | "
        "r s2: https://a/v3/*** says firing; https://b/v3/*** says inactive | "
        "r s3: https://a/v3/*** says firing; https://b/v3/*** says inactive | and 1 more"
    )
