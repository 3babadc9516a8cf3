"""The daemon's Prometheus metrics (``/metrics``) and health verdict (``/healthz``).

One ``CollectorRegistry`` per daemon (never the global one), so that tests can run several.
Counters are fed by small hooks (a poll's outcome, an RPC request's latency, a delivery's
outcome); what is read when scraped (RPC retries, the cadences, the outbox and the firing alerts,
read from the store every second on the event loop while scraped: ``refresh``) is
``watcher.service.scrape_time``'s, so that the scrape itself renders in a thread from memory only.

The values the rules observe (``ObservedValues``) are kept in memory: the latest samples of each
watched target, taken from accepted answers only (an answer is recorded once it is evidence; a
failed or doubted poll changes nothing, so the last values stay). The samples of a target are
replaced as a whole by its next accepted answer (a holder that left the top leaves with it); a
reload drops those of the targets and subjects no rule watches any more. The polls write on the
event loop while a scrape renders in a thread: each write swaps one immutable tuple in under a
lock, and a scrape copies the dict under the same lock.

A scrape renders those values itself (``ObservedValues.exposition``), as prometheus_client would,
but each target's lines only when its samples changed: an answer equal to the last keeps the
samples it replaces, and the lines rendered of them are reused. 10,000 balances and 1,000
validators (17,000 series) render in about 10 ms instead of 60-90 ms through prometheus_client's
families (bench/scrape.py), with the event loop polling beside it."""

from __future__ import annotations

import platform
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
    utils,
)

from watcher.alerting.builtin import RoundHealth, StateHealth
from watcher.alerting.messages import PresentedRule
from watcher.core.events import BELOW_THRESHOLD_FACT, AlertMessage
from watcher.core.outbox_rows import DeliveryRow
from watcher.core.version import __version__
from watcher.kinds import SAMPLERS
from watcher.kinds.toolkit.metric_values import METRICS, MetricSpec, Sample, Sampler
from watcher.service.loop_lag import BUCKETS as LAG_BUCKETS
from watcher.service.scrape_time import ScrapeReads, ScrapeTime
from watcher.state import snapshot
from watcher.state.interface import LeaseRound
from watcher.state.snapshot import StateSummary

__all__ = ["HealthVerdict", "Metrics", "ObservedValues", "StateSummary", "health_verdict"]


@dataclass(slots=True)
class _PendingPolls:
    """A source's polls since the counters were last fed."""

    polls: int = 0
    failures: int = 0
    last_success: float | None = None  # the clock at the last successful one


@dataclass(frozen=True)
class HealthVerdict:
    healthy: bool
    reason: str  # what /healthz says in its body


