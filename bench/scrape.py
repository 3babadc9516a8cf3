"""The scrape's cost: `/metrics` with 1,000 validators and 10,000 watched balances, scraped while
the sweeps run.

The real simulator (`watcher simulate --ledger`, a process of its own answering after 30 ms)
holds 1,000 vote accounts (one in 50 delinquent) and 10,000 accounts with balances (one in 100
under the rule's minimum); the real daemon (`watcher run`, ``http.listen`` on a free loopback
port) watches all of them with one ``delinquent_validators`` rule (every 2 s) and one
``balance_below`` rule (every 3 s), so that sweeps run all through the measurement. Its firing
alerts go to a real json:// receiver.

Once every series is on `/metrics`, two phases, each over the same sweeps:

1. quiet: no scrape for ``--quiet`` seconds (one scrape at each end reads the lag histogram);
2. scraping: ``--scrapes`` scrapes, ``--rate`` a second, timed by the client (request to the
   last byte of the body), each checked for its series.

Inside the daemon, ``watcher_event_loop_lag_seconds`` (``watcher.service.loop_lag``: how late a
tick every 100 ms woke; ``http.loop_lag_every: 100ms`` here) tells how long work held its event
loop; the stall *from the scrapes* is what the scraping phase has beyond the quiet one.
Targets: p99 under 100 ms per scrape, and no tick later than 20 ms beyond what the quiet phase
shows (more ticks over 20 ms than the quiet phase's rate predicts, plus twice its Poisson noise
and one, fails).

    python bench/scrape.py [--quick] [--scrapes N] [--rate R] [--quiet S]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import DaemonProcess, Receiver, Table, wait_for, write_config  # noqa: E402
from daemon_run import Simulator, cpu_seconds, free_port  # noqa: E402

from watcher.simulator.keys import derived_pubkey  # noqa: E402

LATENCY = 0.03
LAG = "watcher_event_loop_lag_seconds"
STALL = 0.02  # seconds: a tick later than this is a stall
P99_TARGET = 0.1
SOL = 10**9


@dataclass(frozen=True)
class Size:
    validators: int
    accounts: int
    scrapes: int
    rate: float  # scrapes a second
    quiet: float  # seconds without scrapes


FULL = Size(1000, 10_000, 200, 4.0, 45.0)
QUICK = Size(100, 1000, 60, 4.0, 15.0)


@dataclass
class Lag:
    """The daemon's lag histogram as one scrape read it: cumulative counts by bound."""

    buckets: dict[float, float]
    count: float
    total: float

    def minus(self, before: Lag) -> Lag:
        return Lag(
            {le: n - before.buckets.get(le, 0.0) for le, n in self.buckets.items()},
            self.count - before.count,
            self.total - before.total,
        )

    def over(self, seconds: float) -> int:
        """Ticks later than ``seconds`` (a bucket's bound)."""
        return round(self.count - self.buckets[seconds])

    def highest(self) -> str:
        """The bound of the highest bucket holding a tick: the latest tick was at most that."""
        below = 0.0
        for le in sorted(self.buckets):
            if self.buckets[le] >= self.count:
                return "none" if self.count == 0 else f"<= {le * 1000:g} ms"
            below = le
        return f"> {below * 1000:g} ms"


def read_lag(text: str) -> Lag:
    buckets = {
        float(le): float(n)
        for le, n in re.findall(rf'^{LAG}_bucket{{le="([^"+]+)"}} (\S+)$', text, re.MULTILINE)
    }
    count = re.search(rf"^{LAG}_count (\S+)$", text, re.MULTILINE)
    total = re.search(rf"^{LAG}_sum (\S+)$", text, re.MULTILINE)
    if not buckets or count is None or total is None:
        raise RuntimeError(f"{LAG} is not on /metrics")
    return Lag(buckets, float(count.group(1)), float(total.group(1)))


def series_of(text: str, name: str) -> int:
    return text.count(f"\n{name}{{")


