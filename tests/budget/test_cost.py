"""`watcher check` says what the rules will cost: calls per method per second and per month."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from watcher.budget.cost import budget_fit, cost_lines, method_costs
from watcher.cli import app
from watcher.config.call_budget import Budget
from watcher.kinds import SOURCES
from watcher.kinds.ruleset import Job

from support.values import key

ADDRESSES = tuple(key(n) for n in range(100))


def test_the_documented_example_100_addresses_every_30s_is_8_6_million_calls_a_month() -> None:
    [cost] = method_costs([Job("signatures", 30.0, ADDRESSES)])
    assert (cost.method, cost.targets) == ("getSignaturesForAddress", 100)
    assert round(cost.per_month / 1e6, 1) == 8.6
    lines = cost_lines([Job("signatures", 30.0, ADDRESSES)], max_rps=None, batch_size=10)
    assert "getSignaturesForAddress" in lines[1] and "8.6 M a month" in lines[1]


def test_methods_add_up_across_jobs_and_accounts_ride_100_to_a_call() -> None:
    jobs = [
        Job("signatures", 10.0, ADDRESSES[:50]),
        Job("signatures", 60.0, ADDRESSES[50:]),
        Job("nodes", 60.0, ("cluster",)),  # getClusterNodes and getVoteAccounts
        Job("votes", 10.0, ("cluster",)),
        Job("accounts", 60.0, ADDRESSES + ADDRESSES[:20]),  # 120 keys: 2 calls
    ]
    rates = {cost.method: round(cost.per_second, 4) for cost in method_costs(jobs)}
    assert rates == {
        "getSignaturesForAddress": round(50 / 10 + 50 / 60, 4),
        # One call a tick serves both sources: every 60 s tick of nodes is one of votes too.
        "getVoteAccounts": round(1 / 10, 4),
        "getClusterNodes": round(1 / 60, 4),
        "getMultipleAccounts": round(2 / 60, 4),
    }


def test_one_get_vote_accounts_a_tick_serves_every_vote_kind_and_validator(
    tmp_path: Path,
) -> None:
    """Five kinds reading getVoteAccounts every minute, three of them VAT validators, are one
    call a minute (as the daemon makes it: ``watcher.kinds.sources.vote_accounts``), not one per
    kind or validator; the VAT's vote accounts are one getMultipleAccounts of up to 100 keys."""
    validators = "[" + ", ".join(ADDRESSES[:3]) + "]"
    rules = "rules:\n" + "".join(
        f"  - {{name: {kind}, kind: {kind}, validators: {validators}, every: 1m, notify: [ops]}}\n"
        for kind in ("delinquent_validators", "vote_lag", "commission_changed", "version_drift")
    )
    rules += f"  - {{name: vat, kind: vat_eligibility, validators: {validators}, every: 1m, "
    rules += "notify: [ops]}\n"
    said = check_output(tmp_path, rules, "{}")
    month = 30 * 24 * 60
    [votes] = [line for line in said if "getVoteAccounts" in line]
    assert f"{month / 1000:.1f} k a month" in votes, votes  # 43.2 k: one call a minute
    [accounts] = [line for line in said if "getMultipleAccounts" in line]
    assert f"{month / 1000:.1f} k a month" in accounts, accounts
    # At 1m and 5m, the 5m ticks are 1m ticks: still one call a minute; at 1m and 90s, both.
    assert method_costs([Job("votes", 60.0, ("cluster",)), Job("vat", 300.0, ADDRESSES[:3])])[
        0
    ].per_second == pytest.approx(1 / 60)
    uneven = method_costs([Job("votes", 60.0, ("cluster",)), Job("nodes", 90.0, ("cluster",))])
    assert {c.method: c.per_second for c in uneven}["getVoteAccounts"] == pytest.approx(
        1 / 60 + 1 / 90
    )


def test_against_max_rps_it_says_whether_the_requests_fit() -> None:
    jobs = [Job("signatures", 10.0, ADDRESSES)]  # 10 calls/s, 1 request/s in batches of 10
    assert cost_lines(jobs, max_rps=2, batch_size=10)[-1] == (
        "  about 1.00 requests/s with batch_size 10: 50% of max_rps 2 (fits)"
    )
    assert cost_lines(jobs, max_rps=5, batch_size=1)[-1].endswith(
        "200% of max_rps 5 (does NOT fit: sweeps will stretch)"
    )


def test_check_prints_the_cost_after_ok(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - name: deposits\n    kind: new_transactions\n    every: 30s\n"
        "    notify: [ops]\n    addresses:\n" + "".join(f"      - {a}\n" for a in ADDRESSES)
    )
    settings = tmp_path / "watcher.yaml"
    settings.write_text(
        'rpc_url: "http://127.0.0.1:8899/v3/k"\nrules: [rules.yaml]\n'
        'channels: {ops: ["json://127.0.0.1:9/"]}\nrpc: {max_rps: 10, batch_size: 10}\n'
    )
    result = CliRunner().invoke(app, ["check", "--config", str(settings)])
    assert result.exit_code == 0, result.output
    said = result.stdout.splitlines()
    assert said[0].endswith("OK (1 rules)")
    assert any("getSignaturesForAddress" in line and "8.6 M a month" in line for line in said)
    assert said[-1].endswith("3% of max_rps 10 (fits)")


