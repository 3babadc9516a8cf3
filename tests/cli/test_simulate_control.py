"""`watcher simulate --ledger FILE` and `watcher simulate tx ...`: a user seeds the simulator from
a rule test's ledger and changes it while it runs, with the rule tests' vocabulary."""

from __future__ import annotations

import io
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from watcher.cli import app
from watcher.core.errors import ConfigError
from watcher.ruletest.control import apply_control, ledger_from_file, send_action
from watcher.simulator import Ledger, SimulatorServer, serve
from watcher.simulator.authorities import powers_of
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


# -- transfers, faults, powers, the port from the environment ----------------------------------

TREASURY, PAYEE, USDC = key("control treasury"), key("control payee"), key("control usdc")
TREASURY_USDC = key("control treasury usdc")


def simulate_env(port: int, *args: str) -> tuple[int, str]:
    """The command as an operator runs it with WATCHER_SIMULATE_PORT set: no --port."""
    result = runner.invoke(app, ["simulate", *args], env={"WATCHER_SIMULATE_PORT": str(port)})
    return result.exit_code, result.stdout + result.stderr


def rpc(port: int, method: str, params: list[Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = httpx.post(f"http://127.0.0.1:{port}/v3/sim-key", json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def lamports(port: int, *addresses: str) -> list[int | None]:
    value = rpc(port, "getMultipleAccounts", [list(addresses), {"encoding": "base64"}])["value"]
    return [None if account is None else account["lamports"] for account in value]


def history(port: int, address: str) -> list[str]:
    return [entry["signature"] for entry in rpc(port, "getSignaturesForAddress", [address])]


def test_transfer_moves_sol_and_tokens_in_ui_units(served: tuple[Ledger, int]) -> None:
    ledger, port = served
    ledger.accounts.set_account(TREASURY, lamports=1_200_500_000_000)  # 1,200.5 SOL
    ledger.set_holders(USDC, [(TREASURY_USDC, 30_000_000_000)], decimals=6)
    das_of(ledger).set_token_account(
        TREASURY_USDC, mint=USDC, owner=TREASURY, amount=30_000_000_000
    )

    code, said = simulate_env(port, "transfer", TREASURY, PAYEE, "1000")
    assert code == 0, said
    signature = said.strip().rsplit(" ", 1)[-1]  # "transfer {...}: signature SIG"
    assert history(port, TREASURY) == history(port, PAYEE) == [signature]
    # 1,000 SOL moved; the fee (5000 lamports) paid by the treasury.
    assert lamports(port, TREASURY, PAYEE) == [200_500_000_000 - 5000, 1_000_000_000_000]

    code, said = simulate_env(port, "transfer", TREASURY, PAYEE, "25,000.5", "--mint", USDC)
    assert code == 0, said
    assert '"amount": "25000.5"' in said and f'"mint": "{USDC}"' in said
    owned = rpc(port, "getTokenAccounts", [None, PAYEE])["token_accounts"]
    assert [(a["mint"], a["amount"]) for a in owned] == [(USDC, 25_000_500_000)]
    assert len(history(port, PAYEE)) == 2

    # Finer than the mint's decimals, or more than is held: refused, nothing moves.
    code, said = simulate_env(port, "transfer", TREASURY, PAYEE, "0.0000001", "--mint", USDC)
    assert code == 1 and "0.0000001 has more decimals than mint" in said and "(6)" in said
    code, said = simulate_env(port, "transfer", PAYEE, TREASURY, "1000")
    assert code == 1 and "short of 1000000000000 lamports and the fee" in said
    code, said = simulate_env(port, "transfer", TREASURY, PAYEE, "0")
    assert code == 2 and "not a positive amount" in said
    assert len(history(port, PAYEE)) == 2


def test_balance_with_a_mint_funds_an_owner_who_can_then_transfer_it(
    served: tuple[Ledger, int],
) -> None:
    ledger, port = served
    ledger.set_holders(USDC, [], decimals=6)
    ledger.accounts.set_account(PAYEE, lamports=10**9)  # its fees
    code, said = simulate_env(port, "balance", PAYEE, "40000000000", "--mint", USDC)
    assert code == 0, said
    owned = rpc(port, "getTokenAccounts", [None, PAYEE])["token_accounts"]
    assert [(a["mint"], a["owner"], a["amount"]) for a in owned] == [(USDC, PAYEE, 40_000_000_000)]
    assert history(port, PAYEE) == []  # a balance set, not a transaction
    code, said = simulate_env(port, "transfer", PAYEE, TREASURY, "25000", "--mint", USDC)
    assert code == 0, said
    owned = rpc(port, "getTokenAccounts", [None, TREASURY])["token_accounts"]
    assert [(a["mint"], a["amount"]) for a in owned] == [(USDC, 25_000_000_000)]


def test_dust_lands_from_lookalikes(served: tuple[Ledger, int]) -> None:
    ledger, port = served
    code, said = simulate_env(port, "dust", TREASURY, "--count", "50")
    assert code == 0 and "50 transactions, the newest" in said, said
    dusted = history(port, TREASURY)
    assert len(dusted) == 50 and said.strip().endswith(dusted[0])
    assert lamports(port, TREASURY) == [50]  # one lamport each
    senders = {address for address in ledger.addresses() if address != TREASURY}
    assert len(senders) == 50
    assert {(s[:4], s[-4:]) for s in senders} == {(TREASURY[:4], TREASURY[-4:])}


def test_the_port_comes_from_the_environment_and_port_still_wins(
    served: tuple[Ledger, int],
) -> None:
    ledger, port = served
    assert simulate_env(port, "tx", ADDRESS)[0] == 0
    # --port overrides the variable (which names a port nothing listens on here).
    result = runner.invoke(
        app, ["simulate", "tx", ADDRESS, "--port", str(port)], env={"WATCHER_SIMULATE_PORT": "1"}
    )
    assert result.exit_code == 0, result.stdout
    assert len(ledger.signatures(ADDRESS)) == 2
    code, said = simulate_env(1, "tx", ADDRESS)
    assert code == 1 and "no simulator answers on 127.0.0.1:1" in said


def status_of_a_call(port: int) -> int:
    body = {"jsonrpc": "2.0", "id": 1, "method": "getSignaturesForAddress", "params": [ADDRESS]}
    return httpx.post(f"http://127.0.0.1:{port}/v3/sim-key", json=body, timeout=10).status_code


def test_fault_fails_the_endpoint_for_a_while_or_until_cleared(
    served: tuple[Ledger, int],
) -> None:
    _, port = served
    code, said = simulate_env(port, "fault", "http_503", "--for", "1h")
    assert (code, said.strip()) == (0, "fault http_503_html: every request for 1h")
    assert [status_of_a_call(port) for _ in range(3)] == [503, 503, 503]
    assert simulate_env(port, "fault", "clear")[0] == 0
    assert status_of_a_call(port) == 200

    # A short one ends by itself.
    assert simulate_env(port, "fault", "http_429", "--for", "300ms")[0] == 0
    assert status_of_a_call(port) == 429
    wait_until(lambda: status_of_a_call(port) == 200, what="the fault to end")

    # Only one method's calls, the next two of them.
    code, said = simulate_env(port, "fault", "rpc_error", "--count", "2", "--method", "getSlot")
    assert said.strip() == "fault rpc_error: the next 2 calls of getSlot"
    assert status_of_a_call(port) == 200

    code, said = simulate_env(port, "fault", "http_418")
    assert code == 1 and "expected 'http_429', 'http_502', 'http_503'" in said
    code, said = simulate_env(port, "fault", "http_503", "--for", "30s", "--count", "2")
    assert code == 1 and "give for or count, not both" in said


def test_slow_delays_each_answer(served: tuple[Ledger, int]) -> None:
    _, port = served
    code, said = simulate_env(port, "slow", "--delay", "400ms", "--count", "1")
    assert (code, said.strip()) == (0, "fault timeout (answers after 400ms): the next 1 request")
    started = time.monotonic()
    assert status_of_a_call(port) == 200  # answered, late
    assert time.monotonic() - started >= 0.4
    code, said = simulate_env(port, "slow", "--delay", "2s", "--for", "30s")
    assert said.strip() == "fault timeout (answers after 2s): every request for 30s"
    assert simulate_env(port, "fault", "clear")[0] == 0


def test_mint_program_and_multisig_commands_and_nulls_in_the_echo(
    served: tuple[Ledger, int],
) -> None:
    ledger, port = served
    mint, authority, program_key, multisig_key = (
        key("control new mint"),
        key("control authority"),
        key("control program"),
        key("control multisig"),
    )
    code, said = simulate_env(port, "mint", mint, "--mint-authority", authority)
    assert code == 0, said
    code, said = simulate_env(port, "mint", mint, "--mint-authority", "null")
    # The null is what the command did: it is shown.
    assert said.strip() == f'set_mint {{"mint": "{mint}", "mint_authority": null}}'
    assert powers_of(ledger).mints[mint].mint_authority is None

    assert simulate_env(port, "program", program_key, "--upgrade-authority", authority)[0] == 0
    code, said = simulate_env(port, "program", program_key, "--upgrade-authority", "null")
    assert '"upgrade_authority": null' in said
    assert powers_of(ledger).programs[program_key].upgrade_authority is None

    members = ["--member", f"{authority}:7", "--member", ADDRESS]
    code, said = simulate_env(port, "multisig", multisig_key, *members, "--threshold", "2")
    assert code == 0, said
    code, said = simulate_env(port, "multisig", multisig_key, "--config-authority", "null")
    assert (
        said.strip() == f'set_multisig {{"multisig": "{multisig_key}", "config_authority": null}}'
    )
    made = powers_of(ledger).multisigs[multisig_key]
    assert (made.members, made.threshold) == ({authority: 7, ADDRESS: 7}, 2)

    asset_id = key("control null asset")
    assert (
        simulate_env(port, "asset", asset_id, "--owner", ADDRESS, "--delegate", authority)[0] == 0
    )
    code, said = simulate_env(port, "asset", asset_id, "--delegate", "null")
    assert said.strip() == f'set_asset {{"id": "{asset_id}", "delegate": null}}'
    found = das_of(ledger).assets.asset(asset_id)
    assert found is not None and found.delegate is None

    # The same through `action`: a null written is a null shown.
    code, said = simulate_env(
        port, "action", f"{{set_mint: {{mint: {mint}, freeze_authority: null}}}}"
    )
    assert said.strip() == f'set_mint {{"mint": "{mint}", "freeze_authority": null}}'

    for command in ("mint", "program", "multisig", "transfer", "dust", "fault", "slow"):
        result = runner.invoke(app, ["simulate", command, "--help"])
        assert result.exit_code == 0 and "Usage: " in result.stdout
