"""`watcher simulate --ledger FILE` and `watcher simulate tx ...`: a user seeds the simulator from
a rule test's ledger and changes it while it runs, with the rule tests' vocabulary."""

from __future__ import annotations

import io
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from watcher.cli import app
from watcher.core.errors import ConfigError
from watcher.ruletest.control import apply_control, ledger_from_file, send_action
from watcher.simulator import Ledger, SimulatorServer, serve
from watcher.simulator.das import das_of
from watcher.testing.receivers import wait_until

from support.values import key

ADDRESS, VOTE, NODE = key("control address"), key("control vote"), key("control node")
runner = CliRunner()


@pytest.fixture
def served() -> Iterator[tuple[Ledger, int]]:
    ledger = Ledger(seed=3)
    ledger.set_validator(VOTE, NODE, stake=10**15)
    ledger.set_node(NODE, version="2.3.6", feature_set=1)
    with SimulatorServer(ledger, control=lambda body: apply_control(ledger, body)) as server:
        yield ledger, server.port


def simulate(port: int, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["simulate", *args, "--port", str(port)])
    return result.exit_code, result.stdout + result.stderr


def test_each_command_changes_the_running_ledger(served: tuple[Ledger, int]) -> None:
    ledger, port = served
    code, said = simulate(port, "tx", ADDRESS, "--count", "3", "--memo", "rent")
    assert code == 0 and said.startswith("add_transactions") and '"count": 3' in said
    memos = [entry["memo"] for entry in ledger.signatures(ADDRESS)]
    assert memos == ["[4] rent"] * 3  # a node prefixes a memo with its length

    assert simulate(port, "delinquent", VOTE)[0] == 0
    assert [a["votePubkey"] for a in ledger.vote_accounts()["delinquent"]] == [VOTE]
    assert simulate(port, "current", NODE)[0] == 0  # the identity names it too
    assert [a["votePubkey"] for a in ledger.vote_accounts()["current"]] == [VOTE]

    assert simulate(port, "version", NODE, "2.3.5")[0] == 0
    assert ledger.node(NODE)["version"] == "2.3.5"  # type: ignore[index]
    # Any rule-test action, written as YAML.
    code, said = simulate(port, "action", f"{{remove_node: {NODE}}}")
    assert code == 0 and ledger.node(NODE) is None


def test_a_refused_or_malformed_action_is_one_line_and_changes_nothing(
    served: tuple[Ledger, int],
) -> None:
    ledger, port = served
    code, said = simulate(port, "delinquent", ADDRESS)
    assert code == 1
    assert said.strip() == (
        f"watcher simulate: the ledger refused this: no vote account with vote or node "
        f"pubkey {ADDRESS}"
    )
    code, said = simulate(port, "action", "{mark_current: 42}")
    assert code == 1 and "mark_current" in said and "base58" in said
    code, said = simulate(port, "action", "{mark_curent: x}")
    assert code == 1 and "unknown key 'mark_curent'" in said
    assert [a["votePubkey"] for a in ledger.vote_accounts()["current"]] == [VOTE]
    assert ledger.signatures(ADDRESS) == []


def test_nothing_listening_is_said_plainly() -> None:
    with pytest.raises(ValueError, match=r"no simulator answers on 127\.0\.0\.1:1 "):
        send_action(1, {"mark_current": VOTE})


def test_without_a_control_hook_there_is_no_control_endpoint() -> None:
    # Without a control hook, /control is an RPC path like any other: refused (401).
    with (
        SimulatorServer(Ledger(seed=1)) as plain,
        pytest.raises(ValueError, match=r"no control endpoint there \(HTTP 401\)"),
    ):
        send_action(plain.port, {"mark_current": VOTE})


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_a_rule_tests_ledger_seeds_the_simulator(tmp_path: Path) -> None:
    seeded = ledger_from_file(
        write(
            tmp_path / "t.test.yaml",
            f"""
        rule_files: [x.yaml]
        ledger:
          transactions: {{{ADDRESS}: 2}}
          validators: [{{vote: {VOTE}, identity: {NODE}, stake: 5000000000}}]
        steps: [{{expect: []}}]
        """,
        )
    )
    assert len(seeded.signatures(ADDRESS)) == 2
    assert [a["votePubkey"] for a in seeded.vote_accounts()["current"]] == [VOTE]


