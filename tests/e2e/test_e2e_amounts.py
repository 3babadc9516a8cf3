"""End to end, what moved: `watcher run` watching a treasury on the simulator with
``min_change_sol`` and ``tokens: true``. An outflow of 1,000 SOL and an inflow of 25,000 USDC are
notified with their amounts; 50 dust transfers are not notified, and `watcher alerts` shows them
below the threshold; /metrics counts them and the balance reads. A transfer landing between a
signature page and the balance read is counted once; one landing while the watch's first read
(its baseline) is under way is notified, dust or not, saying its amount is in that baseline; and
a kill -9 while the balance read is under way (held by the simulator, so the kill lands there
every time) loses and doubles nothing: the changes recorded add up to the ledger's."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from watcher.simulator import Ledger
from watcher.simulator.authorities import set_mint
from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey
from watcher.simulator.transfers import dust, transfer
from watcher.testing.net import free_port
from watcher.testing.receivers import wait_until

from support.world import World, make_world

pytestmark = pytest.mark.e2e

TREASURY = derived_pubkey("e2e amounts treasury")
PAYER = derived_pubkey("e2e amounts payer")
PAYEE = derived_pubkey("e2e amounts payee")
USDC = derived_pubkey("e2e amounts usdc")
SOL = 10**9
START = 1_200_500_000_000  # 1,200.5 SOL
WATCHER = [sys.executable, "-m", "watcher"]


def treasury_rule(**fields: Any) -> dict[str, Any]:
    return {
        "name": "treasury-moves",
        "kind": "new_transactions",
        "addresses": [TREASURY],
        "every": "200ms",
        "min_change_sol": "0.01",
        "group_wait": "0s",  # one address: nothing to group, the test waits on each send
        "notify": ["hooks"],
        **fields,
    }


def funded_ledger(seed: int) -> Ledger:
    ledger = Ledger(seed=seed)
    ledger.accounts.set_account(TREASURY, lamports=START)
    ledger.accounts.set_account(PAYER, lamports=10 * SOL)
    set_mint(ledger, USDC)  # 6 decimals
    das_of(ledger).set_token_account(
        derived_pubkey("e2e amounts payer usdc"), mint=USDC, owner=PAYER, amount=100_000 * 10**6
    )
    return ledger


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def world(tmp_path: Path, port: int) -> Iterator[World]:
    yield from make_world(
        tmp_path,
        funded_ledger(41),
        rules=[treasury_rule(tokens=True)],
        http={"listen": f"127.0.0.1:{port}"},
    )


@pytest.fixture
def sol_world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, funded_ledger(43), rules=[treasury_rule()])


def history(config: Path) -> list[dict[str, Any]]:
    """`watcher alerts --json`, oldest first."""
    shown = subprocess.run(
        [*WATCHER, "alerts", "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode != 0:  # the daemon has not created the database yet
        return []
    return [json.loads(line) for line in shown.stdout.splitlines()][::-1]


def alerts_lines(config: Path) -> list[str]:
    shown = subprocess.run(
        [*WATCHER, "alerts", "--config", str(config)], capture_output=True, text=True, check=True
    )
    return shown.stdout.splitlines()


def metric(port: int, line_start: str) -> float | None:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    except httpx.HTTPError:
        return None
    for line in text.splitlines():
        if line.startswith(line_start):
            return float(line.split()[-1])
    return None


def sol_change(record: dict[str, Any]) -> int:
    balances = record["facts"].get("balances") or {}
    return sum(int(a["change"] or 0) for a in balances.get("assets") or () if a["asset"] == "SOL")


def test_amounts_are_notified_and_dust_is_kept_below_the_threshold(world: World, port: int) -> None:
    world.daemon.start()
    # The baseline, then the tokens' baseline (the next poll, once the rule is known): its
    # token accounts, then its SOL balance. The transfer waits for the poll after it: landing
    # between that poll's two reads, it would be in the baseline, never notified as a change.
    wait_until(lambda: world.polls("getTokenAccounts") >= 1, 15, "the tokens' baseline read")
    polled = world.polls("getSignaturesForAddress")
    wait_until(lambda: world.polls("getSignaturesForAddress") > polled, 15, "the poll after it")

    transfer(world.ledger, TREASURY, PAYEE, 1_000 * SOL)
    [outflow] = world.wait_notes(1)
    assert "1 new transaction" in outflow["title"] and "SOL -1,000.000005" in outflow["title"]
    assert "SOL 1,200.5 -> 200.499995 (-1,000.000005) over 1 transaction" in outflow["message"]

    transfer(world.ledger, PAYER, TREASURY, 25_000 * 10**6, USDC)
    inflow = world.wait_notes(2)[1]
    assert inflow["title"].endswith("+25,000")
    assert f"{USDC} 0 -> 25,000 (+25,000)" in inflow["message"]

    dust(world.ledger, TREASURY, 50)
    below = wait_until(
        lambda: [r for r in history(world.config) if "below_threshold" in r["facts"]],
        15,
        "the dust kept below the threshold",
    )
    assert [r["facts"]["count"] for r in below] == [50]
    assert below[0]["status"] == "silenced" and below[0]["deliveries"] == []
    world.wait_polls("getSignaturesForAddress", 3)
    assert len(world.notes()) == 2, world.titles()  # the dust notified nobody
    [line] = [line for line in alerts_lines(world.config) if "50 new transactions" in line]
    assert " below " in line
    assert line.endswith("(below the threshold: every change below min_change_sol 0.01)")

    suppressed = 'watcher_events_suppressed_total{reason="below_threshold",rule="treasury-moves"}'
    assert wait_until(lambda: metric(port, suppressed), 10, suppressed) == 1.0
    reads = metric(port, 'watcher_balance_reads_total{source="signatures"}')
    assert reads is not None and reads >= 5  # baseline, tokens' baseline, three that moved
    assert world.daemon.stop() == 0


def test_a_transfer_in_the_gap_and_a_kill_during_the_read_lose_and_double_nothing(
    sol_world: World,
) -> None:
    world, ledger = sol_world, sol_world.ledger
    world.daemon.start()
    wait_until(lambda: world.polls("getMultipleAccounts") >= 1, 15, "the baseline read")
    faults = ledger.faults

    # The balance read held 1 s (within the daemon's 2 s timeout): a transfer lands then.
    faults.inject("timeout", method="getMultipleAccounts", seconds=1.0)
    transfer(ledger, TREASURY, PAYEE, 10 * SOL)
    wait_until(lambda: faults.pending() == 0, 15, "the balance read under way")
    transfer(ledger, TREASURY, PAYEE, 7 * SOL)  # after the page, before the read
    [first] = world.wait_notes(1)
    assert "1 new transaction" in first["title"]
    assert "(-17.00001) over 1 transaction" in first["message"]  # both, with their fees
    listed = wait_until(
        lambda: [r for r in history(world.config) if r["facts"].get("count") == 1][1:],
        15,
        "the transfer of the gap listed",
    )
    assert listed[0]["facts"]["balances"]["counted_before"] == 1
    assert sol_change(listed[0]) == 0  # counted once, in the first notification

    # kill -9 while the balance read is held; a transfer lands while the daemon is down.
    faults.inject("timeout", method="getMultipleAccounts", seconds=30.0)
    transfer(ledger, TREASURY, PAYEE, 3 * SOL)
    wait_until(lambda: faults.pending() == 0, 15, "the balance read under way")
    world.daemon.kill()
    transfer(ledger, TREASURY, PAYEE, 2 * SOL)
    faults.clear()
    world.daemon.start()
    notes = world.wait_notes(2)
    assert "2 new transactions" in notes[1]["title"]
    assert "(-5.00001) over 2 transactions" in notes[1]["message"]
    world.wait_polls("getSignaturesForAddress", 3)
    assert len(world.notes()) == 2, world.titles()
    assert world.daemon.stop() == 0

    # Every change recorded (notified or kept below) adds up to the ledger's.
    records = history(world.config)
    assert sum(r["facts"]["count"] for r in records) == 4
    account = ledger.accounts.account(TREASURY)
    assert account is not None
    total = sum(sol_change(r) for r in records)
    assert total == account.lamports - START
    assert Decimal(total) / SOL == Decimal("-22.00002")


def test_dust_landing_while_the_baseline_is_read_is_notified_not_kept_below(
    sol_world: World,
) -> None:
    world, ledger = sol_world, sol_world.ledger
    faults = ledger.faults
    # The watch's first balance read (its baseline) held 1 s: dust lands then, after the
    # watch began and after that poll's page: in the baseline, listed by the next poll.
    faults.inject("timeout", method="getMultipleAccounts", seconds=1.0)
    world.daemon.start()
    wait_until(lambda: faults.pending() == 0, 15, "the baseline read under way")
    transfer(ledger, TREASURY, PAYEE, SOL // 1000)  # 0.001 SOL, below min_change_sol 0.01
    [note] = world.wait_notes(1)
    assert "1 new transaction" in note["title"]
    assert (
        "(1 transaction landed while the watch's baseline balances were read: in that"
        " baseline, not in the change above)"
    ) in note["message"]
    [record] = history(world.config)
    assert record["facts"]["balances"]["in_baseline"] == 1
    assert "below_threshold" not in record["facts"]
    assert world.daemon.stop() == 0
