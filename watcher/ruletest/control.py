"""Driving a served simulator with the rule tests' vocabulary (``watcher simulate``).

``watcher simulate --ledger FILE`` seeds the simulator from the ``ledger:`` section of a rule
test file (``watcher.ruletest.format.LedgerSetup``); ``watcher simulate tx ADDRESS`` and the other
action commands send one rule-test action (``Action``: ``add_transactions``, ``mark_delinquent``,
``set_node``... and every action a kind adds) to the running simulator's loopback control
endpoint (``POST /control``), which applies it to the ledger. One vocabulary for both: what a rule
test can do, a person at a terminal can do to a running simulator. The endpoint also takes what
is not the ledger's but its endpoint's: ``{fault: {kind, for, count, method, delay}}`` and
``{clear_faults: true}`` (``watcher simulate fault``, ``slow``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from watcher.config.rule_models import PositiveDuration
from watcher.config.yamlpos import (
    describe_value,
    error_loc,
    error_message,
    load_yaml,
    user_errors,
)
from watcher.core.durations import format_duration
from watcher.core.errors import ConfigError, Problem
from watcher.ruletest.actions import apply_to, seed_ledger
from watcher.ruletest.format import Action, LedgerSetup
from watcher.simulator import Ledger
from watcher.simulator.server import CONTROL_PATH

LEDGER_SEED = 7
# The endpoint's faults a person can start from a terminal (the fuzzers' raw_http and
# rewrite_result take Python values): short names for the HTML error pages.
FAULT_NAMES: Final = {
    "http_429": "http_429",
    "http_502": "http_502_html",
    "http_503": "http_503_html",
    "http_502_html": "http_502_html",
    "http_503_html": "http_503_html",
    "garbage": "garbage",
    "truncated_json": "truncated_json",
    "timeout": "timeout",
    "rpc_error": "rpc_error",
    "rpc_429": "rpc_429",
    "wrong_shape": "wrong_shape",
}
FaultName = Literal[
    "http_429",
    "http_502",
    "http_503",
    "http_502_html",
    "http_503_html",
    "garbage",
    "truncated_json",
    "timeout",
    "rpc_error",
    "rpc_429",
    "wrong_shape",
]


class _LedgerSection(BaseModel):
    """A file's ``ledger:`` section; its other keys (rule_files, steps) are not read here."""

    ledger: LedgerSetup


def ledger_from_file(path: Path) -> Ledger:
    """A live ledger (wall clock) seeded from the ``ledger:`` section of a rule test file (or
    of any YAML file with that key). Raises ``ConfigError`` with ``FILE:LINE`` problems."""
    document = load_yaml(path)
    data = document.data
    if not isinstance(data, dict) or "ledger" not in data:
        got = "an empty file" if data is None else describe_value(data)
        message = f"expected a mapping with a 'ledger:' section (as in a rule test), got {got}"
        raise ConfigError([Problem(document.file, document.line(()), message)])
    try:
        setup = _LedgerSection.model_validate({"ledger": data["ledger"] or {}}).ledger
    except ValidationError as exc:
        problems = [
            document.problem(error_loc(error), error_message(error, _LedgerSection))
            for error in user_errors(exc)
        ]
        raise ConfigError(problems) from None
    ledger = (
        Ledger.from_mainnet(seed=LEDGER_SEED)
        if setup.from_ == "mainnet"
        else Ledger(seed=LEDGER_SEED)
    )
    ledger.follow_wall_clock()  # before seeding: what is seeded lands at today's slots
    seed_ledger(setup, ledger, document)
    return ledger


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Fault(_Strict):
    """The endpoint fails (or answers slowly: ``timeout`` with ``delay``) for ``count``
    requests, or for every request during ``for``; only calls of ``method`` when given."""

    kind: FaultName
    for_: PositiveDuration | None = Field(default=None, alias="for")
    count: Annotated[int, Field(ge=1)] | None = None
    method: str | None = None
    delay: PositiveDuration | None = None  # timeout: seconds before answering (default 30 s)


