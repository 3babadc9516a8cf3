"""End to end, a refused reload is seen by monitoring, not only in the log: a real `watcher run`
(http.listen) scraped every second by a real Prometheus that runs the shipped rules. A broken
rule file sent with SIGHUP turns `watcher_config_last_reload_successful` to 0 and
WatcherReloadFailed pending, /healthz to 503 and `watcher status --health` to exit 1; the file
fixed and sent again turns them all back, with a later success time."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from watcher.testing.daemon import tx_rule
from watcher.testing.net import free_port
from watcher.testing.prometheus import Prometheus, Sample, Scrape
from watcher.testing.receivers import wait_until

from support.world import TREASURY, World, make_world, small_cluster

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "watcher-rules.yml"
JOB = "watcher"
WATCHER = (sys.executable, "-m", "watcher")
RELOADED = f'watcher_config_last_reload_successful{{job="{JOB}"}}'
RELOADED_AT = f'watcher_config_last_reload_success_timestamp_seconds{{job="{JOB}"}}'
ALERT = 'ALERTS{alertname="WatcherReloadFailed"}'
BROKEN = (
    f"rules:\n  - name: treasury\n    kind: new_transactions\n"
    f"    addresses: [{TREASURY}]\n    every: banana\n"
)


@dataclass
class Watched:
    world: World
    prom: Prometheus
    listen: str

    def rules_file(self, text: str) -> None:
        (self.world.config.parent / "rules" / "rules.yaml").write_text(text)
        assert self.world.daemon.proc is not None
        self.world.daemon.proc.send_signal(signal.SIGHUP)

    def healthz(self) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://{self.listen}/healthz", timeout=5) as answer:
                return answer.status, answer.read().decode().strip()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode().strip()

    def status_health(self) -> subprocess.CompletedProcess[str]:
        """`watcher status --health`, as an operator's probe runs it (the state only)."""
        return subprocess.run(
            [*WATCHER, "status", "--health", "--config", str(self.world.config)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[Watched]:
    listen = f"127.0.0.1:{free_port()}"
    rules = [{**tx_rule(TREASURY), "every": "200ms"}]
    for world in make_world(tmp_path, small_cluster(), rules=rules, http={"listen": listen}):
        world.daemon.start()
        with Prometheus.start([Scrape(JOB, [listen])], rule_files=[RULES]) as prom:
            yield Watched(world, prom, listen)
        assert world.daemon.stop() == 0


def reads(value: str) -> Callable[[list[Sample]], bool]:
    return lambda result: [s["value"][1] for s in result] == [value]


def test_a_refused_reload_turns_the_gauge_the_rule_healthz_and_status_health_until_fixed(
    watched: Watched,
) -> None:
    prom = watched.prom
    prom.wait_scraped(JOB)
    prom.wait(RELOADED, reads("1"))
    loaded_at = float(prom.wait(RELOADED_AT)[0]["value"][1])
    watched.world.wait_polls("getSignaturesForAddress", 2)
    healthy = watched.status_health()
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert watched.healthz() == (200, "ok")

    watched.rules_file(BROKEN)
    prom.wait(RELOADED, reads("0"))
    # Pending at once (its `for:` is 5 minutes): Prometheus has the rule's expression true.
    pending: list[Sample] = prom.wait(ALERT)
    assert pending[0]["metric"]["alertstate"] == "pending"
    assert pending[0]["metric"]["instance"] == watched.listen
    assert float(prom.query(RELOADED_AT)[0]["value"][1]) == loaded_at  # the last success's
    status, body = watched.healthz()
    assert status == 503 and body.startswith("last reload refused"), body
    refused = watched.status_health()
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "was refused: the settings and rules on disk are not those running" in refused.stderr
    assert "config: last reload refused" in refused.stdout
    watched.world.daemon.assert_alive()

    watched.rules_file(yaml.safe_dump({"rules": [{**tx_rule(TREASURY), "every": "200ms"}]}))
    prom.wait(RELOADED, reads("1"))
    prom.wait(ALERT, lambda result: not result)
    assert float(prom.query(RELOADED_AT)[0]["value"][1]) > loaded_at
    assert watched.healthz() == (200, "ok")
    fixed = wait_until(
        lambda: (done := watched.status_health()).returncode == 0 and done,
        15,
        "status --health to be healthy again",
    )
    assert "config:" not in fixed.stdout