def test_a_bad_ledger_file_names_file_line_and_problem(tmp_path: Path) -> None:
    bad = write(
        tmp_path / "bad.yaml",
        f"""
        ledger:
          validators:
            - {{vote: {VOTE}, identity: {NODE}, stake: -1}}
          transactons: {{{ADDRESS}: 2}}
        """,
    )
    with pytest.raises(ConfigError) as raised:
        ledger_from_file(bad)
    said = [str(problem) for problem in raised.value.problems]
    assert len(said) == 2
    assert said[0].startswith("bad.yaml:3: ledger.validators[0].stake") or said[0].startswith(
        f"{bad}:3: ledger.validators[0].stake"
    )
    assert "transactons" in said[1] and "did you mean 'transactions'" in said[1]
    none = write(tmp_path / "none.yaml", "rules: []\n")
    with pytest.raises(ConfigError, match="expected a mapping with a 'ledger:' section"):
        ledger_from_file(none)


def test_serve_a_file_ledger_and_say_each_change(tmp_path: Path) -> None:
    seeded = ledger_from_file(
        write(tmp_path / "l.yaml", f"ledger: {{transactions: {{{ADDRESS}: 1}}}}\n")
    )
    out, stop = io.StringIO(), threading.Event()
    worker = threading.Thread(
        target=serve,
        args=(0,),
        kwargs={"out": out, "stop": stop, "ledger": seeded, "control": apply_control},
    )
    worker.start()
    try:

        def lines() -> list[str]:
            return out.getvalue().splitlines()

        line = wait_until(
            lambda: next((line for line in lines() if "control: POST" in line), None),
            what="the control line",
        )
        port = int(line.split(":")[-1].split("/")[0])
        send_action(port, {"add_transactions": {"address": ADDRESS, "count": 2}})
        wait_until(lambda: "changed: add_transactions" in out.getvalue(), what="the change")
    finally:
        stop.set()
        worker.join(10)
    assert len(seeded.signatures(ADDRESS)) == 3
    said = out.getvalue()
    assert "no scenario: the ledger changes only when told to" in said
    assert "scenario complete" not in said


def test_supply_balance_and_asset_commands(served: tuple[Ledger, int]) -> None:
    ledger, port = served
    mint, big, small = key("control mint"), key("control big"), key("control small")
    ledger.set_holders(mint, [(big, 700), (small, 300)], decimals=0)
    assert simulate(port, "supply", mint, "1500")[0] == 0  # mint 500 to the largest account
    assert ledger.token_supply(mint)["amount"] == "1500"  # type: ignore[index]
    assert ledger.holder_amount(mint, big) == 1200 and ledger.holder_amount(mint, small) == 300
    code, said = simulate(port, "supply", mint, "100")  # would burn more than the largest holds
    assert code == 1 and "cannot burn more than the largest account holds" in said
    assert ledger.token_supply(mint)["amount"] == "1500"  # type: ignore[index]

    assert simulate(port, "balance", ADDRESS, "2500000000")[0] == 0
    assert ledger.accounts.account(ADDRESS).lamports == 2_500_000_000  # type: ignore[union-attr]

    asset_id, owner = key("control asset"), key("control owner")
    code, said = simulate(port, "asset", asset_id)
    assert code == 1 and "needs an owner" in said, said
    assert simulate(port, "asset", asset_id, "--owner", owner)[0] == 0
    assert simulate(port, "asset", asset_id, "--frozen")[0] == 0
    found = das_of(ledger).assets.asset(asset_id)
    assert found is not None and (found.owner, found.frozen) == (owner, True)