def check_output(tmp_path: Path, rules: str, rpc: str) -> list[str]:
    (tmp_path / "rules.yaml").write_text(rules)
    settings = tmp_path / "watcher.yaml"
    settings.write_text(
        'rpc_url: "http://127.0.0.1:8899/v3/k"\nrules: [rules.yaml]\n'
        f'channels: {{ops: ["json://127.0.0.1:9/"]}}\nrpc: {rpc}\n'
    )
    result = CliRunner().invoke(app, ["check", "--config", str(settings)])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def deposits(every: str, max_every: str | None) -> str:
    bound = "" if max_every is None else f"    max_every: {max_every}\n"
    return (
        f"rules:\n  - name: deposits\n    kind: new_transactions\n    every: {every}\n{bound}"
        "    notify: [ops]\n    addresses:\n" + "".join(f"      - {a}\n" for a in ADDRESSES)
    )


def test_check_prints_each_rules_cost_at_every_and_max_every_against_the_budget(
    tmp_path: Path,
) -> None:
    # 100 addresses: 8.6 M a month at 30 s, 288 k at 15 m; 20 M a month fits the floor.
    said = check_output(tmp_path, deposits("30s", "15m"), "{budget: 20M/month}")
    [line] = [line for line in said if line.startswith("  deposits")]
    assert "at every    8.6 M" in line and "at max_every  288.0 k" in line
    assert line.endswith("43% / 1% of the budget")
    assert said[-1] == (
        "  rpc.budget 20M/month: rules without max_every 0%, the others at max_every 1%: fits"
        " (intervals follow activity between every and max_every)"
    )


def test_check_says_how_far_a_budget_below_the_floor_stretches_intervals(tmp_path: Path) -> None:
    said = check_output(tmp_path, deposits("30s", "15m"), "{budget: 144k/month}")
    assert said[-1].endswith("200%: does NOT fit, intervals stretch 2.00x beyond max_every")


def test_check_says_nothing_of_cadence_without_max_every_or_budget(tmp_path: Path) -> None:
    said = check_output(tmp_path, deposits("30s", None), "{batch_size: 10}")
    assert not any("max_every" in line for line in said)


def test_a_fixed_rule_spends_the_budget_before_the_adaptive_ones() -> None:
    jobs = [
        Job("signatures", 10.0, ADDRESSES[:50]),  # 5 calls/s
        Job("signatures", 10.0, ADDRESSES[50:], max_interval=50.0),  # floor 1 call/s
    ]
    fit = budget_fit(jobs, Budget(7.0 * 86400, 86400.0))
    assert (fit.fixed_per_second, fit.floor_per_second, fit.stretch_factor) == (5.0, 1.0, 1.0)
    assert budget_fit(jobs, Budget(5.5 * 86400, 86400.0)).stretch_factor == pytest.approx(2.0)
    assert budget_fit(jobs, Budget(4.0 * 86400, 86400.0)).stretch_factor == math.inf


def test_the_nonce_rules_cost_one_heavy_call_per_key_and_interval() -> None:
    jobs = [Job("nonces", 60.0, (",".join(ADDRESSES[:3]), ADDRESSES[3]))]
    [cost] = method_costs(jobs)
    assert (cost.method, cost.targets) == ("getProgramAccounts (nonce accounts)", 4)
    assert cost.per_second == pytest.approx(4 / 60)
    lines = cost_lines(jobs, max_rps=None, batch_size=1)
    assert any("one getProgramAccounts over the System program per key" in x for x in lines)


def test_each_source_declares_what_one_poll_calls() -> None:
    """The costs come from the sources' own facts: every registered source names its methods,
    and a job of it costs each of them."""
    for name, source in SOURCES.items():
        assert source.facts.methods, name
        costs = method_costs([Job(name, 60.0, ("x",))])
        assert {cost.method for cost in costs} == set(source.facts.methods)


def test_check_counts_the_balance_reads_of_addresses_that_move_at_a_stated_share(
    tmp_path: Path,
) -> None:
    addresses = [key(f"moving {n}") for n in range(100)]
    rules = (
        "rules:\n  - name: treasury\n    kind: new_transactions\n    every: 30s\n"
        "    tokens: true\n    notify: [ops]\n    addresses:\n"
        + "".join(f"      - {a}\n" for a in addresses)
    )
    said = check_output(tmp_path, rules, "{max_rps: 10}")
    start = said.index(
        "Balance reads of addresses that moved (new_transactions; assumed: 5% of polls find new"
        " signatures; and one getMultipleAccounts key per address at its first poll):"
    )
    # 5 of the 100 move per 30 s round: one getMultipleAccounts call serves them (100 keys a
    # call), and each reads its token accounts (tokens: true).
    assert said[start + 1 : start + 3] == [
        "  getTokenAccounts         100 targets       0.17/s   432.0 k a month",
        "  getMultipleAccounts      100 targets       0.03/s    86.4 k a month",
    ]


def test_no_balance_read_line_without_a_rule_that_reads_balances(tmp_path: Path) -> None:
    said = check_output(tmp_path, deposits("30s", None), "{}")
    assert any(line.startswith("Balance reads") for line in said)  # new_transactions reads SOL
    holders = (
        f"rules:\n  - name: whales\n    kind: holder_changes\n    mints: [{key('m')}]\n"
        "    notify: [ops]\n"
    )
    said = check_output(tmp_path, holders, "{}")
    assert not any(line.startswith("Balance reads") for line in said)
