"""Several instances on one PostgreSQL, under chaos (``make chaos``; bench/README.md).

    python bench/chaos.py                 # 4 minutes, 3 instances, 2000 addresses
    python bench/chaos.py --quick         # about 90 s
    python bench/chaos.py --scale         # 1,000,000 addresses, 4 instances (bench/scale.py)

Three ``watcher run`` processes share one throwaway PostgreSQL (``state_url``, a short
``lease_ttl``) and the simulator; a steady stream of transactions lands on random watched
addresses (bench/stream.py: each alert's title names what it covers, so every transaction is
accounted for out of digests). Meanwhile: ``kill -9`` of a random instance every 10-20 s, then a
restart; once each, an instance paused (SIGSTOP) for twice the lease time, an instance's
database connections terminated, PostgreSQL itself restarted, and an instance stopped gracefully
then started again. Then the stream stops, everything drains, the instances stop gracefully,
and one table says PASS/FAIL per target (the exit code is 1 when any failed).

A test-only trigger, created by this run on ``shard_leases`` (not by the product's migrations),
rejects an UPDATE that makes a shard's epoch go backwards: its hits, in the server's log, are
the stale writes. Takeover times come from the database and the daemons' JSON logs: from a kill
to the first sweep that started after every shard the killed instance held was taken at a newer
epoch, in the log of each instance that took them.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, LiteralString

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
import yaml
from common import API_KEY, DaemonProcess, Receiver, Table, rss_kb, sigkill, wait_for, write_config
from stream import COVERS, TITLE, _Stream, baseline_taken, tally

from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey
from watcher.testing.postgres import Postgres

INSTANCES = ("i1", "i2", "i3")
LEASE_TTL = 4.0
PER_RULE = 10  # addresses per rule: one rule's digest lists every alert in it (10 titles)
TAKEOVER_BAR = 30.0
HANDOVER_BAR = 5.0
SOURCE = "signatures"  # the source of new_transactions rules: its "round" lines are sweeps
FENCED_OUT = ("shard lost; its write rolled back", "LeaseLost")
STALE = "went backwards"

TRIGGER: LiteralString = """
CREATE FUNCTION chaos_epoch_backwards() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'chaos: the epoch of shard % went backwards (% -> %)',
        OLD.shard, OLD.epoch, NEW.epoch;
END $$;
CREATE TRIGGER chaos_epoch_never_backwards BEFORE UPDATE ON shard_leases
    FOR EACH ROW WHEN (NEW.epoch < OLD.epoch) EXECUTE FUNCTION chaos_epoch_backwards();
"""


class TimedReceiver(Receiver):
    """The bench's receiver, plus when each accepted post came in (to tell which fault a
    duplicate followed)."""

    def __init__(self) -> None:
        super().__init__()
        self._order = threading.Lock()
        self.accepted_at: list[float] = []

    def _record(self, body: dict[str, Any], path: str, headers: dict[str, str]) -> int:
        with self._order:  # the same order as the accepted list
            status = super()._record(body, path, headers)
            if status == 200:
                self.accepted_at.append(time.time())
            return status


def duplicate_times(receiver: TimedReceiver) -> list[float]:
    """When each post that repeats an alert already accepted came in."""
    seen: set[tuple[str, ...]] = set()
    times = []
    for (body, _), at in zip(receiver.accepted, receiver.accepted_at, strict=False):
        keys = set(COVERS.findall(f"{body.get('title', '')}\n{body.get('message', '')}"))
        if keys & seen:
            times.append(at)
        seen |= keys
    return times


class Db:
    """The run's own short connections to the shared database (each query a connection of its
    own, so that a server restart or a terminated backend costs one failed query)."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = f"{conninfo} application_name=chaos-bench"

    def query(
        self, text: LiteralString, params: Sequence[Any] | None = None
    ) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=3) as conn:
            cursor = conn.execute(text, params)
            return cursor.fetchall() if cursor.description else []

    def attempt(
        self, text: LiteralString, params: Sequence[Any] | None = None
    ) -> list[tuple[Any, ...]] | None:
        """The rows, or None while the server is away."""
        try:
            return self.query(text, params)
        except psycopg.Error:
            return None