def series_count(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


@dataclass
class Phase:
    seconds: float = 0.0
    cpu_s: float = 0.0  # the daemon's CPU over the phase
    lag: Lag | None = None
    rounds: Counter[str] = field(default_factory=Counter)  # sweeps ended, by source
    longest_round: float = 0.0


@dataclass
class Figures:
    size: Size
    latencies: list[float] = field(default_factory=list)  # seconds, one per scrape
    body_bytes: int = 0
    series: int = 0
    balances: int = 0
    delinquent: int = 0
    incomplete: int = 0  # scrapes missing some of the series
    quiet: Phase = field(default_factory=Phase)
    scraping: Phase = field(default_factory=Phase)
    problem: str | None = None

    def percentile(self, share: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


def ledger_section(size: Size) -> tuple[dict[str, Any], list[str], list[str]]:
    """1 vote account in 50 delinquent, 1 balance in 100 under the rule's minimum (1 SOL)."""
    votes = [derived_pubkey(f"scrape vote {i}") for i in range(size.validators)]
    validators = [
        {
            "vote": vote,
            "identity": derived_pubkey(f"scrape node {i}"),
            "stake": (1000 + i) * SOL,
            "delinquent": i % 50 == 0,
            "commission": 5,
        }
        for i, vote in enumerate(votes)
    ]
    addresses = [derived_pubkey(f"scrape account {i}") for i in range(size.accounts)]
    accounts = [
        {"address": address, "lamports": SOL // 2 if i % 100 == 0 else 2 * SOL + i}
        for i, address in enumerate(addresses)
    ]
    return {"validators": validators, "accounts": accounts}, votes, addresses


def rounds_in(log: Path) -> list[tuple[str, float]]:
    """(source, duration) of every round line of the daemon's JSON log so far."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if '"round"' in line:
            source = re.search(r'"source": ?"([^"]+)"', line)
            duration = re.search(r'"duration": ?([0-9.]+)', line)
            if source and duration:
                found.append((source.group(1), float(duration.group(1))))
    return found


class Scraper:
    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(timeout=30)

    def get(self) -> tuple[float, str]:
        started = time.perf_counter()
        answer = self.client.get(self.url)
        body = answer.content
        seconds = time.perf_counter() - started
        answer.raise_for_status()
        return seconds, body.decode()

    def close(self) -> None:
        self.client.close()


def measure(size: Size) -> Figures:
    figures = Figures(size)
    section, votes, addresses = ledger_section(size)
    rules: list[dict[str, Any]] = [
        {
            "name": "validators",
            "kind": "delinquent_validators",
            "validators": votes,
            "every": "2s",
            "notify": ["ops"],
        },
        {
            "name": "balances",
            "kind": "balance_below",
            "accounts": addresses,
            "min_sol": 1,
            "every": "3s",
            "notify": ["ops"],
        },
    ]
    with tempfile.TemporaryDirectory(prefix="watcher-bench-") as tmp, Receiver() as receiver:
        folder = Path(tmp)
        sim = Simulator(folder, [], LATENCY, ledger_section=section)
        port = free_port()
        config = write_config(
            folder,
            rpc_url=sim.url,
            channels={"ops": [receiver.url]},
            rules=rules,
            extra={
                "rpc": {"batch_size": 10, "max_concurrency": 8},
                # A tick every 100 ms (0.5 s by default): five times the ticks to count stalls by.
                "http": {"listen": f"127.0.0.1:{port}", "loop_lag_every": "100ms"},
            },
        )
        daemon = DaemonProcess(config).start()
        scraper = Scraper(f"http://127.0.0.1:{port}/metrics")
        try:
            run_phases(figures, daemon, scraper)
        finally:
            scraper.close()
            daemon.kill()
            sim.stop()
    return figures


def run_phases(figures: Figures, daemon: DaemonProcess, scraper: Scraper) -> None:
    size = figures.size
    assert daemon.proc is not None
    pid = daemon.proc.pid

    def complete() -> bool:
        try:
            _, text = scraper.get()
        except httpx.HTTPError:
            return False
        return (
            series_of(text, "solana_account_balance") == size.accounts
            and series_of(text, "solana_validator_delinquent") == size.validators
        )

    if not wait_for(complete, 300, step=1.0):
        daemon.assert_alive()
        figures.problem = "the series never all showed on /metrics (300 s)"
        return
    time.sleep(2 * 3.0)  # a few sweeps of both sources before measuring

    def phase_start() -> tuple[float, float, int, Lag]:
        _, text = scraper.get()
        return time.monotonic(), cpu_seconds(pid), len(rounds_in(daemon.log_path)), read_lag(text)

    def phase_end(phase: Phase, start: tuple[float, float, int, Lag], text: str) -> None:
        began, cpu, rounds, lag = start
        phase.seconds = time.monotonic() - began
        phase.cpu_s = cpu_seconds(pid) - cpu
        phase.lag = read_lag(text).minus(lag)
        ended = rounds_in(daemon.log_path)[rounds:]
        phase.rounds = Counter(source for source, _ in ended)
        phase.longest_round = max((duration for _, duration in ended), default=0.0)

    start = phase_start()
    time.sleep(size.quiet)
    _, text = scraper.get()
    phase_end(figures.quiet, start, text)

    start = phase_start()
    began = time.monotonic()
    for i in range(size.scrapes):
        delay = began + i / size.rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        seconds, text = scraper.get()
        figures.latencies.append(seconds)
        balances = series_of(text, "solana_account_balance")
        delinquent = series_of(text, "solana_validator_delinquent")
        figures.incomplete += balances != size.accounts or delinquent != size.validators
    phase_end(figures.scraping, start, text)
    daemon.assert_alive()
    figures.body_bytes = len(text.encode())
    figures.series = series_count(text)
    figures.balances = series_of(text, "solana_account_balance")
    figures.delinquent = series_of(text, "solana_validator_delinquent")


def stall_allowance(quiet: Lag, scraping: Lag) -> tuple[float, float]:
    """The quiet phase's count of late ticks scaled to the scraping phase's ticks, and what the
    scraping phase may have before a stall is put down to the scrapes: that, plus twice its
    Poisson noise, plus one."""
    expected = quiet.over(STALL) * scraping.count / max(1.0, quiet.count)
    return expected, expected + 2 * math.sqrt(expected) + 1


def report(figures: Figures) -> Table:
    size = figures.size
    table = Table(
        f"the scrape's cost: /metrics with {size.validators:,} validators and "
        f"{size.accounts:,} balances, {size.scrapes} scrapes at {size.rate:g}/s while sweeps "
        f"run ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})"
    )
    if figures.problem or not figures.latencies:
        table.add("run", figures.problem or "no scrape", fail=True)
        return table
    quiet, scraping = figures.quiet, figures.scraping
    assert quiet.lag is not None and scraping.lag is not None
    p50, p99 = figures.percentile(0.5), figures.percentile(0.99)
    table.add("response", f"{figures.body_bytes / 1e6:.2f} MB, {figures.series:,} series")
    table.add(
        "series: solana_account_balance, solana_validator_delinquent",
        f"{figures.balances:,}, {figures.delinquent:,}",
        fail=figures.balances != size.accounts or figures.delinquent != size.validators,
    )
    table.add("scrapes missing series", figures.incomplete, fail=figures.incomplete > 0)
    table.add(
        "scrape latency p50 / p99 / max (ms)",
        f"{p50 * 1000:.1f} / {p99 * 1000:.1f} / {max(figures.latencies) * 1000:.1f}",
    )
    table.add(f"  p99 < {P99_TARGET * 1000:g} ms", f"{p99 * 1000:.1f} ms", fail=p99 >= P99_TARGET)
    for name, phase in (("quiet", quiet), ("scraping", scraping)):
        lag = phase.lag
        assert lag is not None
        sweeps = ", ".join(f"{source} {n}" for source, n in sorted(phase.rounds.items()))
        table.add(
            f"{name}: seconds, sweeps (longest)",
            f"{phase.seconds:.0f} s, {sweeps} ({phase.longest_round:.2f} s)",
        )
        table.add(
            f"{name}: loop lag ticks, over {STALL * 1000:g} ms, latest, mean",
            f"{lag.count:.0f}, {lag.over(STALL)}, {lag.highest()}, "
            f"{1000 * lag.total / max(1.0, lag.count):.2f} ms",
        )
        table.add(f"{name}: daemon CPU", f"{100 * phase.cpu_s / phase.seconds:.0f}% of a core")
    expected, allowed = stall_allowance(quiet.lag, scraping.lag)
    excess = scraping.lag.over(STALL) - expected
    table.add(
        f"  ticks over {STALL * 1000:g} ms from the scrapes (scraping - quiet's rate; "
        f"<= {allowed - expected:.1f})",
        f"{excess:+.1f}",
        fail=scraping.lag.over(STALL) > allowed,
    )
    cpu_per_scrape = (
        scraping.cpu_s - quiet.cpu_s * scraping.seconds / quiet.seconds
    ) / size.scrapes
    table.add("daemon CPU per scrape (beyond the quiet rate)", f"{cpu_per_scrape * 1000:.0f} ms")
    return table


def main(quick: bool = False, scrapes: int | None = None, rate: float | None = None,
         quiet: float | None = None) -> int:  # fmt: skip
    size = QUICK if quick else FULL
    size = Size(
        size.validators,
        size.accounts,
        scrapes or size.scrapes,
        rate or size.rate,
        quiet if quiet is not None else size.quiet,
    )
    print(
        f"  the scrape's cost: {size.validators:,} validators, {size.accounts:,} balances, "
        f"{size.quiet:g} s quiet, then {size.scrapes} scrapes at {size.rate:g}/s ...",
        flush=True,
    )
    table = report(measure(size))
    print(table.render())
    return 1 if table.failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--scrapes", type=int)
    parser.add_argument("--rate", type=float, help="scrapes a second")
    parser.add_argument("--quiet", type=float, help="seconds of the phase without scrapes")
    args = parser.parse_args()
    raise SystemExit(main(args.quick, args.scrapes, args.rate, args.quiet))
