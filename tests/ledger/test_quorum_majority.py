"""quorum: 2 with three endpoints: a majority of three. Two asked; when they disagree, a third;
two that agree decide, and the one outvoted is named by rpc_disagreement. Pure tables of
``majority`` and ``Quorum.compare``, then the daemon's own poll (``TargetPipeline.poll``)
against three real simulators on loopback (state in a real SQLite file)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml

from watcher.alerting.builtin import DISAGREEMENT_TARGET
from watcher.alerting.builtin import SOURCE as BUILTIN
from watcher.alerting.messages import disagreement_text
from watcher.app import Daemon
from watcher.checks import load_config
from watcher.core.events import StepOutcome
from watcher.kinds import SOURCES
from watcher.kinds.ruleset import RuleSet
from watcher.ledger.quorum import Quorum, majority
from watcher.simulator import Ledger, SimulatorServer
from watcher.testing.daemon import write_config

from support.seeded import OUR_VOTE, START, base_rules, small_cluster
from support.values import step_outcome

FIRING = {"status": "firing", "number": 1}


QUIET = step_outcome()
FIRES = step_outcome("k1", episodes={"r": {"s": FIRING}})
FIRES_WITH_OTHER_FACTS = step_outcome("k1", episodes={"r": {"s": {**FIRING, "details": {"x": 2}}}})
OTHER = step_outcome("k2")


@pytest.mark.parametrize(
    ("outcomes", "needed", "expected"),
    [
        ([QUIET, QUIET], 2, (0, 1)),
        ([QUIET, FIRES], 2, None),  # two endpoints that disagree: nothing decided
        ([FIRES, QUIET, QUIET], 2, (1, 2)),  # the first asked outvoted
        ([QUIET, FIRES, QUIET], 2, (0, 2)),
        ([FIRES, QUIET, FIRES_WITH_OTHER_FACTS], 2, (0, 2)),  # facts may differ
        ([QUIET, FIRES, OTHER], 2, None),  # three different: no majority
        ([QUIET, FIRES, QUIET, FIRES], 3, None),
        ([QUIET, FIRES, QUIET, QUIET], 3, (0, 2, 3)),
        ([], 2, None),
    ],
)
def test_majority(
    outcomes: list[StepOutcome], needed: int, expected: tuple[int, ...] | None
) -> None:
    assert majority(outcomes, needed) == expected


A, B, C = "https://a/v3/***", "https://b/v3/***", "https://c/v3/***"


@pytest.mark.parametrize(
    ("endpoints", "outcomes", "outvoted"),
    [
        ([A, B], [QUIET, QUIET], None),  # agreement: nothing to say
        ([A, B], [FIRES, QUIET], ()),  # no majority: a disagreement naming no one outvoted
        ([A, B, C], [FIRES, QUIET, QUIET], (A,)),
        ([A, B, C], [QUIET, FIRES, QUIET], (B,)),
        ([A, B, C], [QUIET, FIRES, OTHER], ()),
    ],
)
def test_compare_names_the_endpoints_outvoted(
    endpoints: list[str], outcomes: list[StepOutcome], outvoted: tuple[str, ...] | None
) -> None:
    found = Quorum(2).compare("votes", "cluster", endpoints, outcomes)
    assert (None if found is None else found.outvoted) == outvoted


def test_the_disagreement_alert_names_the_endpoint_outvoted() -> None:
    facts = {
        "rule": "rpc_disagreement",
        "severity": "critical",
        "reason": "firing",
        "built_in": True,
        "source": "votes",
        "target": "cluster",
        "endpoints": [A, B, C],
        "outvoted": [A],
        "differences": "d",
        "disagreement_for": "2m",
        "since": "t",
    }
    title, body = disagreement_text(facts)
    assert title.endswith(f"the RPC endpoints disagree on votes cluster: {A} outvoted")
    assert f"Outvoted: {A}" in body and "the majority decides votes cluster" in body
    title, body = disagreement_text({**facts, "outvoted": []})
    assert title.endswith("disagree on votes cluster") and "Outvoted" not in body


# -- the daemon, three endpoints --------------------------------------------------------------

KEYS = ("m4jorityAK3yTh4tMustN3v3rL3ak", "m4jorityBK3yTh4tMustN3v3rL3ak", "m4jorityCK3yTh4tMust")


@dataclass
class Three:
    ledgers: tuple[Ledger, Ledger, Ledger]
    urls: tuple[str, str, str]  # masked, in the order the endpoints are configured
    daemon: Daemon
    now: list[float]

    async def poll(self) -> None:
        self.now[0] += 1.0
        await self.daemon.pipeline.poll(SOURCES["votes"], "cluster")

    async def titles(self) -> list[str]:
        history = await self.daemon.store.history(limit=1000)
        return [record.alert.title for record in reversed(history)]

    async def disagreement(self) -> dict[str, Any]:
        state = await self.daemon.store.load_state(BUILTIN, DISAGREEMENT_TARGET)
        episode: dict[str, Any] = (state or {})["episodes"]["rpc_disagreement"]["votes:cluster"]
        return episode


@pytest.fixture
async def three(tmp_path: Path) -> AsyncIterator[Three]:
    now = [START]
    ledgers = (
        small_cluster(lambda: now[0]),
        small_cluster(lambda: now[0]),
        small_cluster(lambda: now[0]),
    )
    with (
        SimulatorServer(ledgers[0], api_key=KEYS[0]) as a,
        SimulatorServer(ledgers[1], api_key=KEYS[1]) as b,
        SimulatorServer(ledgers[2], api_key=KEYS[2]) as c,
    ):
        config = write_config(
            tmp_path,
            rpc_url="unused",
            channels={"hooks": ["json://127.0.0.1:9/"]},
            rules=[rule for rule in base_rules() if rule["kind"] == "delinquent_validators"],
            extra={
                "state_path": str(tmp_path / "state" / "watcher.db"),
                "rpc": {"timeout": "2s", "max_attempts": 1},
                "health": {"disagreement_for": "1s"},
            },
        )
        data = yaml.safe_load(config.read_text())
        del data["rpc_url"]
        data.update(rpc_urls=[a.url, b.url, c.url], quorum=2)
        config.write_text(yaml.safe_dump(data))
        settings, rules = load_config(config)
        daemon = Daemon(settings, RuleSet(rules), clock=lambda: now[0])
        urls = (
            a.url.replace(KEYS[0], "***"),
            b.url.replace(KEYS[1], "***"),
            c.url.replace(KEYS[2], "***"),
        )
        try:
            yield Three(ledgers, urls, daemon, now)
        finally:
            await daemon.close()
            await daemon.store.close()


async def test_a_liar_is_outvoted_and_named(three: Three) -> None:
    liar = three.ledgers[0]  # the first endpoint: asked on every poll
    await three.poll()  # all agree: quiet
    liar.mark_delinquent(OUR_VOTE)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            await three.poll()
    titles = await three.titles()
    assert not any("my-validator" in title for title in titles), titles  # no false alert
    [named] = [title for title in titles if "rpc_disagreement" in title]
    assert named.endswith(f"disagree on votes cluster: {three.urls[0]} outvoted")
    assert [e["event"] for e in logs if e["event"].startswith("rpc endpoints")] == [
        "rpc endpoints disagree; the majority decides"
    ]

    # The majority moves: the two honest endpoints see it delinquent too; the liar recovers.
    liar.mark_current(OUR_VOTE)
    for ledger in three.ledgers[1:]:
        ledger.mark_delinquent(OUR_VOTE)
    await three.poll()
    titles = await three.titles()
    assert any("my-validator" in title and "delinquent" in title for title in titles), titles

    for ledger in three.ledgers:
        ledger.mark_current(OUR_VOTE)
    await three.poll()
    titles = await three.titles()
    assert "[RESOLVED] my-validator:" in titles[-2] or "[RESOLVED] my-validator:" in titles[-1]
    assert any(t.startswith("[RESOLVED] rpc_disagreement:") for t in titles), titles


async def test_with_the_third_down_two_that_disagree_decide_nothing(three: Three) -> None:
    await three.poll()
    three.ledgers[2].faults.inject("http_503_html", count=1_000)
    three.ledgers[0].mark_delinquent(OUR_VOTE)
    for _ in range(2):
        await three.poll()
    titles = await three.titles()
    assert not any("my-validator" in title for title in titles), titles
    assert (await three.disagreement())["details"]["outvoted"] == []