@dataclass
class Instance:
    name: str
    daemon: DaemonProcess
    paused: bool = False
    down: bool = False  # killed or stopped by the run, to be started again
    crashes: list[int] = field(default_factory=list)  # exit codes of exits not caused by us
    run_from: int = 0  # where the current run's output begins in its log
    is_ready: bool = False

    def start(self) -> None:
        path = self.daemon.log_path
        self.run_from = path.stat().st_size if path.exists() else 0
        self.is_ready = False
        self.daemon.start()

    def ready(self) -> bool:
        """Its current run has done a lease round that moved shards, or a sweep: past its
        start-up (a SIGTERM before the daemon's handlers are in would end it as a signal)."""
        if not self.is_ready:
            with self.daemon.log_path.open("rb") as log:
                log.seek(self.run_from)
                text = log.read().decode(errors="replace")
            self.is_ready = '"shards"' in text or '"round"' in text
        return self.is_ready

    @property
    def pid(self) -> int | None:
        return self.daemon.proc.pid if self.daemon.proc is not None else None

    def running(self) -> bool:
        proc = self.daemon.proc
        return proc is not None and proc.poll() is None


@dataclass
class Takeover:
    """A kill -9 and the shards its victim held then (shard -> epoch)."""

    victim: str
    at: float  # unix seconds
    shards: dict[int, int]
    taken_at: float | None = None  # every one of them held at a newer epoch
    owners: set[str] = field(default_factory=set)


@dataclass
class LogLine:
    at: float
    record: dict[str, Any]


def log_lines(daemon: DaemonProcess) -> list[LogLine]:
    """The daemon's JSON log lines (every run of it), with their time as unix seconds."""
    lines = []
    for text in daemon.output().splitlines():
        if not text.startswith("{"):
            continue
        try:
            record = json.loads(text)
            at = datetime.fromisoformat(record["timestamp"]).timestamp()
        except (ValueError, KeyError, TypeError):
            continue
        lines.append(LogLine(at, record))
    return lines


def state_url(conninfo: str, instance: str) -> str:
    parts = dict(item.split("=", 1) for item in conninfo.split())
    # application_name tells the instance's backends apart in pg_stat_activity (unix socket
    # connections have no client address to go by).
    return (
        f"postgresql://{parts['user']}@/{parts['dbname']}?host={parts['host']}"
        f"&port={parts['port']}&application_name=watcher-{instance}"
    )


def write_instance(
    folder: Path, name: str, server_url: str, receiver_url: str, conninfo: str, chunks: int
) -> Path:
    rules = [
        {
            "name": f"chaos-{i}",
            "kind": "new_transactions",
            "addresses_file": f"addresses-{i}.txt",
            "every": "1s",
            "group_wait": "500ms",
            "notify": ["hooks"],
            "title": TITLE,
        }
        for i in range(chunks)
    ]
    path = write_config(
        folder,
        rpc_url=server_url,
        channels={"hooks": [receiver_url]},
        rules=rules,
        extra={"instance": name, "lease_ttl": f"{LEASE_TTL:g}s"},
    )
    settings = yaml.safe_load(path.read_text())
    del settings["state_path"]
    settings["state_url"] = state_url(conninfo, name)
    path.write_text(yaml.safe_dump(settings))
    return path


