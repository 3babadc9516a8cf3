"""deploy/prometheus/watcher-rules.yml: promtool parses it (PromQL, templates) and its unit tests
(watcher-rules.test.yml: each alert firing, and not firing) pass; a real Prometheus loads it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from watcher.testing.prometheus import Prometheus, QueryError

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "watcher-rules.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "watcher-rules.test.yml"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("promtool is not on PATH: run deploy/ensure-monitoring, as `make test` does")
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, cwd=RULES.parent, timeout=60, check=False
    )


def alerts() -> list[dict[str, object]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout


def test_the_rules_unit_tests_pass() -> None:
    done = promtool("test", "rules", str(RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_healthy_case_without_heartbeat_fails_on_a_heartbeat_exported_as_0(
    tmp_path: Path,
) -> None:
    """The healthy case's clock is a real one: were the heartbeat's gauge exported as 0 without
    ``heartbeat:`` (as it once was), WatcherHeartbeatStale would fire there and the tests fail."""
    document = yaml.safe_load(RULE_TESTS.read_text())
    healthy = document["tests"][0]
    series = [given["series"] for given in healthy["input_series"]]
    assert not any("heartbeat" in name for name in series)
    healthy["input_series"].append(
        {
            "series": 'watcher_heartbeat_last_success_timestamp_seconds{job="watcher", '
            'instance="a:9108"}',
            "values": "0x40",
        }
    )
    document["rule_files"] = [str(RULES)]
    broken = tmp_path / "rules.test.yml"
    broken.write_text(yaml.safe_dump(document))
    done = promtool("test", "rules", str(broken))
    assert done.returncode != 0
    assert "alertname: WatcherHeartbeatStale, time: 30m" in done.stdout + done.stderr
    assert "no heartbeat for 20" in done.stdout + done.stderr  # 20418 days and some


def test_every_alert_is_tested_firing_and_quiet_with_for_severity_and_wording() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    cases = [case for test in tests for case in test["alert_rule_test"]]
    for rule in alerts():
        name = rule["alert"]
        assert rule.get("for"), name
        labels, annotations = rule["labels"], rule["annotations"]
        assert isinstance(labels, dict) and labels["severity"] in ("critical", "warning"), name
        assert isinstance(annotations, dict), name
        assert {"summary", "description"} <= annotations.keys(), name
        mine = [case for case in cases if case["alertname"] == name]
        assert any(case["exp_alerts"] for case in mine), f"{name} never tested firing"
        assert any(not case["exp_alerts"] for case in mine), f"{name} never tested quiet"


def test_a_real_prometheus_loads_the_rules() -> None:
    with Prometheus.start([], rule_files=[RULES]) as prom:
        groups = prom.api("rules")["groups"]
        loaded = [rule["name"] for group in groups for rule in group["rules"]]
        assert loaded == [rule["alert"] for rule in alerts()]
        # With nothing scraped, the watcher's job is absent: WatcherDown is pending at once.
        pending = prom.wait('ALERTS{alertname="WatcherDown"}')
        assert pending[0]["metric"]["alertstate"] == "pending"
        with pytest.raises(QueryError, match="bad_data"):
            prom.query("sum(")