class Metrics:
    def __init__(
        self,
        clock: Callable[[], float],
        reads: ScrapeReads | None = None,
        *,
        heartbeat: bool = False,
        shared_state: bool = False,
    ) -> None:
        """``reads``: what is read when scraped (``watcher.service.scrape_time``; None: nothing,
        no RPC client's counters, no state). ``heartbeat``: one is configured; ``shared_state``:
        the state is a database instances share (state_url). Without them their gauges are not
        exported at all: a 0 would read as a heartbeat 56 years old and shards nobody holds."""
        self.registry = CollectorRegistry(auto_describe=False)
        self._clock = clock
        r = self.registry
        started = clock()
        self.polls = Counter(
            "watcher_polls", "Polls of a target, by source", ["source"], registry=r
        )
        self.poll_failures = Counter(
            "watcher_poll_failures",
            "Polls that failed (not evidence), by source",
            ["source"],
            registry=r,
        )
        self.poll_errors = Counter(
            "watcher_poll_errors",
            "Polls that raised an unexpected error (a bug, or a stored "
            "state it cannot read): the target is skipped, the sweep goes on, by source",
            ["source"],
            registry=r,
        )
        self.last_success = Gauge(
            "watcher_last_successful_poll_timestamp_seconds",
            "When a poll of the source last succeeded (Unix time)",
            ["source"],
            registry=r,
        )
        self.rpc_latency = Histogram(
            "watcher_rpc_latency_seconds",
            "Duration of one RPC HTTP request",
            ["method"],
            registry=r,
        )
        self._rpc_latency_of: dict[str, Histogram] = {}
        self.notifications = Counter(
            "watcher_notifications",
            "Notification sends by channel and outcome (sent, failed, dead)",
            ["channel", "outcome"],
            registry=r,
        )
        self.disagreements = Counter(
            "watcher_rpc_disagreements",
            "Polls under quorum whose endpoints answered but "
            "disagreed (not evidence, not failures), by source",
            ["source"],
            registry=r,
        )
        # Several instances on one database (leased shards): what this instance holds and how
        # its lease rounds go.
        self.shards_held = (
            Gauge("watcher_shards_held", "Shards this instance holds (leased)", registry=r)
            if shared_state
            else None
        )
        self.lease_renew = Histogram(
            "watcher_lease_round_seconds",
            "Duration of one lease round (renew, take, hand back)",
            registry=r,
        )
        self.shard_moves = Counter(
            "watcher_shard_moves",
            "Shards taken (a takeover or a free shard), released (surplus) or lost",
            ["move"],
            registry=r,
        )
        self.claims = Histogram(
            "watcher_delivery_claim_seconds",
            "Duration of one claim of due deliveries (a shared outbox: waits on other "
            "instances' claims show here)",
            registry=r,
        )
        self.live_instances = (
            Gauge("watcher_live_instances", "Instances sharing the database, alive", registry=r)
            if shared_state
            else None
        )
        self.rule_polls = Counter(
            "watcher_rule_polls",
            "Polls of a target made for a rule (a target shared by rules counts for each), "
            "by rule: the calls each rule costs",
            ["rule"],
            registry=r,
        )
        self._rule_children: dict[str, Counter] = {}
        self.balance_read_count = Counter(
            "watcher_balance_reads",
            "Balance reads of watched addresses that moved (new_transactions' amounts: a key of "
            "a getMultipleAccounts call, and a getTokenAccounts call with tokens: true), by "
            "source; rpc.budget pays for them",
            ["source"],
            registry=r,
        )
        self.events_suppressed = Counter(
            "watcher_events_suppressed",
            "Events kept in the history and not notified, by rule and reason (below_threshold: "
            "every change below the rule's thresholds; failed: only failed transactions)",
            ["rule", "reason"],
            registry=r,
        )
        self.budget_deferred = Counter(
            "watcher_budget_deferred_polls",
            "Polls of due targets put off to a later sweep because rpc.budget's limit over 10 "
            "minutes (or its pace) had no room for them, by source",
            ["source"],
            registry=r,
        )
        self.build_info = Gauge(
            "watcher_build_info",
            "1, labelled with the watcher's version and Python's",
            ["version", "python_version"],
            registry=r,
        )
        self.build_info.labels(__version__, platform.python_version()).set(1)
        # The process's CPU, memory and file descriptors, and the platform, as every exporter.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self.heartbeat_success: Gauge | None = None
        if heartbeat:
            self.heartbeat_success = Gauge(
                "watcher_heartbeat_last_success_timestamp_seconds",
                "When the heartbeat's ping was last accepted (Unix time; the daemon's start "
                "until one is), only with heartbeat: configured",
                registry=r,
            )
            # Until the first ping is accepted, the start: a heartbeat never accepted is stale
            # by the time since, not by the 56 years since 1970.
            self.heartbeat_success.set(started)
        # As Prometheus and Alertmanager export theirs: the start counts as a successful load
        # (a daemon whose files are broken does not start).
        self.reload_successful = Gauge(
            "watcher_config_last_reload_successful",
            "1: the last reload (SIGHUP) of the settings and rules was put in force, 0: it was "
            "refused and the previous ones keep running",
            registry=r,
        )
        self.reload_successful.set(1)
        self.reload_success_at = Gauge(
            "watcher_config_last_reload_success_timestamp_seconds",
            "When the settings and rules were last loaded successfully, at the start or by a "
            "reload (Unix time)",
            registry=r,
        )
        self.reload_success_at.set(started)
        # The values the rules observe (accepted answers only): rendered by ``exposition``
        # itself, before the registry (each target's lines kept while its values stay).
        self.observed = ObservedValues()
        self.scrape_time = ScrapeTime(clock, reads or ScrapeReads())
        r.register(self.scrape_time)
        # Last: a scrape reads it after rendering everything else, so that a scrape's own hold
        # of the loop (if any) shows in the next one.
        self.loop_lag = Histogram(
            "watcher_event_loop_lag_seconds",
            "How late the event loop's tick (every http.loop_lag_every) woke: how long work "
            "held the event loop",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self._poll_children: dict[str, tuple[Counter, Gauge, Counter]] = {}
        # Polls counted in plain numbers and added to the counters once a round and before each
        # scrape (``flush_polls``): a counter's lock and a gauge set per poll were 4% of a sweep.
        self._pending_polls: dict[str, _PendingPolls] = {}
        self._pending_rules: dict[str, int] = {}

    # -- hooks ----------------------------------------------------------------------------------

    def polled(self, source: str, ok: bool, count: int = 1) -> None:
        """``count`` polls of targets of ``source``, succeeded or not; on the counters from the
        next ``flush_polls``."""
        pending = self._pending_polls.get(source)
        if pending is None:
            pending = self._pending_polls[source] = _PendingPolls()
        pending.polls += count
        if ok:
            pending.last_success = self._clock()
        else:
            pending.failures += count

    def flush_polls(self) -> None:
        """The polls counted since the last flush, added to their counters."""
        pending_polls, self._pending_polls = self._pending_polls, {}
        for source, pending in pending_polls.items():
            children = self._poll_children.get(source)
            if children is None:
                children = self._poll_children[source] = (
                    self.polls.labels(source),
                    self.last_success.labels(source),
                    self.poll_failures.labels(source),
                )
            polls, last_success, failures = children
            polls.inc(pending.polls)
            if pending.last_success is not None:
                last_success.set(pending.last_success)
            if pending.failures:
                failures.inc(pending.failures)
        pending_rules, self._pending_rules = self._pending_rules, {}
        for rule, count in pending_rules.items():
            child = self._rule_children.get(rule)
            if child is None:
                child = self._rule_children[rule] = self.rule_polls.labels(rule)
            child.inc(count)

    def suppressed(self, alerts: Iterable[AlertMessage]) -> None:
        """Count the committed alerts kept below their rule's thresholds."""
        for alert in alerts:
            below = alert.facts.get(BELOW_THRESHOLD_FACT)
            if isinstance(below, dict):
                self.events_suppressed.labels(alert.rule, str(below.get("reason"))).inc()

    def polled_for(self, rules: Iterable[PresentedRule], count: int = 1) -> None:
        """``count`` polls of targets, each made for these rules; on the counters from the next
        ``flush_polls``."""
        pending = self._pending_rules
        for rule in rules:
            name = rule.name
            pending[name] = pending.get(name, 0) + count

    def budget_deferred_polls(self, source: str, polls: int) -> None:
        """Due polls put off by the budget's hard limit (``watcher.budget.planning``)."""
        self.budget_deferred.labels(source).inc(polls)

    def balance_reads(self, source: str, reads: int) -> None:
        """Balance reads of addresses that moved, in one sweep of ``source``."""
        self.balance_read_count.labels(source).inc(reads)

    def poll_raised(self, source: str) -> None:
        """A poll that raised (``watcher.service.target_pipeline.PollFaults``): counted as a failed
        poll too."""
        self.polled(source, ok=False)
        self.poll_errors.labels(source).inc()

    def rpc_request(self, method: str, seconds: float) -> None:
        # Each method's series looked up once: ``labels`` per request was 2% of a sweep's CPU.
        series = self._rpc_latency_of.get(method)
        if series is None:
            series = self._rpc_latency_of[method] = self.rpc_latency.labels(method)
        series.observe(seconds)

    def delivered(self, channel: str, outcome: str) -> None:
        self.notifications.labels(channel, outcome).inc()

    def claimed(self, seconds: float) -> None:
        self.claims.observe(seconds)

    def given_up(self, row: DeliveryRow, error: str) -> None:
        self.delivered(row.channel, "dead")

    def lease_round(self, done: LeaseRound) -> None:
        if self.shards_held is not None:
            self.shards_held.set(done.held)
        if self.live_instances is not None:
            self.live_instances.set(done.live_instances)
        self.lease_renew.observe(done.seconds)
        for move, count in (
            ("taken", done.taken),
            ("released", done.released),
            ("lost", done.lost),
        ):
            if count:
                self.shard_moves.labels(move).inc(count)

    def disagreed(self, source: str) -> None:
        self.disagreements.labels(source).inc()

    def heartbeat_accepted(self, at: float) -> None:
        if self.heartbeat_success is not None:
            self.heartbeat_success.set(at)

    def reloaded(self, ok: bool) -> None:
        """A reload (SIGHUP) put in force (``ok``) or refused."""
        self.reload_successful.set(1 if ok else 0)
        if ok:
            self.reload_success_at.set(self._clock())

    def loop_lagged(self, seconds: float) -> None:
        """A tick of ``watcher.service.loop_lag`` woke ``seconds`` late."""
        self.loop_lag.observe(seconds)

    # -- reading --------------------------------------------------------------------------------

    def exposition(self) -> bytes:
        """Everything ``/metrics`` shows: the observed values, then the registry's."""
        return self.observed.exposition() + generate_latest(self.registry)

    async def refresh(self) -> None:
        """Reads the firing alerts and the outbox for the next scrapes and ``state``; the polls
        counted so far go on the counters (``HttpEndpoint.keep_reading``, every second)."""
        self.flush_polls()
        await self.scrape_time.refresh()

    def state(self) -> StateSummary | None:
        """The firing alerts and the outbox as the last ``refresh`` read them, or None while
        the store cannot be read."""
        return self.scrape_time.state()


def health_verdict(
    rounds: RoundHealth,
    state: StateHealth,
    outbox: snapshot.Outbox | None,
    now: float,
    stuck_after: float,
    *,
    reload_refused: bool = False,
) -> HealthVerdict:
    """Healthy while polls succeed, the outbox drains and the last reload was put in force;
    else why not (pure)."""
    if rounds.failed_rounds:
        return HealthVerdict(
            False,
            f"polls failing: {rounds.failed_rounds} failed rounds in a row; "
            f"last error: {rounds.last_error}",
        )
    if not state.healthy:
        return HealthVerdict(False, f"state database failing: {state.last_error}")
    if outbox is None:
        return HealthVerdict(False, "state database unreadable")
    if outbox.oldest_pending_at is not None and now - outbox.oldest_pending_at > stuck_after:
        age = now - outbox.oldest_pending_at
        return HealthVerdict(
            False,
            f"outbox not draining: {outbox.pending} deliveries pending, the oldest for {age:.0f}s",
        )
    if reload_refused:
        # The files on disk are not what runs: the next restart would fail or change the rules.
        return HealthVerdict(
            False, "last reload refused: the previous settings and rules keep running (see the log)"
        )
    return HealthVerdict(True, "ok")


# -- the values the rules observe ------------------------------------------------------------------

Key = tuple[str, str]  # (source, target)
Watching = Callable[[str, str], Sequence[Any]]  # (source, target) -> the rules watching it
Line = tuple[str, str, str]  # (metric name, series: name and labels, the line)

# A value as prometheus_client writes it (Go's float format: "1e+21", "+Inf", "NaN" ...).
go_float = cast(Callable[[float], str], utils.floatToGoString)


class ObservedValues:
    """The latest samples of each watched target, from accepted answers only, and their
    lines in the text format."""

    def __init__(self, samplers: Mapping[str, Sampler] = SAMPLERS) -> None:
        self._samplers = samplers
        self._lock = threading.Lock()
        self._values: dict[Key, tuple[Sample, ...]] = {}
        # Each target's samples as lines of the text format, made when they change, by the
        # poll (or the reload) that changed them: a scrape only joins them. It renders in a
        # thread that needs the GIL the polls hold; 10,000 lines made there took it 20 ms.
        self._lines: dict[Key, tuple[Line, ...]] = {}
        # Each change of ``_values`` counts one; the last text rendered and the count it was
        # rendered at: a scrape while no sample changed answers that text again.
        self._changes = 0
        self._text: tuple[int, bytes] = (-1, b"")

    def accepted(self, source: str, target: str, observation: Any, watching: Watching) -> None:
        """An answer taken as evidence, with the rules watching its target now (none: a target
        a reload dropped while its poll was under way, which shows nothing any more)."""
        sampler = self._samplers.get(source)
        if sampler is None:
            return  # a source that shows no value (signatures, assets ...)
        rules = watching(source, target)
        samples = sampler(rules, target, observation) if rules else ()
        key = (source, target)
        if not samples:
            with self._lock:
                if self._values.pop(key, None) is not None:
                    del self._lines[key]
                    self._changes += 1
            return
        if self._values.get(key) == samples:  # the same: its lines are kept
            return
        lines = tuple(map(sample_line, samples))
        with self._lock:
            self._values[key], self._lines[key] = samples, lines
            self._changes += 1

    def retain(self, watching: Watching) -> None:
        """After a reload: only the targets some rule watches (``watching(source, target)``)
        keep their samples, and of those only the ones about a subject still watched. Run in a
        thread (a million targets take a while): a target a poll wrote meanwhile keeps what
        that poll wrote, made with the new rules."""
        seen = self.current()
        kept: dict[Key, tuple[tuple[Sample, ...], tuple[Line, ...] | None]] = {}
        for key, samples in seen.items():
            rules = watching(*key)
            if not rules:
                continue
            if all(sample.subject is None for sample in samples):
                kept[key] = (samples, None)  # unchanged: its lines too
                continue
            # Only validators and fee rules name subjects: a few rules, a few keys each.
            subjects = {name for rule in rules for name in (rule.name, *rule.watched)}
            still = tuple(s for s in samples if s.subject is None or s.subject in subjects)
            if still:
                kept[key] = (still, tuple(map(sample_line, still)))
        with self._lock:
            self._changes += 1
            for key, samples in seen.items():
                if self._values.get(key) is not samples:
                    continue  # written since
                if key not in kept:
                    del self._values[key], self._lines[key]
                    continue
                still, lines = kept[key]
                if lines is not None:
                    self._values[key], self._lines[key] = still, lines

    def current(self) -> dict[Key, tuple[Sample, ...]]:
        """A copy, safe to read while the polls go on."""
        with self._lock:
            return dict(self._values)

    def exposition(self) -> bytes:
        """The observed values in the text format (0.0.4): one family (a gauge, as a rule) per
        metric that has samples, sorted by name, each series once (the first target's), as
        prometheus_client renders them. Run in a thread."""
        with self._lock:
            changes = self._changes
            if self._text[0] == changes:
                return self._text[1]
            every = list(self._lines.values())
        families: dict[str, list[str]] = {}
        seen: set[str] = set()
        for lines in every:
            for name, series, line in lines:
                if series not in seen:
                    seen.add(series)
                    families.setdefault(name, []).append(line)
        text: list[str] = []
        for name, lines_of in sorted(families.items()):
            spec = METRICS[name]
            text += (f"# HELP {name} {_help(spec)}\n# TYPE {name} {_type(spec)}\n", *lines_of)
        exposition = "".join(text).encode()
        self._text = (changes, exposition)
        return exposition


def sample_line(sample: Sample) -> Line:
    """``name{label="value",...} value``: labels sorted by name, values escaped (backslash,
    newline, double quote) and the value written as Go writes a float, as prometheus_client."""
    names = METRICS[sample.name].labels
    series = sample.name
    if names:
        pairs = sorted(zip(names, sample.labels, strict=False))
        series += "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs) + "}"
    return sample.name, series, f"{series} {go_float(sample.value)}\n"


def _escape(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def _help(spec: MetricSpec) -> str:
    return spec.help.replace("\\", r"\\").replace("\n", r"\n")


def _type(spec: MetricSpec) -> str:
    return "untyped" if spec.untyped else "gauge"
