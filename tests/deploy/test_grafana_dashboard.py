"""deploy/grafana/watcher-dashboard.json: what deploy/grafana/dashboard.py generates (they never
drift), and provisionable by Grafana 10 and 11 (schemaVersion 39, a Prometheus data source
variable, every query through it). Its queries run against real data in
tests/e2e/test_e2e_dashboard.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "deploy" / "grafana" / "dashboard.py"
COMMITTED = REPO / "deploy" / "grafana" / "watcher-dashboard.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("watcher_dashboard", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def committed() -> dict[str, Any]:
    board: dict[str, Any] = json.loads(COMMITTED.read_text())
    return board


def test_the_committed_json_is_what_the_generator_makes() -> None:
    assert COMMITTED.read_text() == generator().render(), (
        "deploy/grafana/watcher-dashboard.json is stale: run "
        ".venv/bin/python deploy/grafana/dashboard.py > deploy/grafana/watcher-dashboard.json"
    )


def test_grafana_10_and_11_provision_it() -> None:
    board = committed()
    assert board["schemaVersion"] == 39
    assert board["uid"] == "watcher" and board["title"] == "watcher"
    # A classic dashboard, not Grafana 12's v2 schema (apiVersion/kind/spec, elements, layout).
    assert not {"apiVersion", "kind", "spec", "elements", "layout"} & board.keys()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("job", "instance"):
        assert variables[name]["type"] == "query" and variables[name]["datasource"] == DATASOURCE
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["type"] in ("timeseries", "stat", "table"), panel["title"]
        assert panel["datasource"] == DATASOURCE and panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert 'job="$job", instance=~"$instance"' in target["expr"], panel["title"]


def test_it_has_a_row_for_each_thing_watched() -> None:
    rows = [panel["title"] for panel in committed()["panels"] if panel["type"] == "row"]
    assert rows == [
        "Watcher health",
        "Firing alerts",
        "Validators",
        "Validator admission ticket (VAT)",
        "Cluster",
        "Nodes",
        "Balances",
        "Tokens",
    ]


def test_a_stat_of_a_gauge_only_some_settings_export_says_why_it_is_empty() -> None:
    """Without heartbeat: or state_url the gauge is not there at all: the stat names why, not
    "No data" (nor a 0, nor 56 years since the heartbeat)."""
    said = {
        panel["title"]: panel["fieldConfig"]["defaults"].get("noValue")
        for panel in committed()["panels"]
        if panel["type"] == "stat"
    }
    assert said["Since the last heartbeat"] == "no heartbeat configured"
    assert said["Shards held"] == said["Live instances"] == "one instance (no state_url)"
