"""End to end: the ``alertmanager://`` channel with the real daemon, the simulator and a REAL
Alertmanager (Debian's ``prometheus-alertmanager``) whose webhook receiver is a local listener.

A watched validator goes delinquent: Alertmanager's webhook gets the alert firing, with the
rule's labels; Alertmanager restarts with empty storage: the watcher's re-posts give it the
alert back within 90 s; the validator recovers: the webhook gets it resolved, same labels."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from watcher.testing.alertmanager import Alertmanager
from watcher.testing.receivers import JsonReceiver, wait_until

from support.world import OUR_VOTE, World, make_world, small_cluster

# Never skipped: `make test` installs Alertmanager (deploy/ensure-monitoring), and a machine
# without it fails here, naming what is missing.
pytestmark = pytest.mark.e2e

PASSWORD = "hunter2-s3cret-pw"
LABELS = {
    "alertname": "my-validator",
    "kind": "delinquent_validators",
    "severity": "critical",
    "subject": OUR_VOTE,
    "type": "state",
}


def rule() -> dict[str, Any]:
    return {
        "name": "my-validator",
        "kind": "delinquent_validators",
        "validators": [OUR_VOTE],
        "every": "200ms",
        "notify": ["am"],
        "severity": "critical",
        "runbook": "https://runbooks.example.com/delinquent",
    }


@contextmanager
def world_with(tmp_path: Path, am: Alertmanager) -> Iterator[World]:
    # Credentials Alertmanager ignores (it asks for none), that must never be shown.
    url = am.url.replace("://", f"://watcher:{PASSWORD}@")
    yield from make_world(tmp_path, small_cluster(), rules=[rule()], channels={"am": [url]})


def webhook_alerts(hook: JsonReceiver, status: str) -> list[dict[str, Any]]:
    """The alerts Alertmanager's webhook notifications carried with ``status``."""
    return [
        alert
        for note in hook.received
        for alert in note.get("alerts", [])
        if alert.get("status") == status
    ]


def held(am: Alertmanager) -> list[dict[str, Any]]:
    return [a for a in am.alerts() if a["labels"] == LABELS and a["status"]["state"] == "active"]


@pytest.mark.timeout(240)
def test_firing_restart_and_resolution_reach_alertmanager(tmp_path: Path) -> None:
    with (
        JsonReceiver() as hook,
        Alertmanager(f"http://127.0.0.1:{hook.port}/") as am,
        world_with(tmp_path, am) as world,
    ):
        world.daemon.start()
        world.wait_polls("getVoteAccounts", 2)
        world.ledger.mark_delinquent(OUR_VOTE)

        def failed() -> str:
            return f"\n{world.daemon.output()[-3000:]}\n{am.output()[-2000:]}"

        [firing, *_] = wait_until(
            lambda: webhook_alerts(hook, "firing"), 30, "the firing alert" + failed()
        )
        assert firing["labels"] == LABELS
        assert firing["annotations"]["runbook_url"] == "https://runbooks.example.com/delinquent"
        assert "my-validator" in firing["annotations"]["summary"]
        assert firing["annotations"]["description"]

        # An Alertmanager that restarted has forgotten it; the re-posts bring it back.
        am.restart(empty=True)
        assert held(am) == []
        [back] = wait_until(lambda: held(am), 90, "the alert posted again" + failed())
        assert back["startsAt"][:19] == firing["startsAt"][:19]

        world.ledger.mark_current(OUR_VOTE)
        [resolved, *_] = wait_until(
            lambda: webhook_alerts(hook, "resolved"), 30, "the resolution" + failed()
        )
        assert resolved["labels"] == LABELS
        assert world.daemon.stop() == 0
        assert PASSWORD not in world.daemon.output()
        assert PASSWORD.encode() not in (tmp_path / "state" / "watcher.db").read_bytes()
