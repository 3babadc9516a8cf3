"""End to end: the real `watcher run` process against the simulator on loopback, delivering to
real local receivers (a json:// HTTP listener, an SMTP server). Sub-second poll intervals; every
wait is on a condition with a deadline."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watcher.testing.daemon import write_config
from watcher.testing.receivers import SmtpReceiver, wait_until

from support.world import (
    API_KEY,
    DRIFT_NODE,
    HOLDERS,
    MINT,
    OUR_NODE,
    OUR_VOTE,
    TREASURY,
    World,
    all_polled,
    make_world,
    rules,
    small_cluster,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, small_cluster())


@pytest.fixture
def patient_world(tmp_path: Path) -> Iterator[World]:
    # Eighteen faulted attempts land on whichever calls come next: on a loaded machine three
    # rounds of one source can fail in a row, and the built-in rpc_unhealthy then fires, as it
    # should. The tests using this world are about the rules' evidence, not that alert.
    yield from make_world(tmp_path, small_cluster(), health={"unhealthy_after": 50})


def test_every_event_exactly_once_through_rpc_faults_channel_faults_and_restarts(
    world: World,
) -> None:
    """The issue's bar: a scripted ledger, faults on the RPC and on the channel, clean restarts;
    every transaction is announced exactly once and nothing else is."""
    world.daemon.start()
    all_polled(world)
    added: list[str] = []
    faults = ("http_503_html", "garbage", "rpc_error", "http_429")
    for round_no in range(4):
        world.ledger.faults.inject(faults[round_no], method="getSignaturesForAddress", count=4)
        world.receiver.refuse(1)
        added += world.ledger.add_transactions(TREASURY, 3 + round_no)
        world.wait_notes(len(world.notes()) + 1, timeout=20)
        assert world.daemon.stop() == 0
        added += world.ledger.add_transactions(TREASURY, 2)  # while stopped
        if round_no == 1:
            world.ledger.mark_delinquent(OUR_VOTE)
        if round_no == 2:
            world.ledger.mark_current(OUR_VOTE)
        expected = len(world.notes()) + (2 if round_no in (1, 2) else 1)
        world.daemon.start()
        world.wait_notes(expected, timeout=20)
    all_polled(world)
    assert world.daemon.stop() == 0

    tx_notes = [n for n in world.notes() if "treasury" in n["title"]]
    announced = [sig for n in tx_notes for sig in added if sig in n["message"]]
    assert sorted(announced) == sorted(added), [n["title"] for n in tx_notes]
    validator_notes = [n["title"] for n in world.notes() if "my-validator" in n["title"]]
    assert len(validator_notes) == 2, validator_notes  # one firing, one resolved
    assert len(world.notes()) == len(tx_notes) + 2


def test_baseline_is_silent_then_every_kind_fires_and_resolves_once(world: World) -> None:
    world.daemon.start()
    all_polled(world)
    assert world.notes() == [], "history that predates the daemon must stay quiet"

    [sig] = world.ledger.add_transactions(TREASURY, 1)
    note = world.wait_notes(1)[-1]
    assert "treasury" in note["title"] and "WARNING" in note["title"]
    assert sig in note["message"] and TREASURY in note["message"]

    grower = HOLDERS[3]
    old = world.ledger.holder_amount(MINT, grower)
    world.ledger.set_holder_amount(MINT, grower, old * 3 // 2)
    note = world.wait_notes(2)[-1]
    assert "whales" in note["title"] and grower in note["message"]
    assert "+50" in note["message"]

    world.ledger.mark_delinquent(OUR_VOTE)
    note = world.wait_notes(3)[-1]
    assert "my-validator" in note["title"] and "CRITICAL" in note["title"]
    assert OUR_VOTE in note["message"] and OUR_NODE in note["message"]

    world.ledger.mark_current(OUR_VOTE)
    note = world.wait_notes(4)[-1]
    assert "my-validator" in note["title"]
    assert "resolved" in (note["title"] + note["message"]).lower()

    world.ledger.set_node(DRIFT_NODE, version="2.3.5")
    note = world.wait_notes(5)[-1]
    assert "drift" in note["title"]
    assert "2.3.5" in note["message"] and "2.3.6" in note["message"]
    assert DRIFT_NODE in note["message"]

    world.ledger.set_node(DRIFT_NODE, version="2.3.6")
    note = world.wait_notes(6)[-1]
    assert "drift" in note["title"] and "resolved" in (note["title"] + note["message"]).lower()

    all_polled(world)
    assert len(world.notes()) == 6, world.titles()
    assert world.daemon.stop() == 0

    history = subprocess.run(
        [sys.executable, "-m", "watcher", "alerts", "--config", str(world.config), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    records = [json.loads(line) for line in history.stdout.splitlines()]
    assert [r["rule"] for r in records] == [
        "drift",
        "drift",
        "my-validator",
        "my-validator",
        "whales",
        "treasury",
    ]
    assert {r["status"] for r in records} == {"sent"}


def test_restart_sends_nothing_twice_and_catches_up_on_activity_while_stopped(
    world: World,
) -> None:
    world.daemon.start()
    all_polled(world)
    world.ledger.mark_delinquent(OUR_VOTE)
    world.wait_notes(1)
    assert world.daemon.stop() == 0

    new_sigs = world.ledger.add_transactions(TREASURY, 3)  # while the daemon is down
    world.daemon.start()
    note = world.wait_notes(2)[-1]
    assert "treasury" in note["title"] and all(sig in note["message"] for sig in new_sigs)
    assert "3" in note["title"]
    all_polled(world)
    assert len(world.notes()) == 2, f"a firing alert was re-announced: {world.titles()}"

    world.ledger.mark_current(OUR_VOTE)
    world.wait_notes(3)
    assert world.daemon.stop() == 0
    world.daemon.start()
    all_polled(world)
    assert world.daemon.stop() == 0
    assert len(world.notes()) == 3, world.titles()


def test_a_burst_of_1500_with_a_failed_page_is_one_notification(world: World) -> None:
    world.daemon.start()
    all_polled(world)
    # The second page fails on every attempt of one round; the next round reads both pages.
    world.ledger.faults.inject("garbage", method="getSignaturesForAddress", skip=1, count=3)
    burst = world.ledger.add_transactions(TREASURY, 1500)
    [note] = world.wait_notes(1)
    assert "1500" in note["title"]
    assert burst[0] in note["message"] and "and 1490 more" in note["message"]
    assert world.ledger.faults.pending() == 0
    world.wait_polls("getSignaturesForAddress", 3)
    assert len(world.notes()) == 1, world.titles()
    assert world.daemon.stop() == 0


def test_a_node_ignoring_until_cannot_make_old_signatures_look_new(world: World) -> None:
    world.ledger.faults.ignore_until = True
    world.daemon.start()
    all_polled(world)
    assert world.notes() == []
    new = world.ledger.add_transactions(TREASURY, 2)
    [note] = world.wait_notes(1)
    assert all(sig in note["message"] for sig in new) and "2" in note["title"]
    world.wait_polls("getSignaturesForAddress", 5)
    assert len(world.notes()) == 1, world.titles()
    assert world.daemon.stop() == 0


def test_a_refused_delivery_is_retried_and_arrives_exactly_once(world: World) -> None:
    world.receiver.refuse(2)
    world.daemon.start()
    all_polled(world)
    [sig] = world.ledger.add_transactions(TREASURY, 1)
    [note] = world.wait_notes(1)
    assert sig in note["message"]
    assert len(world.receiver.refused) == 2
    world.wait_polls("getSignaturesForAddress", 5)
    assert len(world.notes()) == 1
    assert world.daemon.stop() == 0


def test_rpc_faults_are_survived_never_evidence_and_the_key_never_shows(
    patient_world: World, sqlite_file_bytes: Any
) -> None:
    world = patient_world
    world.daemon.start()
    all_polled(world)
    # Whole rounds fail (3 attempts each): none of it may fire or resolve anything.
    for kind in ("http_429", "http_503_html", "garbage", "rpc_error", "wrong_shape", "rpc_429"):
        options: dict[str, Any] = {"retry_after": 0} if kind == "http_429" else {}
        world.ledger.faults.inject(kind, count=3, **options)
    world.ledger.faults.inject("timeout", method="getVoteAccounts", count=3, seconds=3)
    wait_until(lambda: world.ledger.faults.pending() == 0, 30, "faults consumed")
    all_polled(world)
    world.daemon.assert_alive()
    assert world.notes() == [], world.titles()

    world.ledger.mark_delinquent(OUR_VOTE)
    [note] = world.wait_notes(1)
    assert "my-validator" in note["title"]
    assert world.daemon.stop() == 0

    output = world.daemon.output()
    assert "round failed" in output  # the failures were seen and logged (once a round)...
    assert API_KEY not in output  # ...without the key
    assert API_KEY not in json.dumps(world.notes())
    database = world.config.parent / "state" / "watcher.db"
    assert API_KEY.encode() not in sqlite_file_bytes(database, open_db=False)


def test_email_goes_to_a_real_smtp_server(tmp_path: Path) -> None:
    with SmtpReceiver() as smtp:
        for world in make_world(
            tmp_path, small_cluster(), channels={"hooks": [smtp.url(to="ops@example.com")]}
        ):
            world.daemon.start()
            all_polled(world)
            [sig] = world.ledger.add_transactions(TREASURY, 1)
            [message] = smtp.wait_for(1, timeout=15)
            assert "treasury" in message["Subject"]
            # HTML made from Markdown: the signature shortened in a link carrying it in full.
            html = message.get_body(("html",))
            assert html is not None
            link = f'<a href="https://explorer.solana.com/tx/{sig}">{sig[:8]}…{sig[-8:]}</a>'
            assert link in html.get_content()
            assert message["To"] == "ops@example.com"
            assert world.daemon.stop() == 0


def test_run_refuses_to_start_on_a_bad_rule_file(tmp_path: Path) -> None:
    bad = [{**rules()[0], "adresses": [TREASURY]}]
    del bad[0]["addresses"]
    path = write_config(
        tmp_path, rpc_url="http://127.0.0.1:9/v3/x", channels={"hooks": ["console://"]}, rules=bad
    )
    result = subprocess.run(
        [sys.executable, "-m", "watcher", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert "rules/rules.yaml:" in result.stderr and "adresses" in result.stderr
