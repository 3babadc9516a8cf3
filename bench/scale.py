"""Several instances at scale: 1,000,000 addresses shared by 4 instances on one PostgreSQL
(``make chaos-scale``, ``python bench/chaos.py --scale``; bench/README.md).

    python bench/scale.py                          # 1,000,000 addresses, 4 instances
    python bench/scale.py --addresses 250000
    python bench/scale.py --every 10m --sweeps 3   # and the steady state (make chaos-scale)

The addresses are ``addresses_file`` lists (200,000 a file: a file stays under the 16 MiB limit),
one ``new_transactions`` rule each, ``every: 30m``: each instance does one first sweep of its share,
then only its lease loop. The simulator (``watcher simulate`` in a process of its own, 30 ms added
to each answer) holds no history: an address it does not know answers an empty page (``--history``:
one old transaction), so a million addresses cost it nothing up front. The four ``watcher run``
processes start at once on a throwaway PostgreSQL (the first migrates under its advisory lock, the
others wait for it) on a one-address warm-up rule at another interval; once each holds its 256
shards, the rules are rewritten to every address and each instance reloaded (SIGHUP): the new job's
first sweep runs at once over the shards each holds (``--cold``: every address from the start).
Each instance runs under bench/sampler.py: a thread samples the event loop's stack every 2 ms.

Figures: the shards each instance holds after the settle time (``shard_leases``; target 256 +-
16 each), the database's size, each instance's RSS (now and peak; PASS when every peak is under
``--rss-bar``, 200 MiB), its first sweep (time,
targets, RPC calls: its "round" line), that sweep's CPU per 1,000 polls, and the store's share
of the sweep: the samples in the PostgreSQL store or its driver over the samples not idle, in
the sweep's window, applied to the process's CPU over that window (target: at most 10%). With
``--sweeps N``, the run then waits for each instance's N-th sweep at the rules' interval and
prints its figures and each instance's peak RSS by then: the second sweep keeps its quiet
targets' rests (90 bytes each), so from the third on the memory is a steady state's. Then the
reference: one process on SQLite, alone, sweeps one instance's share under the same sampler.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
import yaml
from common import Table, drain, rss_kb, wait_for
from daemon_run import free_port, peak_rss_mb

from watcher.core.durations import parse_duration
from watcher.simulator.keys import derived_pubkey
from watcher.testing.postgres import Postgres

PER_FILE = 200_000
SHARDS = 1024
SHARE_SLACK = 16
STORE_BAR = 0.10
RSS_BAR = 200  # MiB each instance may peak at (the goal of a share's memory: bench/README.md)
SOURCE = "signatures"
BENCH = Path(__file__).resolve().parent
UNMEASURED = "- (a sweep within the sampler's first second)"


@dataclass
class Figures:
    """One instance's first sweep, read from its log and its sampler's lines."""

    name: str
    sweep_s: float | None = None
    targets: int = 0
    handed_back: int = 0  # of the targets, those whose shard moved away during the sweep
    calls: int = 0
    failed: int = 0
    cpu_s: float | None = None  # the process's CPU over the sweep (less the sampler's)
    store: int = 0  # samples in the store over the sweep
    busy: int = 0  # samples not idle over the sweep
    entries: dict[str, int] = field(default_factory=dict)  # store samples by where entered

    def store_share(self) -> float | None:
        return self.store / self.busy if self.busy else None


class Instance:
    """``watcher run`` under the sampler, its JSON log and its sampler's lines in its folder."""

    def __init__(self, home: Path, name: str) -> None:
        self.home, self.name = home, name
        self.log = home / "daemon.log"
        self.samples = home / "samples.jsonl"
        self.proc: subprocess.Popen[bytes] | None = None
        self.since = 0  # where the measured part of its log begins (the reload's)

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(BENCH / "sampler.py"),
                    str(self.samples),
                    "run",
                    "--config",
                    str(self.home / "watcher.yaml"),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.home,
            )

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60.0) -> int | str:
        if self.proc is None:
            return "not started"
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return f"did not stop in {timeout:g} s"

    def kill(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()

    def reload(self) -> None:
        """SIGHUP: the rules read again; what the log says from now on is measured."""
        assert self.proc is not None
        self.since = self.log.stat().st_size
        self.proc.send_signal(signal.SIGHUP)

    def lines(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        if not self.log.exists():
            return records
        with self.log.open("rb") as log:
            log.seek(self.since)
            content = log.read().decode(errors="replace")
        for text in content.splitlines():
            if text.startswith("{"):
                try:
                    records.append(json.loads(text))
                except ValueError:
                    continue
        return records

    def sweeps(self) -> list[dict[str, Any]]:
        """The "round" lines of the rules' job since the reload (the warm-up's job is another
        source's interval, but the same source: its lines come before the reload)."""
        return [r for r in self.lines() if r.get("event") == "round" and r.get("source") == SOURCE]

    def first_sweep(self) -> dict[str, Any] | None:
        return next(iter(self.sweeps()), None)

    def figures(self, nth: int = 1) -> Figures:
        """The figures of the ``nth`` sweep since the reload (1: the first)."""
        figures = Figures(self.name)
        done = self.sweeps()
        sweep = done[nth - 1] if len(done) >= nth else None
        if sweep is None:
            return figures
        figures.sweep_s = float(sweep["duration"])
        figures.targets, figures.calls = int(sweep["targets"]), int(sweep["calls"])
        figures.handed_back = int(sweep.get("handed_back", 0))
        figures.failed = int(sweep.get("failed", 0))
        end = datetime.fromisoformat(sweep["timestamp"]).timestamp()
        begin = end - figures.sweep_s
        lines = [json.loads(t) for t in self.samples.read_text().splitlines() if t.strip()]
        before = [line for line in lines if line["t"] <= begin]
        after = [line for line in lines if line["t"] >= end]
        if not before or not after:
            return figures
        a, b = before[-1], after[0]
        figures.cpu_s = (b["cpu"] - a["cpu"]) - (b["sampler_cpu"] - a["sampler_cpu"])
        figures.store = b["store"] - a["store"]
        figures.busy = figures.store + b["other"] - a["other"]
        old = a.get("entries", {})
        figures.entries = {
            k: v - old.get(k, 0) for k, v in b.get("entries", {}).items() if v > old.get(k, 0)
        }
        return figures


def write_rules(
    rules: Path, addresses: list[str], every: str, extra: dict[str, Any] | None = None
) -> None:
    """The rules of every address: ``addresses_file`` lists of ``PER_FILE`` each (each rule with
    the fields of ``extra`` too)."""
    listed = []
    for n, start in enumerate(range(0, len(addresses), PER_FILE)):
        (rules / f"addresses-{n}.txt").write_text(
            "\n".join(addresses[start : start + PER_FILE]) + "\n"
        )
        listed.append(
            {
                "name": f"scale-{n}",
                "kind": "new_transactions",
                "addresses_file": f"addresses-{n}.txt",
                "every": every,
                "notify": ["hooks"],
                **(extra or {}),
            }
        )
    (rules / "rules.yaml").write_text(yaml.safe_dump({"rules": listed}))


def write_warmup(rules: Path, address: str) -> None:
    """One rule of one address at another interval: the instances settle their shares on it;
    the reload to the real rules then makes a new job (another interval), run at once."""
    rule = {
        "name": "scale-warmup",
        "kind": "new_transactions",
        "addresses": [address],
        "every": "1h",
        "notify": ["hooks"],
    }
    (rules / "rules.yaml").write_text(yaml.safe_dump({"rules": [rule]}))


def write_instance(home: Path, name: str, rules: Path, rpc_url: str, state_url: str | None) -> None:
    """An instance's settings; without ``state_url``, one process on its own SQLite file."""
    home.mkdir(parents=True)
    state: dict[str, str] = (
        {"state_url": state_url, "instance": name}
        if state_url
        else {"state_path": "state/watcher.db"}
    )
    settings = {
        "rpc_url": rpc_url,
        "rules": [str(rules)],
        **state,
        "channels": {"hooks": ["json://127.0.0.1:9/"]},  # nothing is sent: no history
        "rpc": {"batch_size": 10, "max_concurrency": 8},
        "log_format": "json",
    }
    (home / "watcher.yaml").write_text(yaml.safe_dump(settings))


class Simulator:
    """``watcher simulate`` with an empty ledger in a process of its own (``enforce_rps``: it
    answers 429 beyond that many requests a second)."""

    def __init__(
        self, latency: float, enforce_rps: float | None = None, *, history: bool = False
    ) -> None:
        self.port = free_port()
        limit = [] if enforce_rps is None else ["--enforce-rps", str(enforce_rps)]
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "watcher",
                "simulate",
                "--port",
                str(self.port),
                "--scenario",
                "quiet-history" if history else "quiet",
                "--latency",
                str(latency),
                *limit,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if "serving" in line or not line:
                break
        drain(self.proc.stdout)
        self.url = f"http://127.0.0.1:{self.port}/v3/sim-key"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)

    def __enter__(self) -> Simulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def shard_counts(conninfo: str) -> dict[str, int]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT owner, count(*) FROM shard_leases WHERE owner IS NOT NULL "
            "AND expires_at > extract(epoch FROM clock_timestamp()) GROUP BY owner"
        ).fetchall()
    return {str(owner): int(n) for owner, n in rows}


