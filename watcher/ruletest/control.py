"""Driving a served simulator with the rule tests' vocabulary (``watcher simulate``).

``watcher simulate --ledger FILE`` seeds the simulator from the ``ledger:`` section of a rule
test file (``watcher.ruletest.format.LedgerSetup``); ``watcher simulate tx ADDRESS`` and the other
action commands send one rule-test action (``Action``: ``add_transactions``, ``mark_delinquent``,
``set_node``... and every action a kind adds) to the running simulator's loopback control
endpoint (``POST /control``), which applies it to the ledger. One vocabulary for both: what a rule
test can do, a person at a terminal can do to a running simulator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from watcher.config.yamlpos import (
    describe_value,
    error_loc,
    error_message,
    load_yaml,
    user_errors,
)
from watcher.core.errors import ConfigError, Problem
from watcher.ruletest.actions import apply_to, seed_ledger
from watcher.ruletest.format import Action, LedgerSetup
from watcher.simulator import Ledger
from watcher.simulator.server import CONTROL_PATH

LEDGER_SEED = 7


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
    seed_ledger(setup, ledger, document)
    return ledger


def apply_control(ledger: Ledger, body: Any) -> str:
    """Apply one action sent to the control endpoint; returns what was done. Raises
    ``ValueError`` with a one-line reason for an action that is malformed or refused."""
    try:
        action = Action.model_validate(body)
    except ValidationError as exc:
        raise ValueError(error_message(user_errors(exc)[0], Action)) from None
    try:
        apply_to(ledger, action)
    except (LookupError, ValueError) as exc:
        reason = exc.args[0] if exc.args else type(exc).__name__
        raise ValueError(f"the ledger refused this: {reason}") from None
    [(name, value)] = action.model_dump(exclude_none=True, mode="json").items()
    return f"{name} {json.dumps(value, separators=(', ', ': '))}"


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
