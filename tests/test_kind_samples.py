"""`watcher check` renders the templates of balance_below, fee_above, supply_changed and
account_changed rules against sample alerts of every transition of their kind."""

from __future__ import annotations

from typing import Any

import pytest

from watcher.config.template_check import sample_alerts, template_problems
from watcher.kinds import RULE_MODELS
from watcher.ledger.simulator.accounts import sample_message

KEY = "9aB71bqATWmsKrhhTJUM8UHQWyTL8y61nVfZbXLkoGmY"
RULES: list[tuple[dict[str, Any], list[str]]] = [
    ({"kind": "balance_below", "accounts": [KEY], "min_sol": 1, "repeat": "1h"},
     ["firing", "repeat", "resolved"]),
    ({"kind": "balance_below", "token_accounts": [KEY], "min_amount": 5},
     ["firing", "resolved"]),
    ({"kind": "fee_above", "message": sample_message(), "max_lamports": 5000},
     ["firing", "resolved"]),
    ({"kind": "supply_changed", "mints": [KEY]}, ["event"]),
    ({"kind": "account_changed", "accounts": [KEY]}, ["event", "event"]),
]  # fmt: skip


def rule(fields: dict[str, Any], **templates: str) -> Any:
    return RULE_MODELS[fields["kind"]].model_validate({"name": "r", **fields, **templates})


@pytest.mark.parametrize(("fields", "reasons"), RULES)
def test_every_transition_has_a_sample(fields: dict[str, Any], reasons: list[str]) -> None:
    assert [alert.reason for alert in sample_alerts(rule(fields))] == reasons


@pytest.mark.parametrize(("fields", "reasons"), RULES)
def test_a_template_failing_on_a_sample_is_reported(
    fields: dict[str, Any], reasons: list[str]
) -> None:
    assert template_problems([rule(fields, title="{{ subject }} {{ reason }}")]) == []
    [problem] = template_problems([rule(fields, body="{{ subject + 1 }}")])
    assert "rule 'r'" in str(problem)
