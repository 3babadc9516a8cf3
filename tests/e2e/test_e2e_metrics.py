"""End to end, the values the rules observe on ``/metrics``: the real daemon polling the simulator,
scraped over HTTP. A validator marked delinquent reads 1 within two poll intervals and 0 once it
recovers; balances, supply and top holders show in SOL and UI units; a failed poll leaves the last
values; a reload that drops a target drops its series; promtool finds nothing to say."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.testing.net import free_port, get
from watcher.testing.receivers import wait_until

from support.world import (
    HOLDERS,
    MINT,
    OUR_NODE,
    OUR_VOTE,
    TREASURY,
    World,
    make_world,
    small_cluster,
)

pytestmark = pytest.mark.e2e

POLL_SECONDS = 1.0
OUR_SERIES = f'{{nodekey="{OUR_NODE}",votekey="{OUR_VOTE}"}}'
BALANCE = f'solana_account_balance{{address="{TREASURY}"}}'


def watched(every: float = POLL_SECONDS, *, balance: bool = True) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = [
        {
            "name": "my-validator",
            "kind": "delinquent_validators",
            "validators": [OUR_VOTE],
            "every": f"{every}s",
            "notify": ["hooks"],
        },
        {"name": "supply", "kind": "supply_changed", "mints": [MINT], "every": f"{every}s"},
        {"name": "whales", "kind": "holder_changes", "mints": [MINT], "every": f"{every}s"},
    ]
    if balance:
        rules.append(
            {
                "name": "treasury-low",
                "kind": "balance_below",
                "accounts": [TREASURY],
                "min_sol": 1,
                "every": f"{every}s",
                "notify": ["hooks"],
            }
        )
    for rule in rules:
        rule.setdefault("notify", ["hooks"])
    return rules


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    ledger = small_cluster()
    ledger.accounts.set_account(TREASURY, lamports=12_500_000_000)
    http = {"listen": f"127.0.0.1:{free_port()}"}
    yield from make_world(tmp_path, ledger, rules=watched(), http=http)


def scrape(world: World) -> str:
    listen = yaml.safe_load(world.config.read_text())["http"]["listen"]
    status, text = get(f"http://{listen}/metrics")
    return text if status == 200 else ""


def value(text: str, series: str) -> float | None:
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def wait_value(world: World, series: str, expected: float | None, timeout: float = 15.0) -> float:
    """Seconds until ``series`` reads ``expected`` (None: until it is gone)."""
    start = time.monotonic()
    wait_until(
        lambda: value(scrape(world), series) == expected,
        timeout,
        f"{series} == {expected}\n" + world.daemon.output()[-2000:],
    )
    return time.monotonic() - start


def test_a_delinquent_validator_reads_1_within_two_polls_and_0_once_it_recovers(
    world: World,
) -> None:
    world.daemon.start()
    wait_value(world, f"solana_validator_delinquent{OUR_SERIES}", 0.0)
    world.ledger.mark_delinquent(OUR_VOTE)
    # Two poll intervals, and a scrape's worth of slack on a busy machine.
    wait_value(world, f"solana_validator_delinquent{OUR_SERIES}", 1.0, 2 * POLL_SECONDS + 1)
    world.ledger.mark_current(OUR_VOTE)
    wait_value(world, f"solana_validator_delinquent{OUR_SERIES}", 0.0, 2 * POLL_SECONDS + 1)

    text = scrape(world)
    assert value(text, f"solana_validator_active_stake{OUR_SERIES}") == 50_000.0  # SOL
    assert value(text, 'solana_cluster_validator_count{state="current"}') == 3.0
    assert value(text, BALANCE) == 12.5
    assert value(text, f'solana_token_supply{{mint="{MINT}"}}') == 1810.0
    top = f'solana_token_largest_account_balance{{account="{HOLDERS[0]}",mint="{MINT}"}}'
    assert value(text, top) == 100.0
    assert value(text, "watcher_build_info" + _build_labels(text)) == 1.0
    assert value(text, "process_open_fds") is not None
    # A state alert fired (and resolved): while it fired, it had its series.
    assert world.wait_notes(2)
    assert world.daemon.stop() == 0


def _build_labels(text: str) -> str:
    found = re.search(r"^watcher_build_info(\{[^}]*\}) ", text, re.MULTILINE)
    assert found, "watcher_build_info is missing"
    return found.group(1)


def test_a_firing_alert_has_its_series_while_it_fires(world: World) -> None:
    world.ledger.mark_delinquent(OUR_VOTE)
    world.daemon.start()
    series = (
        'watcher_alert_firing{kind="delinquent_validators",rule="my-validator",'
        f'severity="warning",silenced="false",subject="{OUR_VOTE}"}}'
    )
    wait_value(world, series, 1.0)
    world.ledger.mark_current(OUR_VOTE)
    wait_value(world, series, None)
    assert world.daemon.stop() == 0


def test_a_failed_poll_leaves_the_last_values(world: World) -> None:
    world.daemon.start()
    wait_value(world, f"solana_validator_delinquent{OUR_SERIES}", 0.0)
    wait_value(world, BALANCE, 12.5)
    world.ledger.faults.inject("http_503_html", count=10_000)
    failures = 'watcher_poll_failures_total{source="votes"}'
    wait_until(lambda: (value(scrape(world), failures) or 0) >= 2, 15, "two failed polls")
    world.ledger.mark_delinquent(OUR_VOTE)  # not seen: every call fails
    world.ledger.accounts.set_account(TREASURY, lamports=1)
    before = (value(scrape(world), failures) or 0) + 2
    wait_until(lambda: (value(scrape(world), failures) or 0) >= before, 15, "two more failures")
    text = scrape(world)
    assert value(text, f"solana_validator_delinquent{OUR_SERIES}") == 0.0
    assert value(text, BALANCE) == 12.5
    world.ledger.faults.clear()
    wait_value(world, f"solana_validator_delinquent{OUR_SERIES}", 1.0)
    assert world.daemon.stop() == 0


def test_a_reload_that_drops_a_target_drops_its_series(world: World) -> None:
    world.daemon.start()
    wait_value(world, BALANCE, 12.5)
    rules_file = world.config.parent / "rules" / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"rules": watched(balance=False)}))
    assert world.daemon.proc is not None
    world.daemon.proc.send_signal(signal.SIGHUP)
    wait_value(world, BALANCE, None)
    text = scrape(world)
    assert value(text, f"solana_validator_delinquent{OUR_SERIES}") == 0.0  # the others stay
    assert value(text, f'solana_token_supply{{mint="{MINT}"}}') == 1810.0
    assert world.daemon.stop() == 0


def test_promtool_finds_nothing_in_metrics(world: World) -> None:
    world.ledger.mark_delinquent(OUR_VOTE)  # a firing alert too
    world.daemon.start()
    wait_value(world, f"solana_validator_delinquent{OUR_SERIES}", 1.0)
    wait_until(lambda: "watcher_alert_firing{" in scrape(world), 15, "a firing alert's series")
    wait_until(lambda: value(scrape(world), BALANCE) is not None, 15, "the balance")
    text = scrape(world)
    checked = subprocess.run(
        ["promtool", "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, "")
    assert world.daemon.stop() == 0
