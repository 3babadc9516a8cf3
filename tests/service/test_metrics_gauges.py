"""The gauges only some settings give a meaning are exported only with them: the heartbeat's
with ``heartbeat:`` (the start until a first ping is accepted, never a 0 read as 1970), the
shards' and instances' with a shared state; the reload gauges always, as Prometheus and
Alertmanager export theirs; and /healthz's verdict while the last reload is refused."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from watcher.alerting.builtin import RoundHealth, StateHealth
from watcher.service.metrics import Metrics, health_verdict
from watcher.state.interface import LeaseRound
from watcher.state.snapshot import Outbox

START = 1_764_300_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def samples(metrics: Metrics) -> dict[str, float]:
    text = metrics.exposition().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith(("watcher_heartbeat", "watcher_config", "watcher_shards"))
        or sample.name == "watcher_live_instances"
    }


def test_by_default_no_heartbeat_shard_or_instance_gauge_only_the_reload_ones() -> None:
    metrics = Metrics(Clock())
    metrics.heartbeat_accepted(START + 5)  # nothing to tell: no heartbeat configured
    metrics.lease_round(LeaseRound(1024, 0, 0, 0, 1, 0.01))  # SQLite's, were one told
    assert samples(metrics) == {
        "watcher_config_last_reload_successful": 1.0,
        "watcher_config_last_reload_success_timestamp_seconds": START,
    }


def test_the_heartbeat_gauge_is_the_start_until_a_ping_is_accepted() -> None:
    clock = Clock()
    metrics = Metrics(clock, heartbeat=True)
    assert samples(metrics)["watcher_heartbeat_last_success_timestamp_seconds"] == START
    metrics.heartbeat_accepted(START + 61)
    assert samples(metrics)["watcher_heartbeat_last_success_timestamp_seconds"] == START + 61


def test_a_shared_state_exports_the_shards_held_and_the_live_instances() -> None:
    metrics = Metrics(Clock(), shared_state=True)
    metrics.lease_round(LeaseRound(512, 512, 0, 0, 2, 0.01))
    found = samples(metrics)
    assert found["watcher_shards_held"] == 512
    assert found["watcher_live_instances"] == 2


def test_a_refused_reload_reads_0_and_keeps_the_last_successful_ones_time() -> None:
    clock = Clock()
    metrics = Metrics(clock)
    clock.now = START + 100
    metrics.reloaded(ok=False)
    assert samples(metrics) == {
        "watcher_config_last_reload_successful": 0.0,
        "watcher_config_last_reload_success_timestamp_seconds": START,
    }
    clock.now = START + 200
    metrics.reloaded(ok=True)
    assert samples(metrics) == {
        "watcher_config_last_reload_successful": 1.0,
        "watcher_config_last_reload_success_timestamp_seconds": START + 200,
    }


def test_healthz_is_unhealthy_while_the_last_reload_is_refused() -> None:
    quiet = Outbox(0, None, 0)
    health = (RoundHealth(), StateHealth(down_for_limit=60.0), quiet, START, 300.0)
    assert health_verdict(*health).healthy
    refused = health_verdict(*health, reload_refused=True)
    assert not refused.healthy
    assert refused.reason.startswith("last reload refused")