class EndpointControl(_Strict):
    """What the control endpoint takes beside the ledger's actions: one key."""

    fault: Fault | None = None
    clear_faults: Literal[True] | None = None


def apply_control(ledger: Ledger, body: Any) -> str:
    """Apply one action sent to the control endpoint; returns what was done. Raises
    ``ValueError`` with a one-line reason for an action that is malformed or refused."""
    if isinstance(body, dict) and len(body) == 1 and set(body) <= set(EndpointControl.model_fields):
        return _control_endpoint(ledger, body)
    try:
        action = Action.model_validate(body)
    except ValidationError as exc:
        raise ValueError(error_message(user_errors(exc)[0], Action)) from None
    try:
        landed = apply_to(ledger, action)
    except (LookupError, ValueError) as exc:
        reason = exc.args[0] if exc.args else type(exc).__name__
        raise ValueError(f"the ledger refused this: {reason}") from None
    [(name, value)] = echo(action).items()
    said = f"{name} {json.dumps(value, separators=(', ', ': '))}"
    if len(landed) == 1:
        said += f": signature {landed[0]}"
    elif landed:
        said += f": {len(landed)} transactions, the newest {landed[0]}"
    return said


def echo(model: BaseModel) -> dict[str, Any]:
    """What ``model`` says to do, as JSON values: every key given (``null`` included: it
    removes a value) and every default that does something; a key left out that keeps the
    value as it is (unset, ``None``) is not shown."""
    dumped = model.model_dump(mode="json", by_alias=True)
    shown: dict[str, Any] = {}
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if value is None and name not in model.model_fields_set:
            continue
        key = field.alias or name
        shown[key] = echo(value) if isinstance(value, BaseModel) else dumped[key]
    return shown


def _control_endpoint(ledger: Ledger, body: dict[str, Any]) -> str:
    try:
        control = EndpointControl.model_validate(body)
    except ValidationError as exc:
        raise ValueError(error_message(user_errors(exc)[0], EndpointControl)) from None
    if control.clear_faults:
        ledger.faults.clear()
        return "clear_faults: the endpoint answers again"
    fault = control.fault
    assert fault is not None  # one key, and not clear_faults
    if fault.delay is not None and fault.kind != "timeout":
        raise ValueError(f"delay is for a slow endpoint (timeout), not {fault.kind}")
    if fault.for_ is not None and fault.count is not None:
        raise ValueError("give for or count, not both")
    kind = FAULT_NAMES[fault.kind]
    options: dict[str, Any] = {} if fault.delay is None else {"seconds": fault.delay}
    ledger.faults.inject(
        kind, method=fault.method, count=fault.count or 1, for_seconds=fault.for_, **options
    )
    what = kind if fault.delay is None else f"{kind} (answers after {format_duration(fault.delay)})"
    count = fault.count or 1
    plural = "s" if count > 1 and fault.for_ is None else ""
    calls = f"request{plural}" if fault.method is None else f"call{plural} of {fault.method}"
    if fault.for_ is not None:
        return f"fault {what}: every {calls} for {format_duration(fault.for_)}"
    return f"fault {what}: the next {count} {calls}"


def send_action(port: int, action: dict[str, Any], *, host: str = "127.0.0.1") -> str:
    """Send one action to a running simulator; returns its answer. Raises ``ValueError`` with a
    one-line reason when nothing listens there or the simulator refused the action."""
    url = f"http://{host}:{port}{CONTROL_PATH}"
    try:
        answer = httpx.post(url, json=action, timeout=10.0)
    except httpx.HTTPError:
        raise ValueError(
            f"no simulator answers on {host}:{port} (start one with `watcher simulate`)"
        ) from None
    try:
        said = answer.json()
    except ValueError:
        said = {}
    if answer.status_code != 200 or not isinstance(said, dict) or "done" not in said:
        reason = said.get("error") if isinstance(said, dict) else None
        if not isinstance(reason, str):  # not our control endpoint answering
            reason = f"no control endpoint there (HTTP {answer.status_code})"
        raise ValueError(reason)
    return str(said["done"])
