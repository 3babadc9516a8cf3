"""``watcher test``: rule tests, like ``promtool test rules``.

A test file names rule files, seeds a simulated ledger and plays steps. Each step lets time pass
(``wait``), changes the ledger (``actions``), lets every rule poll once, then compares what was
notified in that step with ``expect``. The pipeline is the real one, offline: the built-in
simulator serves the ledger over JSON-RPC on 127.0.0.1, and an in-process ``Daemon`` (real RPC
client, sources, rules, lifecycle, wording and SQLite outbox) sweeps each job once per step on
an injected clock. No sender runs: notifications are read back from the outbox, so nothing
leaves the machine. The format is in ``watcher.ruletest.format`` and docs/rules.md
("Rule tests").

Exit codes: 0 every step of every file passed, 1 a step failed, 2 a file is invalid.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO, TypeVar

from pydantic import TypeAdapter

from watcher.app import Daemon
from watcher.config.rule_models import RuleBase
from watcher.config.settings import Settings
from watcher.config.yamlpos import YamlDocument, display_path, format_loc, normalized
from watcher.core.errors import ConfigError, Problem, RpcError
from watcher.core.events import BELOW_THRESHOLD_FACT
from watcher.core.outbox_rows import AlertRecord
from watcher.kinds.rule_files import read_rules
from watcher.kinds.ruleset import RuleSet
from watcher.kinds.sources import vote_accounts
from watcher.ledger.rpc import RpcClient, RpcSettings
from watcher.ledger.rpc_methods import LedgerMethods
from watcher.ruletest.actions import apply_action, seed_ledger
from watcher.ruletest.format import Expected, RuleTestFile, Step, read_test_file
from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.recorded import SLOT_SECONDS

# The clock starts on the day the simulator's mainnet data was recorded (2025-08-22T00:00:00Z).
START_TIME = 1_755_820_800.0
LEDGER_SEED = 0  # signatures are random: a fixed seed makes every run notify the same text
HISTORY_LIMIT = 100_000

EXIT_PASSED, EXIT_FAILED, EXIT_INVALID = 0, 1, 2
T = TypeVar("T")


class ManualClock:
    """The injected clock: time only moves when a step says ``wait``."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# What a failed call was, by its JSON-RPC method, from its params (a step's "poll failed" line).
_WHAT: dict[str, Callable[[list[Any]], str]] = {
    "getSignaturesForAddress": lambda params: f"signatures of {params[0]}",
    "getTokenLargestAccounts": lambda params: f"largest accounts of {params[0]}",
    "getVoteAccounts": lambda params: "vote accounts",
    "getClusterNodes": lambda params: "cluster nodes",
    "getMultipleAccounts": lambda params: (
        ("token accounts" if params[1].get("encoding") == "jsonParsed" else "accounts")
        + f" {', '.join(params[0])}"
    ),
    "getTokenAccountBalance": lambda params: f"balance of {params[0]}",
    "getTokenSupply": lambda params: f"supply of {params[0]}",
    "getFeeForMessage": lambda params: "fee for message",
    "getTokenAccounts": lambda params: f"token accounts of {params[1] or params[0]}",
    "getProgramAccounts": lambda params: f"accounts of program {params[0]}",
    "getAssets": lambda params: f"assets {', '.join(params[0])}",
    "getNftEditions": lambda params: f"editions of {params[0]}",
}


class _RecordingReader(LedgerMethods):
    """The RPC client, noting each failed call: a failed poll fails the step (a test ledger
    never fails on purpose, so a failure means e.g. a watched mint that is not in the ledger).
    Its methods are the client's own (``LedgerMethods``), over this ``call``."""

    def __init__(self, client: RpcClient) -> None:
        super().__init__(client.commitment)
        self._client = client
        self.failures: list[str] = []

    async def call(
        self, method: str, params: list[Any] | None, model: type[T] | TypeAdapter[T]
    ) -> T:
        try:
            return await self._client.call(method, params, model)
        except RpcError as exc:
            describe, given = _WHAT.get(method), params or []
            # Otherwise an asset page (getAssetsByGroup, getAssetsByCreator, searchAssets).
            what = describe(given) if describe else f"{method} {given[:2]}"
            self.failures.append(f"{what}: {exc}")
            raise

    async def aclose(self) -> None:
        await self._client.aclose()


# -- results -----------------------------------------------------------------------------------