class Chaos:
    """The run: its parts, what it did and when, and the figures at the end."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.seconds = 90.0 if args.quick else args.minutes * 60
        self.addresses = [derived_pubkey(f"chaos {args.seed} {i}") for i in range(args.addresses)]
        self.ledger = Ledger(seed=args.seed)
        for address in self.addresses:
            self.ledger.add_transactions(address, 2)  # history: the baseline, quiet
        self.instances: list[Instance] = []
        self.takeovers: list[Takeover] = []
        self.kills_at: list[int] = []  # notifications accepted at each kill
        self.restarts: list[tuple[float, str]] = []  # (when, instance) starts to make
        self.busy_until = 0.0  # no new chaos before this (monotonic): one fault at a time
        self.pause: tuple[str, float, float] | None = None  # instance, SIGSTOP, SIGCONT
        self.cut: tuple[str, int] | None = None  # instance, backends terminated
        self.pg_restart: tuple[float, float] | None = None  # unix seconds: began, done
        self.graceful: tuple[str, float, int | str] | None = None  # instance, SIGTERM, exit
        self.specials: list[tuple[float, Callable[[], None]]] = []
        self.cut_tries = 0
        self.faults: list[tuple[float, str]] = []  # (unix seconds, which): duplicates' causes

    # -- the chaos -----------------------------------------------------------------------------

    def live(self) -> list[Instance]:
        return [
            i for i in self.instances if i.running() and not i.paused and not i.down and i.ready()
        ]

    def calm(self) -> bool:
        return len(self.live()) == len(self.instances) and time.monotonic() >= self.busy_until

    def held_by(self, name: str) -> dict[int, int]:
        rows = self.db.attempt("SELECT shard, epoch FROM shard_leases WHERE owner = %s", [name])
        return {int(shard): int(epoch) for shard, epoch in rows or []}

    def kill(self) -> None:
        victim = self.rng.choice(self.live())
        shards = self.held_by(victim.name)
        assert victim.pid is not None
        sigkill(victim.pid)
        at = time.time()
        victim.daemon.kill()  # reaps it
        victim.down = True
        self.faults.append((at, "kill -9"))
        self.kills_at.append(len(self.receiver.accepted))
        if shards:
            self.takeovers.append(Takeover(victim.name, at, shards))
        # Later than its leases lapse, so that the others take its shards over first.
        delay = self.rng.uniform(LEASE_TTL + 2, LEASE_TTL + 5)
        self.restarts.append((time.monotonic() + delay, victim.name))
        self.busy_until = time.monotonic() + delay + 3

    def pause_one(self) -> None:
        victim = self.rng.choice(self.live())
        assert victim.pid is not None
        victim.daemon.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        victim.paused = True
        stopped = time.time()
        self.faults.append((stopped, "SIGSTOP"))
        time.sleep(2 * LEASE_TTL)
        victim.daemon.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
        victim.paused = False
        self.pause = (victim.name, stopped, time.time())
        self.busy_until = time.monotonic() + 2 * LEASE_TTL

    def cut_connections(self) -> None:
        victim = self.rng.choice(self.live())
        self.faults.append((time.time(), "backends terminated"))
        rows = self.db.attempt(
            """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = %s
            AND pid <> pg_backend_pid()""",
            [f"watcher-{victim.name}"],
        )
        self.cut = (victim.name, int(rows[0][0]) if rows else -1)
        self.cut_tries += 1
        if self.cut[1] < 1 and self.cut_tries < 5:  # none open then (or the query failed)
            self.specials.insert(0, (time.monotonic() + 2.0, self.cut_connections))
        self.busy_until = time.monotonic() + 2 * LEASE_TTL

    def restart_postgres(self) -> None:
        began = time.time()
        self.faults.append((began, "PostgreSQL restart"))
        self.postgres.restart()
        self.pg_restart = (began, time.time())
        self.busy_until = time.monotonic() + 5 * LEASE_TTL

    def stop_one(self) -> None:
        victim = self.rng.choice(self.live())
        victim.down = True
        began = time.time()
        self.faults.append((began, "graceful stop"))
        try:
            code: int | str = victim.daemon.stop(timeout=15)
        except AssertionError:
            code = "did not stop in 15 s"
        self.graceful = (victim.name, began, code)
        self.restarts.append((time.monotonic() + 3.0, victim.name))
        self.busy_until = time.monotonic() + 3.0 + 2 * LEASE_TTL

    def tick(self) -> None:
        """Starts what is due, notes exits that were not ours, measures takeovers."""
        now = time.monotonic()
        for due, name in list(self.restarts):
            if due <= now:
                self.restarts.remove((due, name))
                instance = self.by_name(name)
                instance.start()
                instance.down = False
        for instance in self.instances:
            proc = instance.daemon.proc
            if not instance.down and proc is not None and proc.poll() is not None:
                instance.crashes.append(proc.returncode)
                instance.start()
        pending = [t for t in self.takeovers if t.taken_at is None]
        for takeover in pending:
            rows = self.db.attempt(
                "SELECT shard, epoch, owner FROM shard_leases WHERE shard = ANY(%s)",
                [list(takeover.shards)],
            )
            if rows is not None and all(int(e) > takeover.shards[int(s)] for s, e, _ in rows):
                takeover.taken_at = time.time()
                takeover.owners = {str(owner) for _, _, owner in rows if owner is not None}

    def all_ready(self) -> bool:
        self.tick()
        return all(i.running() and i.ready() for i in self.instances)

    def by_name(self, name: str) -> Instance:
        return next(i for i in self.instances if i.name == name)

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> Table:
        args = self.args
        title = (
            f"chaos: {len(INSTANCES)} instances, {len(self.addresses)} addresses, "
            f"lease_ttl {LEASE_TTL:g}s, {self.seconds:.0f} s of chaos (seed {args.seed})"
        )
        table = Table(title)
        with ExitStack() as stack:
            self.postgres = stack.enter_context(Postgres.start())
            conninfo = stack.enter_context(self.postgres.database())
            self.db = Db(conninfo)
            server = stack.enter_context(SimulatorServer(self.ledger, api_key=API_KEY))
            self.receiver = stack.enter_context(TimedReceiver())
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chaos-")))
            stack.callback(self.kill_all)
            chunks = [
                self.addresses[i : i + PER_RULE] for i in range(0, len(self.addresses), PER_RULE)
            ]
            for name in INSTANCES:
                home = folder / name
                (home / "rules").mkdir(parents=True)
                for n, chunk in enumerate(chunks):
                    (home / "rules" / f"addresses-{n}.txt").write_text("\n".join(chunk) + "\n")
                config = write_instance(
                    home, name, server.url, self.receiver.url, conninfo, len(chunks)
                )
                self.instances.append(Instance(name, DaemonProcess(config)))
            self.chaos(table, server)
        return table

    def kill_all(self) -> None:
        for instance in self.instances:
            if instance.paused and instance.daemon.proc is not None:
                instance.daemon.proc.send_signal(signal.SIGCONT)
            instance.daemon.kill()

    def settled(self) -> bool:
        rows = self.db.attempt(
            "SELECT owner, count(*) FROM shard_leases WHERE owner IS NOT NULL GROUP BY owner"
        )
        counts = {str(owner): int(n) for owner, n in rows or []}
        return len(counts) == len(INSTANCES) and sum(counts.values()) == 1024

    def chaos(self, table: Table, server: SimulatorServer) -> None:
        started = time.monotonic()
        first = self.instances[0]
        first.start()  # migrates; then the trigger goes onto its table
        if not wait_for(lambda: self.db.attempt("SELECT 1 FROM shard_leases LIMIT 1"), 60, 0.2):
            table.add("schema migrated", "no (60 s)", fail=True)
            table.note(first.daemon.output()[-3000:])
            return
        self.db.query(TRIGGER)
        for instance in self.instances[1:]:
            instance.start()
        if not wait_for(self.settled, 60, 0.5) or not wait_for(
            lambda: baseline_taken(server, self.addresses), 120, 1.0
        ):
            table.add("settled with every baseline taken", "no", fail=True)
            for instance in self.instances:
                table.note(f"{instance.name}:\n{instance.daemon.output()[-2000:]}")
            return
        setup = time.monotonic() - started
        server.log.clear()  # the calls are not needed any more: keep memory flat
        baseline = {e["signature"] for a in self.addresses for e in self.ledger.signatures(a)}
        stream = _Stream(self.ledger, self.addresses, self.rng, self.args.pace)
        stream.start()
        begin = time.monotonic()
        end = begin + self.seconds
        fractions = (0.2, 0.4, 0.6, 0.8)
        actions = (self.pause_one, self.cut_connections, self.restart_postgres, self.stop_one)
        self.specials = [
            (begin + f * self.seconds, a) for f, a in zip(fractions, actions, strict=True)
        ]
        next_kill = begin + self.rng.uniform(10, 20)
        while time.monotonic() < end:
            self.tick()
            now = time.monotonic()
            if self.calm():
                if self.specials and self.specials[0][0] <= now:
                    _, action = self.specials.pop(0)
                    action()
                elif now >= next_kill:
                    self.kill()
                    next_kill = now + self.rng.uniform(10, 20)
            if len(server.log.snapshot()) > 100_000:
                server.log.clear()
            time.sleep(0.2)
        chaos_seconds = time.monotonic() - begin
        stream.stop_flag.set()
        stream.join(5)
        # The last restarts, and the specials a busy run had no room for (they must happen).
        deadline = time.monotonic() + 120
        while (self.restarts or self.specials) and time.monotonic() < deadline:
            self.tick()
            if self.specials and self.calm():
                _, action = self.specials.pop(0)
                action()
            time.sleep(0.2)

        # Every instance past its start-up before the graceful stops at the end.
        wait_for(self.all_ready, 60, 0.2)

        def drained() -> bool:
            self.tick()
            if tally(self.ledger, self.addresses, baseline, self.receiver.accepted).lost:
                return False
            rows = self.db.attempt(
                "SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')"
            )
            return rows is not None and int(rows[0][0]) == 0

        drain_started = time.monotonic()
        is_drained = wait_for(drained, self.args.drain, step=1.0)
        drain_seconds = time.monotonic() - drain_started
        rss = {i.name: rss_kb(i.pid) for i in self.instances}
        exits: dict[str, int | str] = {}
        for instance in self.instances:
            try:
                exits[instance.name] = instance.daemon.stop(timeout=15)
            except AssertionError:
                exits[instance.name] = "did not stop in 15 s"
        result = tally(self.ledger, self.addresses, baseline, self.receiver.accepted, self.kills_at)
        logs = {i.name: log_lines(i.daemon) for i in self.instances}
        self.report(table, result, logs, exits, rss, is_drained, drain_seconds)
        table.add("setup (s)", f"{setup:.0f}")
        table.add("chaos (s)", f"{chaos_seconds:.0f}")
        if not is_drained or any(i.crashes for i in self.instances):
            for instance in self.instances:
                table.note(f"{instance.name} log tail:\n{instance.daemon.output()[-3000:]}")
        for signature in result.lost[:10]:
            table.note(f"lost: {signature}")
        for line in result.false_alerts[:10]:
            table.note(f"false alert: {line}")

    # -- the figures ---------------------------------------------------------------------------

    def report(
        self,
        table: Table,
        result: Any,
        logs: dict[str, list[LogLine]],
        exits: dict[str, int | str],
        rss: dict[str, int | None],
        is_drained: bool,
        drain_seconds: float,
    ) -> None:
        kills = len(self.kills_at)
        table.add("kill -9 (each restarted)", kills)
        if self.pause is not None:
            name, stopped, resumed = self.pause
            table.add(f"SIGSTOP {name}, SIGCONT after (s)", f"{resumed - stopped:.1f}")
        else:
            table.add("SIGSTOP/SIGCONT", "not done", fail=True)
        if self.cut is not None:
            table.add(f"backends of {self.cut[0]} terminated", self.cut[1], fail=self.cut[1] < 1)
        else:
            table.add("backends terminated", "not done", fail=True)
        table.add(
            "PostgreSQL restarted", "yes" if self.pg_restart else "no", fail=not self.pg_restart
        )
        table.add("transactions made visible", result.expected)
        table.add("notifications accepted", result.messages)
        table.add("events notified (distinct)", result.delivered)
        table.add("lost", len(result.lost), fail=bool(result.lost))
        # A duplicate is promised only when a sender dies (or is cut off) between a channel's
        # accept and its commit: at most one per kill -9, per pause, per instance whose
        # connections were cut, per instance when the server restarted (one URL: one send in
        # flight per instance). Each duplicate is put down to the last fault before it.
        repeats = duplicate_times(self.receiver)
        causes = Counter(self.cause(at) for at in repeats)
        bar = kills + (self.pause is not None) + (self.cut is not None)
        bar += len(INSTANCES) if self.pg_restart else 0
        table.add(
            f"duplicate messages (bar: senders interrupted <= {bar})",
            len(repeats),
            fail=len(repeats) > bar,
        )
        table.add(
            f"  after a kill -9 (bar: kills = {kills})",
            causes["kill -9"],
            fail=causes["kill -9"] > kills,
        )
        others = ", ".join(f"{k} {n}" for k, n in sorted(causes.items()) if k != "kill -9")
        table.add("  after the other faults", others or 0)
        table.add("duplicate alerts (in those messages)", result.duplicate_alerts)
        table.add("false alerts", len(result.false_alerts), fail=bool(result.false_alerts))
        stale = self.stale_writes()
        table.add("stale writes (epoch went backwards)", stale, fail=stale != 0)
        fenced = sum(
            1 for i in self.instances for t in i.daemon.output().splitlines() if _fenced(t)
        )
        table.add("fenced-out writes (rolled back)", fenced)
        times = [t for t in (self.takeover_seconds(t, logs) for t in self.takeovers) if t]
        if times:
            table.add(
                "takeover after kill -9, p50 / max (s)",
                f"{statistics.median(times):.1f} / {max(times):.1f} (of {len(times)})",
                fail=max(times) > TAKEOVER_BAR,
            )
        else:
            table.add("takeover after kill -9", "none measured", fail=True)
        unmeasured = len(self.takeovers) - len(times)
        if unmeasured:
            table.add("  kills whose takeover was not seen", unmeasured)
        handover = self.handover_seconds(logs)
        table.add(
            "graceful stop: shards taken after (s)",
            "not measured" if handover is None else f"{handover:.1f}",
            fail=handover is None or handover > HANDOVER_BAR,
        )
        if self.graceful is not None:
            code = self.graceful[2]
            table.add("  its exit code", code, fail=code != 0)
        polling = self.polling_after_restart(logs)
        table.add(
            "after the PostgreSQL restart: instances polling",
            f"{polling}/{len(self.instances)}",
            fail=polling != len(self.instances),
        )
        crashes = [(i.name, c) for i in self.instances for c in i.crashes]
        table.add(
            "exits not caused by the run",
            ", ".join(f"{n}: {c}" for n, c in crashes) or 0,
            fail=bool(crashes),
        )
        table.add(
            "drained",
            f"yes, in {drain_seconds:.0f} s" if is_drained else "no",
            fail=not is_drained,
        )
        table.add(
            "graceful stop at the end: exit codes",
            ", ".join(str(c) for c in exits.values()),
            fail=any(c != 0 for c in exits.values()),
        )
        table.add(
            "RSS at the end (MiB)",
            ", ".join(f"{n} {v / 1024:.0f}" if v else f"{n} ?" for n, v in rss.items()),
        )

    def cause(self, at: float) -> str:
        before = [name for when, name in self.faults if when <= at]
        return before[-1] if before else "no fault"

    def stale_writes(self) -> int:
        server_log = self.postgres.log.read_text(errors="replace")
        return server_log.count(STALE) if "ERROR" in server_log else 0

    def takeover_seconds(self, takeover: Takeover, logs: dict[str, list[LogLine]]) -> float | None:
        """From the kill to the end of the first sweep of each new owner that started after
        it took the shards (its last "shards" line that took any, up to when the database
        showed every shard taken); the slowest new owner's."""
        if takeover.taken_at is None or not takeover.owners:
            return None
        ends = []
        for owner in takeover.owners:
            lines = logs.get(owner, [])
            takes = [
                line.at
                for line in lines
                if line.record.get("event") == "shards"
                and int(line.record.get("taken", 0)) > 0
                and takeover.at < line.at <= takeover.taken_at + 1.0
            ]
            took = takes[-1] if takes else takeover.taken_at
            sweep = next(
                (
                    line.at
                    for line in lines
                    if line.record.get("event") == "round"
                    and line.record.get("source") == SOURCE
                    and line.at - float(line.record.get("duration", 0)) >= took
                ),
                None,
            )
            if sweep is None:
                return None
            ends.append(sweep)
        return max(ends) - takeover.at

    def handover_seconds(self, logs: dict[str, list[LogLine]]) -> float | None:
        """From the graceful stop's SIGTERM to another instance taking shards."""
        if self.graceful is None:
            return None
        name, began, _ = self.graceful
        takes = [
            line.at
            for other, lines in logs.items()
            if other != name
            for line in lines
            if line.record.get("event") == "shards"
            and int(line.record.get("taken", 0)) > 0
            and line.at > began
        ]
        return min(takes) - began if takes else None

    def polling_after_restart(self, logs: dict[str, list[LogLine]]) -> int:
        """Instances with a sweep that began after PostgreSQL was back, within 30 s of it."""
        if self.pg_restart is None:
            return 0
        back = self.pg_restart[1]
        return sum(
            any(
                line.record.get("event") == "round"
                and line.record.get("source") == SOURCE
                and back <= line.at - float(line.record.get("duration", 0))
                and line.at <= back + 30
                for line in lines
            )
            for lines in logs.values()
        )


