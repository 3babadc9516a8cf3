"""`watcher test`: rule tests against the simulator and the real daemon pipeline, offline."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from watcher.cli import app
from watcher.ruletest.format import read_test_file

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "rules" / "tests").glob("*.test.yaml"))
TREASURY = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
VOTE = "Va1idkzkB6LEmVFmxWbWU8Ao9qehC62Tjmf68L3uYKj"  # current on the recorded mainnet

TREASURY_RULE = f"""\
rules:
  - name: treasury
    kind: new_transactions
    addresses: [{TREASURY}]
"""


def run(*files: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["test", *map(str, files)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_every_rule_file_ships_with_a_test() -> None:
    rule_files = {path.stem for path in (REPO / "rules").glob("*.yaml")}
    assert {path.name.removesuffix(".test.yaml") for path in SHIPPED} == rule_files


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.name)
def test_each_shipped_rule_test_passes(path: Path) -> None:
    code, output = run(path)
    assert code == 0, output
    assert "FAILED" not in output
    assert f"{path.name}: " in output and "steps passed" in output


def test_every_example_rule_file_has_a_rule_test() -> None:
    tested = {name for path in SHIPPED for name in read_test_file(path)[1].rule_files}
    examples = {f"../{path.name}" for path in (REPO / "rules").glob("*.yaml")}
    assert examples <= tested


def test_a_firing_that_does_not_happen_fails_and_says_what_was_expected(tmp_path: Path) -> None:
    write(tmp_path, "treasury.yaml", TREASURY_RULE)
    test = write(
        tmp_path,
        "t.test.yaml",
        f"""\
        rule_files: [treasury.yaml]
        steps:
          - expect: []
          - name: two transactions
            actions:
              - add_transactions: {{address: {TREASURY}, count: 2}}
            expect:
              - {{rule: treasury, reason: event, title_contains: 3 new transactions}}
        """,
    )
    code, output = run(test)
    assert code == 1
    assert "t.test.yaml:3: step 1: ok" in output
    assert "t.test.yaml:4: step 2 (two transactions): FAILED" in output
    expected_part, got_part = output.split("notified, not expected:")
    assert "- rule treasury, reason event, title containing '3 new transactions'" in expected_part
    assert f"- rule treasury, reason event, subject {TREASURY}, title " in got_part
    assert "2 new transactions" in got_part
    assert "1 of 2 steps failed" in output


def test_a_notification_where_none_is_expected_fails(tmp_path: Path) -> None:
    write(tmp_path, "treasury.yaml", TREASURY_RULE)
    test = write(
        tmp_path,
        "t.test.yaml",
        f"""\
        rule_files: [treasury.yaml]
        steps:
          - expect: []
          - actions: [{{add_transactions: {{address: {TREASURY}}}}}]
            expect: []
        """,
    )
    code, output = run(test)
    assert code == 1
    assert "step 2: FAILED" in output
    assert "expected, not notified" not in output
    assert (
        f"- rule treasury, reason event, subject {TREASURY}"
        in output.split("notified, not expected:")[1]
    )


def test_an_invalid_test_file_is_reported_by_line(tmp_path: Path) -> None:
    write(tmp_path, "treasury.yaml", TREASURY_RULE)
    test = write(
        tmp_path,
        "t.test.yaml",
        f"""\
        rule_files: [treasury.yaml]
        steps:
          - expect: []
          - actions:
              - add_transaction: {{address: {TREASURY}}}
            wait: 5
            expect:
              - {{rule: treasury, reason: fired}}
              - {{rule: tresury, reason: event}}
        """,
    )
    code, output = run(test)
    assert code == 2
    assert (
        "t.test.yaml:5: steps[1].actions[0]: unknown key 'add_transaction' "
        "(did you mean 'add_transactions'?)"
    ) in output
    assert "t.test.yaml:6: steps[1].wait: 5 has no unit" in output
    assert "t.test.yaml:8: steps[1].expect[0].reason: expected 'event'" in output
    assert "step 1" not in output  # nothing was run


def test_invalid_rule_files_and_unknown_rules_are_invalid_input(tmp_path: Path) -> None:
    write(tmp_path, "bad.yaml", "rules:\n  - name: x\n    kind: new_transaction\n")
    bad_rules = write(tmp_path, "a.test.yaml", "rule_files: [bad.yaml]\nsteps: [{expect: []}]\n")
    write(tmp_path, "treasury.yaml", TREASURY_RULE)
    unknown_rule = write(
        tmp_path,
        "b.test.yaml",
        """\
        rule_files: [treasury.yaml]
        steps:
          - expect: [{rule: tresury, reason: event}]
        """,
    )
    code, output = run(bad_rules, unknown_rule)
    assert code == 2
    assert "bad.yaml:3: unknown kind 'new_transaction'" in output
    assert "b.test.yaml:3: steps[0].expect[0].rule: unknown rule 'tresury'" in output


def test_an_action_the_ledger_refuses_is_reported_at_its_line(tmp_path: Path) -> None:
    write(tmp_path, "treasury.yaml", TREASURY_RULE)
    test = write(
        tmp_path,
        "t.test.yaml",
        f"""\
        rule_files: [treasury.yaml]
        steps:
          - expect: []
          - actions:
              - mark_delinquent: {VOTE}
            expect: []
        """,
    )
    code, output = run(test)
    assert code == 2
    assert "t.test.yaml:5: steps[1].actions[0]: the ledger refused this: no vote account" in output


@pytest.fixture
def pending_rule(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        "validators.yaml",
        f"""\
        rules:
          - name: slow
            kind: delinquent_validators
            validators: [{VOTE}]
            for: 5m
        """,
    )


def test_for_delays_firing_and_a_shorter_blip_never_fires(
    tmp_path: Path, pending_rule: Path
) -> None:
    test = write(
        tmp_path,
        "t.test.yaml",
        f"""\
        rule_files: [{pending_rule.name}]
        ledger: {{from: mainnet}}
        steps:
          - expect: []
          - name: a blip
            actions: [{{mark_delinquent: {VOTE}}}]
            expect: []
          - name: over before for
            wait: 4m
            actions: [{{mark_current: {VOTE}}}]
            expect: []
          - name: still quiet later
            wait: 10m
            expect: []
          - name: delinquent again
            actions: [{{mark_delinquent: {VOTE}}}]
            expect: []
          - name: not yet
            wait: 4m59s
            expect: []
          - name: held for 5m
            wait: 1s
            expect:
              - {{rule: slow, reason: firing, subject: {VOTE}}}
        """,
    )
    code, output = run(test)
    assert code == 0, output
    assert "7 steps passed" in output


def test_a_firing_expected_before_for_has_elapsed_fails(tmp_path: Path, pending_rule: Path) -> None:
    test = write(
        tmp_path,
        "t.test.yaml",
        f"""\
        rule_files: [{pending_rule.name}]
        ledger: {{from: mainnet}}
        steps:
          - expect: []
          - actions: [{{mark_delinquent: {VOTE}}}]
            expect: [{{rule: slow, reason: firing}}]
        """,
    )
    code, output = run(test)
    assert code == 1
    assert "step 2: FAILED" in output
    assert "- rule slow, reason firing" in output.split("expected, not notified:")[1]


def test_a_rule_with_max_every_is_polled_at_every_step(tmp_path: Path) -> None:
    write(tmp_path, "treasury.yaml", TREASURY_RULE + "    every: 10s\n    max_every: 1h\n")
    quiet = "  - {wait: 10s, expect: []}\n" * 4
    test = write(
        tmp_path,
        "t.test.yaml",
        f"rule_files: [treasury.yaml]\nsteps:\n  - expect: []\n{quiet}"
        f"  - actions: [{{add_transactions: {{address: {TREASURY}}}}}]\n"
        "    expect: [{rule: treasury, reason: event}]\n",
    )
    code, output = run(test)
    assert code == 0, output


def test_transfers_and_dust_land_on_both_sides(tmp_path: Path) -> None:
    payee = "Va1idLRtYEtVFJFsvz8vtt1uCJgea4Q1zi2Rh3eraJh"  # any other valid key
    write(
        tmp_path,
        "treasury.yaml",
        f"""\
        rules:
          - name: treasury
            kind: new_transactions
            addresses: [{TREASURY}, {payee}]
        """,
    )
    steps = f"""\
        rule_files: [treasury.yaml]
        ledger:
          accounts: [{{address: {TREASURY}, lamports: 1200500000000}}]
        steps:
          - expect: []
          - name: 1,000 SOL out, listed on both sides
            actions:
              - transfer: {{source: {TREASURY}, destination: {payee}, amount: 1000}}
            expect:
              - {{rule: treasury, reason: event, subject: {TREASURY}, title_contains: 1 new}}
              - {{rule: treasury, reason: event, subject: {payee}, title_contains: 1 new}}
          - name: dust on the payee only
            actions:
              - dust: {{address: {payee}, count: 3}}
            expect:
              - {{rule: treasury, reason: event, subject: {payee}, title_contains: 3 new}}
        """
    code, output = run(write(tmp_path, "t.test.yaml", steps))
    assert (code, output.strip().splitlines()[-1]) == (0, "1 test file: 1 passed"), output
    assert "t.test.yaml: 3 steps passed" in output

    # The treasury paid a fee for the first: 200.5 SOL more is more than it holds.
    refused = f"""\
          - actions:
              - transfer: {{source: {TREASURY}, destination: {payee}, amount: 200.5}}
            expect: []
        """
    code, output = run(write(tmp_path, "refused.test.yaml", steps.rstrip(" ") + refused))
    assert code == 2, output
    assert "refused.test.yaml:18: steps[3].actions[0]: the ledger refused this: " in output
    assert "short of 200500000000 lamports and the fee" in output