@dataclass
class StepResult:
    number: int  # 1-based
    name: str | None
    line: int | None
    missing: list[Expected] = field(default_factory=list)  # expected, not notified
    unexpected: list[AlertRecord] = field(default_factory=list)  # notified, not expected
    poll_failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.poll_failures)


@dataclass
class FileResult:
    file: str
    problems: list[Problem] = field(default_factory=list)  # invalid input: no verdict
    steps: list[StepResult] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.problems:
            return EXIT_INVALID
        return EXIT_PASSED if all(step.ok for step in self.steps) else EXIT_FAILED


def match(
    expected: Sequence[Expected], got: Sequence[AlertRecord]
) -> tuple[list[Expected], list[AlertRecord]]:
    """Pairs each expected item with its own notification (a maximum matching, so that a loose
    expectation never takes the notification a stricter one needed). Returns the expected items
    left unmatched and the notifications nobody expected."""
    owner: dict[int, int] = {}  # index in got -> index in expected

    def assign(item: int, tried: set[int]) -> bool:
        for index, record in enumerate(got):
            if index in tried or not expected[item].matches(record):
                continue
            tried.add(index)
            if index not in owner or assign(owner[index], tried):
                owner[index] = item
                return True
        return False

    missing = [item for position, item in enumerate(expected) if not assign(position, set())]
    return missing, [record for index, record in enumerate(got) if index not in owner]


# -- running ---------------------------------------------------------------------------------


def run_test_files(paths: Sequence[Path], out: TextIO | None = None) -> int:
    """Run every test file, print a verdict per step, return the exit code (0, 1 or 2)."""
    stream = out if out is not None else sys.stdout
    results = asyncio.run(_run_all(paths, stream))
    failed = sum(1 for result in results if result.exit_code == EXIT_FAILED)
    invalid = sum(1 for result in results if result.exit_code == EXIT_INVALID)
    passed = len(results) - failed - invalid
    summary = f"{_count(len(results), 'test file')}: {passed} passed"
    summary += f", {failed} failed" if failed else ""
    summary += f", {invalid} invalid" if invalid else ""
    print(summary, file=stream)
    return max((result.exit_code for result in results), default=EXIT_PASSED)


async def _run_all(paths: Sequence[Path], stream: TextIO) -> list[FileResult]:
    results = []
    for path in paths:
        result = await run_test_file(path)
        print(format_result(result), file=stream, flush=True)
        results.append(result)
    return results


async def run_test_file(path: Path) -> FileResult:
    """Validate one test file and its rule files, then play its steps."""
    path = normalized(path, Path.cwd())
    result = FileResult(display_path(path))
    try:
        document, test = read_test_file(path)
    except ConfigError as exc:
        result.problems = exc.problems
        return result
    rule_paths, rules, result.problems = _rules_of(document, test, path.parent)
    if result.problems:
        return result
    try:
        await _play(document, test, rule_paths, rules, result)
    except ConfigError as exc:  # an action the ledger refused (unknown mint, validator ...)
        result.problems = exc.problems
    return result


def _rules_of(
    document: YamlDocument, test: RuleTestFile, folder: Path
) -> tuple[list[Path], list[RuleBase], list[Problem]]:
    """The rule files (resolved against the test file's folder) and their rules, or the
    problems: files missing, rules invalid, expectations naming a rule that does not exist."""
    paths = [normalized(Path(entry), folder) for entry in test.rule_files]
    problems = [
        document.problem(
            ("rule_files", index),
            f"rule_files[{index}]: no such file or folder: {display_path(path)}",
        )
        for index, path in enumerate(paths)
        if not path.exists()
    ]
    if problems:
        return paths, [], problems
    rules, problems = read_rules(paths, channels=None)
    if problems:
        return paths, rules, problems
    names = {rule.name for rule in rules}
    known = ", ".join(sorted(names))
    for step_index, step in enumerate(test.steps):
        for item_index, item in enumerate(step.expect):
            if item.rule not in names:
                loc = ("steps", step_index, "expect", item_index, "rule")
                message = f"{format_loc(loc)}: unknown rule '{item.rule}' (defined: {known})"
                problems.append(document.problem(loc, message))
    return paths, rules, problems


