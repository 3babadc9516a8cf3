"""A throwaway Prometheus server for tests: ``with Prometheus.start([Scrape(...)]) as prom:``.

The binary is Debian's ``prometheus`` on PATH; ``make test`` installs the package when it is
missing (``deploy/ensure-monitoring``). The server runs in a temporary folder (its generated
configuration, its TSDB, its log), listens on a free loopback port, scrapes the given targets
every second (``scrape_interval``) and is stopped (SIGTERM, then SIGKILL) and deleted at the end.
``query`` runs an instant query (``/api/v1/query``) and ``wait`` polls one until its result
satisfies a condition: never a fixed sleep.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from watcher.testing.net import free_port

START_SECONDS = 30
STOP_SECONDS = 10
PORT_ATTEMPTS = 3  # a free port taken by another process between our probe and its bind

Sample = dict[str, Any]  # one series of a query's result: {"metric": {...}, "value": [t, "v"]}


class PrometheusMissing(RuntimeError):
    """No ``prometheus`` binary on PATH."""


class QueryError(RuntimeError):
    """Prometheus refused a query (a PromQL error: ``bad_data``, ``execution``...)."""


@dataclass(frozen=True)
class Scrape:
    """One scrape job: its name, its ``host:port`` targets and the labels added to them (as an
    operator's ``static_configs`` adds ``app`` or ``hostname``)."""

    job: str
    targets: Sequence[str]
    labels: Mapping[str, str] = field(default_factory=dict)
    metrics_path: str = "/metrics"


def find_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        raise PrometheusMissing(
            "prometheus was not found on PATH: run deploy/ensure-monitoring "
            "(apt-get install prometheus), as `make test` does"
        )
    return found


def config(scrapes: Sequence[Scrape], interval: str, rule_files: Sequence[Path] = ()) -> str:
    """The generated ``prometheus.yml``."""
    document: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            {
                "job_name": scrape.job,
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "metrics_path": scrape.metrics_path,
                "static_configs": [
                    {"targets": list(scrape.targets), "labels": dict(scrape.labels)}
                ],
            }
            for scrape in scrapes
        ],
    }
    return yaml.safe_dump(document, sort_keys=False)


@dataclass
class Prometheus:
    """A running throwaway server."""

    folder: Path
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "prometheus.log"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``'s ``data``; a refused query raises ``QueryError``."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:  # 400 bad_data, 422 execution, 503 timeout
            body = json.loads(exc.read() or b"{}")
            raise QueryError(
                f"{params}: {body.get('errorType', exc.code)}: {body.get('error', '')}"
            ) from None
        if body.get("status") != "success":
            raise QueryError(f"{params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[Sample]:
        """An instant query now: the series of its vector result (a scalar: one, no labels)."""
        data = self.api("query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: list[Sample] = data["result"]
        return result

    def wait(
        self,
        expr: str,
        condition: Callable[[list[Sample]], bool] = bool,
        timeout: float = 15.0,
    ) -> list[Sample]:
        """Runs ``expr`` every 100 ms until its result satisfies ``condition`` (by default: any
        series at all), and returns that result; fails with the last result at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if condition(result):
                return result
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting on {expr!r}; last result: {result}"
                )
            time.sleep(0.1)

    def wait_scraped(self, job: str, timeout: float = 15.0) -> None:
        """Until every target of ``job`` has been scraped successfully once."""
        self.wait(
            f'up{{job="{job}"}}',
            lambda result: bool(result) and all(s["value"][1] == "1" for s in result),
            timeout,
        )

    @classmethod
    @contextmanager
    def start(
        cls,
        scrapes: Sequence[Scrape],
        *,
        interval: str = "1s",
        rule_files: Sequence[Path] = (),
    ) -> Iterator[Prometheus]:
        binary = find_binary()
        folder = Path(tempfile.mkdtemp(prefix="watcher-prom-"))
        try:
            (folder / "prometheus.yml").write_text(config(scrapes, interval, rule_files))
            server = cls._launch(binary, folder)
            try:
                yield server
            finally:
                server._stop()
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    @classmethod
    def _launch(cls, binary: str, folder: Path) -> Prometheus:
        for attempt in range(PORT_ATTEMPTS):
            port = free_port()
            with (folder / "prometheus.log").open("ab") as log:
                proc = subprocess.Popen(
                    [
                        binary,
                        f"--config.file={folder / 'prometheus.yml'}",
                        f"--storage.tsdb.path={folder / 'data'}",
                        f"--web.listen-address=127.0.0.1:{port}",
                        "--log.level=warn",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=folder,
                )
            server = cls(folder, port, proc)
            if server._wait_ready():
                return server
            server._stop()
            if "address already in use" not in server.output() or attempt == PORT_ATTEMPTS - 1:
                break
        raise RuntimeError(f"prometheus did not become ready:\n{server.output()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return True
            except OSError:
                pass  # not listening yet, or 503 while it replays its (empty) WAL
            time.sleep(0.05)
        return False

    def _stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
