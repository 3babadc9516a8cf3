"""`watcher check` renders the templates of a rule against sample alerts of every transition of
its kind: the account and DAS kinds here, every kind through the example rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from watcher.checks.templates import sample_alerts, template_problems
from watcher.kinds import KINDS, RULE_MODELS
from watcher.kinds.rule_files import load_rules
from watcher.simulator.accounts import sample_message

KEY = "9aB71bqATWmsKrhhTJUM8UHQWyTL8y61nVfZbXLkoGmY"
RULES: list[tuple[dict[str, Any], list[str]]] = [
    (
        {"kind": "balance_below", "accounts": [KEY], "min_sol": 1, "repeat": "1h"},
        ["firing", "repeat", "resolved"],
    ),
    ({"kind": "balance_below", "token_accounts": [KEY], "min_amount": 5}, ["firing", "resolved"]),
    (
        {"kind": "fee_above", "message": sample_message(), "max_lamports": 5000},
        ["firing", "resolved"],
    ),
    ({"kind": "supply_changed", "mints": [KEY]}, ["event"]),
    ({"kind": "account_changed", "accounts": [KEY]}, ["event", "event"]),
]


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


DAS_RULES: list[tuple[dict[str, Any], list[str]]] = [
    ({"kind": "token_accounts", "owners": [KEY]}, ["event"]),
    ({"kind": "token_accounts", "owners": [KEY], "mints": [KEY]}, ["event"]),
    ({"kind": "new_assets", "collection": KEY}, ["event"]),
    ({"kind": "new_assets", "search": {"ownerAddress": KEY}}, ["event"]),
    ({"kind": "program_accounts", "program": KEY}, ["event", "event"]),
    ({"kind": "asset_changed", "assets": [KEY]}, ["event"]),
    ({"kind": "new_editions", "mints": [KEY]}, ["event", "event"]),
]


@pytest.mark.parametrize(("fields", "reasons"), DAS_RULES)
def test_the_das_kinds_have_samples_and_their_templates_are_checked(
    fields: dict[str, Any], reasons: list[str]
) -> None:
    assert [alert.reason for alert in sample_alerts(rule(fields))] == reasons
    assert template_problems([rule(fields, title="{{ subject }}: {{ count }}")]) == []
    [problem] = template_problems([rule(fields, body="{{ count + 'x' }}")])
    assert "rule 'r'" in str(problem)


def test_every_example_rule_has_samples_and_the_examples_cover_every_kind() -> None:
    """A kind without samples would have its templates go unchecked by `watcher check`."""
    repo = Path(__file__).resolve().parents[2]
    examples = load_rules(sorted((repo / "rules").glob("*.yaml")), channels=None)
    assert {rule.kind for rule in examples} == set(KINDS)
    assert [rule.name for rule in examples if not sample_alerts(rule)] == []