async def _play(
    document: YamlDocument,
    test: RuleTestFile,
    rule_paths: list[Path],
    rules: list[RuleBase],
    result: FileResult,
) -> None:
    clock = ManualClock(START_TIME)
    ledger = (
        Ledger.from_mainnet(clock=clock, seed=LEDGER_SEED)
        if test.ledger.from_ == "mainnet"
        else Ledger(clock=clock, seed=LEDGER_SEED)
    )
    seed_ledger(test.ledger, ledger, document)
    with (
        SimulatorServer(ledger) as server,
        tempfile.TemporaryDirectory(prefix="watcher-test-") as folder,
    ):
        reader = _RecordingReader(RpcClient(server.url, RpcSettings(max_attempts=1)))
        settings = _settings(Path(folder), server.url, rule_paths, rules)
        daemon = Daemon(settings, RuleSet(rules), clock=clock, ledger=reader)
        try:
            last_id = 0
            for index, step in enumerate(test.steps):
                clock.now += step.wait
                ledger.tick(int(step.wait / SLOT_SECONDS))
                for number, action in enumerate(step.actions):
                    apply_action(ledger, action, document, ("steps", index, "actions", number))
                reader.failures.clear()
                got = await _one_poll_of_everything(daemon, after_id=last_id)
                last_id = max([last_id, *(record.id for record in got)])
                result.steps.append(_verdict(index, step, document, got, reader.failures))
        finally:
            await daemon.close()
            await reader.aclose()  # brought to the daemon, so closed here


async def _one_poll_of_everything(daemon: Daemon, after_id: int) -> list[AlertRecord]:
    """One sweep of every job; the alerts committed by it, oldest first. Every target is polled
    at each step, whatever its rules' ``every`` and ``max_every``: a step is one poll of all."""
    with vote_accounts.sharing(vote_accounts.Tick()):  # a step is one tick of every job
        for job in daemon.ruleset.jobs():
            await daemon.sweep(replace(job, max_interval=None))
    history = await daemon.store.history(limit=HISTORY_LIMIT)
    return sorted((r for r in history if r.id > after_id), key=lambda record: record.id)


def _verdict(
    index: int, step: Step, document: YamlDocument, got: list[AlertRecord], failures: list[str]
) -> StepResult:
    missing, unexpected = match(step.expect, got)
    return StepResult(
        number=index + 1,
        name=step.name,
        line=document.line(("steps", index)),
        missing=missing,
        unexpected=unexpected,
        poll_failures=list(failures),
    )


def _settings(
    folder: Path, rpc_url: str, rule_paths: Sequence[Path], rules: Sequence[RuleBase]
) -> Settings:
    """Settings for the in-process daemon: the simulator, a temporary state file, and every
    channel the rules name (never sent to: no sender runs)."""
    names = sorted({name for rule in rules for name in (rule.notify or ())})
    return Settings.build(
        rpc_url=rpc_url,
        state_path=folder / "watcher.db",
        rules=list(rule_paths),
        channels={name: ["console://"] for name in names},
        rpc={"max_attempts": 1},
    )


# -- output ----------------------------------------------------------------------------------


def format_result(result: FileResult) -> str:
    if result.problems:
        return "\n".join(str(problem) for problem in result.problems)
    lines = []
    for step in result.steps:
        where = result.file if step.line is None else f"{result.file}:{step.line}"
        label = f"step {step.number}" + (f" ({step.name})" if step.name else "")
        lines.append(f"{where}: {label}: {'ok' if step.ok else 'FAILED'}")
        lines.extend(f"  poll failed: {failure}" for failure in step.poll_failures)
        if step.missing:
            lines.append("  expected, not notified:")
            lines.extend(f"    - {item.describe()}" for item in step.missing)
        if step.unexpected:
            lines.append("  notified, not expected:")
            lines.extend(f"    - {_describe_record(record)}" for record in step.unexpected)
    failed = sum(1 for step in result.steps if not step.ok)
    verdict = (
        f"{failed} of {_count(len(result.steps), 'step')} failed"
        if failed
        else (f"{_count(len(result.steps), 'step')} passed")
    )
    lines.append(f"{result.file}: {verdict}")
    return "\n".join(lines)


def _describe_record(record: AlertRecord) -> str:
    below = ", below the threshold" if BELOW_THRESHOLD_FACT in record.alert.facts else ""
    return (
        f"rule {record.alert.rule}, reason {record.alert.reason}, subject {record.alert.subject}, "
        f"title {record.alert.title!r}{below}"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
