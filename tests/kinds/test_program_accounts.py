"""Kind ``program_accounts``: the pure diff and step (max_accounts), the rule's keys, the answer
model, the simulator's getProgramAccounts over real HTTP and the real client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import base58
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from watcher.kinds import KINDS, word
from watcher.kinds.program_accounts import ProgramAccountsRule, ProgramObservation, diff_keys
from watcher.kinds.rule_files import read_rules
from watcher.ledger.models_das import ProgramAccounts
from watcher.ledger.plausibility import judge
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.das import das_of
from watcher.simulator.keys import derived_pubkey

PROGRAM = derived_pubkey("program")
QUOTE = derived_pubkey("quote")
KEYS = [derived_pubkey(f"pool-{n}") for n in range(12)]
SOURCE = KINDS["program_accounts"].source


def seen(*keys: str) -> ProgramObservation:
    return ProgramObservation(tuple(keys))


def rule(name: str = "pools", **keys: Any) -> ProgramAccountsRule:
    return ProgramAccountsRule(name=name, program=PROGRAM, **keys)


@given(st.sets(st.sampled_from(KEYS)), st.sets(st.sampled_from(KEYS)))
def test_each_key_that_came_or_went_is_one_change(old: set[str], new: set[str]) -> None:
    created, closed = diff_keys(sorted(old), sorted(new))
    assert set(created) == new - old and set(closed) == old - new
    assert len(created) + len(closed) == len(old ^ new)


def test_baseline_then_created_and_closed_in_one_alert() -> None:
    rules = [rule()]
    first = SOURCE.step(rules, PROGRAM, None, seen(KEYS[0], KEYS[1]), 0.0)
    assert first.alerts == ()
    second = SOURCE.step(rules, PROGRAM, first.state, seen(KEYS[1], KEYS[2]), 60.0)
    [alert] = second.alerts
    worded = word(alert, rules[0])
    short = f"{PROGRAM[:4]}…{PROGRAM[-4:]}"
    assert worded.title == (
        f"[WARNING] pools: 2 account changes under {short} (1 created, 1 closed)"
    )
    assert f"- created: {KEYS[2]}" in worded.body and f"- closed: {KEYS[0]}" in worded.body
    assert SOURCE.step(rules, PROGRAM, second.state, seen(KEYS[1], KEYS[2]), 120.0).alerts == ()


def test_too_large_an_answer_is_one_clear_alert_and_is_not_diffed() -> None:
    rules = [rule(max_accounts=3)]
    base = SOURCE.step(rules, PROGRAM, None, seen(*KEYS[:2]), 0.0)
    big = SOURCE.step(rules, PROGRAM, base.state, seen(*KEYS[:5]), 60.0)
    [alert] = big.alerts
    title, body = word(alert, rules[0]).title, word(alert, rules[0]).body
    assert "5 accounts under" in title and "more than max_accounts 3: not compared" in title
    assert "Narrow its filters or raise max_accounts" in body
    again = SOURCE.step(rules, PROGRAM, big.state, seen(*KEYS[:6]), 120.0)
    assert again.alerts == ()  # said once
    back = SOURCE.step(rules, PROGRAM, again.state, seen(KEYS[0], KEYS[2]), 180.0)
    [diffed] = back.alerts  # against the last snapshot that fitted
    assert (diffed.facts["created"], diffed.facts["closed"]) == ([KEYS[2]], [KEYS[1]])
    worse = SOURCE.step(rules, PROGRAM, back.state, seen(*KEYS[:4]), 240.0)
    assert [a.facts["too_many"] for a in worse.alerts] == [4]  # a new episode: said again


def test_doubts() -> None:
    state = SOURCE.step([rule()], PROGRAM, None, seen(*KEYS[:3]), 0.0).state
    gone = SOURCE.doubt(state, seen(KEYS[5]), 1.0)
    assert gone is not None and gone.confirmable
    foreign = SOURCE.doubt(state, ProgramObservation((KEYS[0],), (KEYS[0],)), 1.0)
    assert foreign is not None and "owned by another program" in foreign.reason
    assert SOURCE.doubt(state, seen(KEYS[0]), 1.0) is None


def test_an_account_of_another_program_in_every_answer_is_set_aside_not_the_query_muted() -> None:
    """The node lists one account as another program's, poll after poll: not taken while new,
    then set aside (out of the snapshot) and the changes around it notified."""
    rules = [rule()]
    state = SOURCE.step(rules, PROGRAM, None, seen(*KEYS[:3]), 0.0).state
    odd = ProgramObservation((KEYS[0], KEYS[1], KEYS[3]), (KEYS[1],))  # KEYS[3] created
    for poll in range(1, 4):
        doubt = SOURCE.doubt(state, odd, float(poll))
        assert doubt is not None
        verdict = judge(state, doubt)
        if not verdict.accept:
            state = verdict.state
    assert poll == 3 and verdict.accept  # the third in a row is the ledger's own
    outcome = SOURCE.step(rules, PROGRAM, state, odd, 3.0)
    [alert] = outcome.alerts
    assert (alert.facts["created"], alert.facts["closed"]) == ([KEYS[3]], [KEYS[1], KEYS[2]])
    later = ProgramObservation((KEYS[0], KEYS[1], KEYS[3], KEYS[4]), (KEYS[1],))
    assert SOURCE.doubt(outcome.state, later, 4.0) is None  # not doubted again
    [next_alert] = SOURCE.step(rules, PROGRAM, outcome.state, later, 4.0).alerts
    assert (next_alert.facts["created"], next_alert.facts["closed"]) == ([KEYS[4]], [])


def test_targets_carry_the_filters_as_sent() -> None:
    filtered = ProgramAccountsRule.model_validate(
        {
            "name": "p",
            "program": PROGRAM,
            "filters": [{"dataSize": 165}, {"memcmp": {"offset": 32, "bytes": QUOTE}}],
        }
    )
    assert filtered.targets == (
        f'{PROGRAM} [{{"dataSize":165}},{{"memcmp":{{"bytes":"{QUOTE}","offset":32}}}}]',
    )
    assert rule().targets == (PROGRAM,) and rule().max_accounts == 10000


def test_rule_mistakes_are_reported_at_their_line(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    five = ", ".join(["{dataSize: 1}"] * 5)
    path.write_text(
        "rules:\n"
        f"  - name: a\n    kind: program_accounts\n    program: {PROGRAM}\n"
        f"    filters: [{five}]\n"
        f"  - name: b\n    kind: program_accounts\n    program: {PROGRAM}\n"
        "    filters: [{dataSize: 1, memcmp: {offset: 0, bytes: abc}}]\n"
        "    max_accounts: 0\n"
    )
    _, problems = read_rules([path], None)
    text = "\n".join(str(problem) for problem in problems)
    assert f"{path}:5: filters" in text and "at most 4" in text
    assert f"{path}:9: filters[0]" in text and "either {dataSize: N}" in text
    assert f"{path}:10: max_accounts" in text


ACCOUNTS = TypeAdapter(ProgramAccounts)
ENTRY: dict[str, Any] = {
    "pubkey": KEYS[0],
    "account": {"data": "", "executable": False, "lamports": 1, "owner": PROGRAM, "space": 0},
}


@pytest.mark.parametrize(
    "entries",
    [
        [ENTRY, ENTRY],
        [{**ENTRY, "pubkey": "0OIl"}],
        [{**ENTRY, "account": {**ENTRY["account"], "lamports": -1}}],
        [{**ENTRY, "account": {**ENTRY["account"], "executable": "no"}}],
    ],
)
def test_a_malformed_answer_is_refused(entries: list[Any]) -> None:
    with pytest.raises(ValidationError):
        ACCOUNTS.validate_python(entries)


@pytest.fixture
def server() -> Iterator[SimulatorServer]:
    ledger = Ledger(seed=9)
    programs = das_of(ledger).programs
    quoted = bytes(32) + base58.b58decode(QUOTE)
    for n, key in enumerate(KEYS[:6]):
        programs.set_program_account(PROGRAM, key, quoted.ljust(165 if n % 2 else 200, b"\0"))
    with SimulatorServer(ledger) as server:
        yield server


def call(server: SimulatorServer, params: list[Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "getProgramAccounts", "params": params}
    answer: dict[str, Any] = httpx.post(server.url, json=body, timeout=5).json()
    return answer


def test_simulator_filters_slices_and_wraps(server: SimulatorServer) -> None:
    memcmp = {"memcmp": {"offset": 32, "bytes": QUOTE}}
    sized = call(server, [PROGRAM, {"filters": [{"dataSize": 165}, memcmp]}])["result"]
    assert sorted(entry["pubkey"] for entry in sized) == sorted(KEYS[1:6:2])
    sliced = call(
        server,
        [
            PROGRAM,
            {"encoding": "base64", "dataSlice": {"offset": 0, "length": 0}, "withContext": True},
        ],
    )["result"]
    assert set(sliced) == {"context", "value"} and len(sliced["value"]) == 6
    assert {entry["account"]["data"][0] for entry in sliced["value"]} == {""}
    assert {entry["account"]["space"] for entry in sliced["value"]} == {165, 200}
    other = {"memcmp": {"offset": 32, "bytes": PROGRAM}}
    assert call(server, [PROGRAM, {"filters": [other]}])["result"] == []


@pytest.mark.parametrize(
    "config",
    [
        {"filters": [{"dataSize": 1}] * 5},
        {"filters": [{"memcmp": {"offset": 0, "bytes": "0OIl"}}]},
        {"filters": [{"size": 1}]},
        {"encoding": "hex"},
        {"dataSlice": {"offset": 0}},
    ],
)
def test_simulator_refuses_bad_params(server: SimulatorServer, config: dict[str, Any]) -> None:
    assert call(server, [PROGRAM, config])["error"]["code"] == -32602


async def test_observe_reads_keys_only(server: SimulatorServer) -> None:
    target = ProgramAccountsRule.model_validate(
        {"name": "p", "program": PROGRAM, "filters": [{"dataSize": 200}]}
    ).targets[0]
    async with RpcClient(server.url, RpcSettings(max_attempts=1)) as client:
        observed = await SOURCE.observe(client, target, None)
    assert sorted(observed.pubkeys) == sorted(KEYS[0:6:2]) and observed.foreign == ()