def database_size(conninfo: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def balanced(counts: dict[str, int], names: list[str]) -> bool:
    share = SHARDS / len(names)
    return sum(counts.values()) == SHARDS and all(
        abs(counts.get(n, 0) - share) <= SHARE_SLACK for n in names
    )


def run(args: argparse.Namespace) -> Table:
    names = [f"i{n + 1}" for n in range(args.instances)]
    table = Table(
        f"scale: {args.addresses:,} addresses, {args.instances} instances on one PostgreSQL, "
        f"every {args.every}, {os.cpu_count()} cores"
    )
    began = time.monotonic()
    addresses = [derived_pubkey(f"scale address {i}") for i in range(args.addresses)]
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="scale-")))
        rules = folder / "rules"
        rules.mkdir()
        if args.cold:
            write_rules(rules, addresses, args.every)
        else:
            write_warmup(rules, derived_pubkey("scale warm-up"))
        postgres = stack.enter_context(Postgres.start())
        conninfo = stack.enter_context(postgres.database())
        parts = dict(item.split("=", 1) for item in conninfo.split())
        simulator = Simulator(args.latency, history=args.history)
        stack.callback(simulator.stop)
        instances = []
        for name in names:
            url = (
                f"postgresql://{parts['user']}@/{parts['dbname']}?host={parts['host']}"
                f"&port={parts['port']}&application_name=watcher-{name}"
            )
            write_instance(folder / name, name, rules, simulator.url, url)
            instances.append(Instance(folder / name, name))
        for instance in instances:
            stack.callback(instance.kill)
        table.add("set-up: addresses and files (s)", f"{time.monotonic() - began:.0f}")
        started = time.monotonic()
        for instance in instances:
            instance.start()
        counts: dict[str, int] = {}

        def settled() -> bool:
            nonlocal counts
            try:
                counts = shard_counts(conninfo)
            except psycopg.Error:  # not migrated yet
                return False
            return balanced(counts, names)

        if not args.cold:
            ok = wait_for(settled, args.timeout, 1.0)
            table.add(
                "warm-up: shares settled after start (s)", f"{time.monotonic() - started:.0f}"
            )
            if not ok:
                table.add("warm-up: shards held", str(counts), fail=True)
                return table
            write_rules(rules, addresses, args.every)
            started = time.monotonic()
            for instance in instances:
                instance.reload()

        def swept() -> bool:
            if not all(i.alive() for i in instances):
                return True
            return all(i.first_sweep() is not None for i in instances)

        done = wait_for(swept, args.timeout, 2.0)
        dead = [i.name for i in instances if not i.alive()]
        if not done or dead:
            table.add("first sweeps done", f"no (exited: {dead or 'none'})", fail=True)
            for instance in instances:
                table.note(f"{instance.name}:\n{instance.log.read_text(errors='replace')[-2000:]}")
            return table
        sweeps_done = time.monotonic() - started
        settle_start = time.monotonic()
        wait_for(settled, args.settle, 1.0)
        # The settle time is a floor as well: the shares must hold, not pass through.
        time.sleep(max(0.0, args.settle - (time.monotonic() - settle_start)))
        counts = shard_counts(conninfo)
        what = "start" if args.cold else "the reload"
        table.add(f"all first sweeps done after {what} (s)", f"{sweeps_done:.0f}")
        table.add(
            f"shards held after {args.settle:g} s more (target {SHARDS // len(names)} +- "
            f"{SHARE_SLACK} each)",
            ", ".join(f"{n} {counts.get(n, 0)}" for n in names),
            fail=not balanced(counts, names),
        )
        size = database_size(conninfo)
        table.add("database size (MiB)", f"{size / 2**20:.0f}")
        add_memory(table, instances, args.rss_bar)
        figures = [i.figures() for i in instances]
        shares: list[float] = []
        for f in figures:
            share = f.store_share()
            if share is not None:
                shares.append(share)
            per_1000 = 1000 * f.cpu_s / f.calls if f.cpu_s is not None and f.calls else None
            store_cpu = share * f.cpu_s if share is not None and f.cpu_s is not None else None
            table.add(
                f"{f.name} first sweep: s, targets, calls, failed",
                f"{f.sweep_s or 0:.1f}, {f.targets:,}, {f.calls:,}, {f.failed}",
                fail=f.failed > 0,
            )
            table.add(
                f"{f.name}   CPU s (per 1,000 polls), store CPU s",
                f"{f.cpu_s:.1f} ({per_1000 or 0:.2f}), {store_cpu or 0:.1f}"
                if f.cpu_s is not None
                else UNMEASURED,
            )
            table.add(
                f"{f.name}   store share of the busy loop (samples; bar {STORE_BAR:.0%})",
                f"{100 * share:.1f}% ({f.store}/{f.busy})" if share is not None else "-",
                fail=share is None or share > STORE_BAR,
            )
        entries: Counter[str] = Counter()
        for f in figures:
            entries.update(f.entries)
        busy = sum(f.busy for f in figures)
        for entry, n in entries.most_common(8):
            table.add(f"  store samples: {entry}", f"{n} ({100 * n / max(1, busy):.1f}% of busy)")
        # The targets each first sweep polled (its calls are more: a first poll also reads its
        # balances, a getMultipleAccounts call for up to 100 addresses). Not a target: a shard
        # that changes hands after its new owner's sweep began waits for that owner's next
        # sweep (the job's interval), so these may fall short of every address.
        polled = sum(f.targets - f.handed_back for f in figures)
        table.add(
            "addresses polled by the first sweeps (handed back; calls)",
            f"{polled:,} of {args.addresses:,} ({sum(f.handed_back for f in figures):,}; "
            f"{sum(f.calls for f in figures):,})",
            fail=polled > args.addresses,
        )
        if polled < args.addresses:
            # What moved, to tell a catch-up round's line from a first sweep's.
            for instance in instances:
                moved = [
                    {key: r.get(key) for key in ("timestamp", "held", "taken", "released", "lost")}
                    for r in instance.lines()
                    if r.get("event") in ("shards", "shards lost")
                ]
                table.note(f"{instance.name}: shards moved since the reload: {moved[:12]}")
        if args.sweeps > 1:
            steady(table, instances, args)
        exits = {i.name: i.stop() for i in instances}
        table.add(
            "graceful stop: exit codes",
            ", ".join(str(c) for c in exits.values()),
            fail=any(c != 0 for c in exits.values()),
        )
        if args.reference:
            reference(table, folder, addresses[: args.addresses // len(names)], args, simulator)
        table.add("run (s)", f"{time.monotonic() - began:.0f}")
    return table


def steady(table: Table, instances: list[Instance], args: argparse.Namespace) -> None:
    """The instances' later sweeps, at the job's interval: the ``--sweeps``-th's figures and
    each instance's peak RSS by then (a quiet sweep keeps its targets' rests: the memory of a
    steady state, which a first sweep does not show)."""
    began = time.monotonic()
    wait_s = (args.sweeps - 1) * parse_duration(args.every) + args.timeout
    done = wait_for(
        lambda: (
            any(not i.alive() for i in instances)
            or all(len(i.sweeps()) >= args.sweeps for i in instances)
        ),
        wait_s,
        5.0,
    )
    dead = [i.name for i in instances if not i.alive()]
    if not done or dead:
        table.add(f"sweep {args.sweeps} done", f"no (exited: {dead or 'none'})", fail=True)
        return
    table.add(f"sweep {args.sweeps} of each done after (s)", f"{time.monotonic() - began:.0f} more")
    for instance in instances:
        f = instance.figures(args.sweeps)
        per_1000 = 1e6 * f.cpu_s / f.targets if f.cpu_s is not None and f.targets else None
        table.add(
            f"{f.name} sweep {args.sweeps}: s, targets, calls, failed; CPU ms per 1,000 polls",
            f"{f.sweep_s or 0:.1f}, {f.targets:,}, {f.calls:,}, {f.failed}; "
            + (f"{per_1000:.0f}" if per_1000 is not None else UNMEASURED),
            fail=f.failed > 0 or (f.sweep_s or 0) > parse_duration(args.every),
        )
    add_memory(table, instances, args.rss_bar, f" after sweep {args.sweeps}", ", steady state")


def add_memory(
    table: Table, instances: list[Instance], bar: float, when: str = "", verdict: str = ""
) -> None:
    """Each instance's RSS now and at its peak, and whether every peak is under ``bar`` MiB."""
    rss = {i.name: rss_kb(i.pid) for i in instances}
    peaks = {i.name: peak_rss_mb(i.pid) if i.pid else 0.0 for i in instances}
    table.add(
        f"RSS now / peak{when} (MiB)",
        ", ".join(f"{n} {(rss[n] or 0) / 1024:.0f}/{peaks[n]:.0f}" for n in peaks),
    )
    highest = max(peaks.values())
    table.add(
        f"peak RSS of each instance under {bar:g} MiB{verdict}",
        "PASS" if highest < bar else f"FAIL ({highest:.0f})",
        fail=highest >= bar,
    )


def reference(
    table: Table, folder: Path, share: list[str], args: argparse.Namespace, simulator: Simulator
) -> None:
    """The same first sweep of one instance's share, by one process on SQLite alone on the box:
    its CPU per 1,000 polls and its store's share, beside the instances' on PostgreSQL."""
    rules = folder / "reference-rules"
    rules.mkdir()
    write_rules(rules, share, args.every)
    write_instance(folder / "sqlite", "sqlite", rules, simulator.url, None)
    instance = Instance(folder / "sqlite", "sqlite")
    instance.start()
    try:
        wait_for(lambda: not instance.alive() or instance.first_sweep() is not None, 900, 2.0)
        f = instance.figures()
    finally:
        code = instance.stop()
    share_ = f.store_share()
    per_1000 = 1000 * f.cpu_s / f.calls if f.cpu_s is not None and f.calls else 0.0
    table.add(
        f"reference, SQLite alone, {len(share):,} addresses: sweep s, CPU s (per 1,000)",
        f"{f.sweep_s or 0:.1f}, "
        + (f"{f.cpu_s:.1f} ({per_1000:.2f})" if f.cpu_s is not None else UNMEASURED),
        fail=f.sweep_s is None or code != 0,
    )
    table.add(
        "reference   store share of the busy loop (samples)",
        f"{100 * share_:.1f}% ({f.store}/{f.busy})" if share_ is not None else "-",
    )
    for entry, n in Counter(f.entries).most_common(3):
        table.add(f"    store samples: {entry}", f"{n} ({100 * n / max(1, f.busy):.1f}%)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--addresses", type=int, default=1_000_000)
    parser.add_argument("--instances", type=int, default=4)
    parser.add_argument("--every", default="30m", help="the rules' interval (default 30m)")
    parser.add_argument("--latency", type=float, default=0.03, help="simulator's, seconds")
    parser.add_argument(
        "--sweeps",
        type=int,
        default=1,
        help="sweeps of each instance to wait for (default 1: the first); from 3 on, the "
        "steady state's figures and memory (the second sweep keeps its quiet targets' rests)",
    )
    parser.add_argument(
        "--history",
        action="store_true",
        help="every address has one old transaction (its rest then holds a signature: 91 bytes "
        "a target, against 2 for an address with no history)",
    )
    parser.add_argument("--settle", type=float, default=60.0, help="after the sweeps (s)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="for the first sweeps")
    parser.add_argument(
        "--rss-bar",
        type=float,
        default=RSS_BAR,
        help=f"each instance's peak RSS must stay under it, MiB (default {RSS_BAR})",
    )
    parser.add_argument(
        "--no-reference",
        dest="reference",
        action="store_false",
        help="skip the SQLite reference (one process, one instance's share, alone)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="every address from the start (no warm-up): the first instance up takes every "
        "shard at first, and shards that change hands after a sweep began wait for the next",
    )
    args = parser.parse_args(argv)
    table = run(args)
    print(table.render(), flush=True)
    return 1 if table.failed else 0


if __name__ == "__main__":
    sys.exit(main())