def _fenced(text: str) -> bool:
    return any(mark in text for mark in FENCED_OUT)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=4.0, help="of chaos (default 4)")
    parser.add_argument("--quick", action="store_true", help="about 90 s of chaos")
    parser.add_argument("--addresses", type=int, default=2000)
    parser.add_argument("--pace", type=float, default=0.1, help="seconds between transactions")
    parser.add_argument("--drain", type=float, default=120.0, help="deadline of the drain (s)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--scale",
        action="store_true",
        help="the scale run instead (bench/scale.py): 4 instances, no chaos",
    )
    parser.add_argument(
        "--scale-addresses", type=int, default=1_000_000, help="of the scale run (1,000,000)"
    )
    args = parser.parse_args(argv)
    if args.scale:
        import scale

        # Three sweeps at the goal's interval: the third is a steady one, its quiet targets
        # polled from the rests the second kept, the memory a share holds for good; every
        # address with a past, as a list of deposit addresses has (a rest holds a signature).
        addresses = str(args.scale_addresses)
        return scale.main(
            ["--addresses", addresses, "--every", "10m", "--sweeps", "3", "--history"]
        )
    started = time.monotonic()
    table = Chaos(args).run()
    print(table.render())
    print(f"({time.monotonic() - started:.0f} s)", flush=True)
    return 1 if table.failed else 0


if __name__ == "__main__":
    sys.exit(main())
