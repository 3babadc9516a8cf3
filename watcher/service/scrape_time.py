"""The part of ``/metrics`` read when scraped, not counted as it happens: RPC retries and 429s,
the calls the current cadences project, the outbox and the firing alerts.

The outbox and the firing alerts come from the store (a round trip away on PostgreSQL):
``refresh`` reads them on the event loop every second while scrapes come
(``watcher.service.http``), and a scrape renders the last reading in a thread, from memory
only."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from watcher.budget.cadences import interval_bands
from watcher.budget.cost import monthly_calls
from watcher.core.errors import StateError
from watcher.core.events import Silence
from watcher.ledger.rpc import RpcStats
from watcher.state import snapshot
from watcher.state.snapshot import Awaiting, StateSummary

RATE_LIMITED = "RateLimited"
AWAITING_EVERY = 10.0  # seconds between two reads of the targets awaiting their first poll

__all__ = ["ScrapeReads", "ScrapeTime"]


@dataclass(frozen=True)
class ScrapeReads:
    """What a scrape reads. ``rpc_stats``: the RPC client's counters (None: no client to show).
    ``read_state``: the store's ``summary`` (None: no state to show, nothing read).
    ``cadences``: the calls a second at the current cadences and the current interval of every
    adaptive target (``watcher.budget.cadences``); ``kind_of``: a rule's kind (the rules in
    force; "" for one no longer in force); ``read_silences``: the store's ``active_silences``
    (a firing alert one covers is labelled ``silenced="true"``); ``read_awaiting``: the store's
    ``awaiting_first_poll`` (None: not shown)."""

    rpc_stats: RpcStats | None = None
    read_state: Callable[[], Awaitable[StateSummary]] | None = None
    read_awaiting: Callable[[], Awaitable[list[Awaiting]]] | None = None
    cadences: Callable[[], tuple[float, list[float]] | None] = lambda: None
    kind_of: Callable[[str], str] = lambda rule: ""
    read_silences: Callable[[float], Awaitable[list[Silence]]] | None = None


class ScrapeTime(Collector):
    """Values read when scraped: RPC retries and 429s, the cadences, the outbox, the firing
    alerts."""

    def __init__(self, clock: Callable[[], float], reads: ScrapeReads) -> None:
        self._clock = clock
        self._read_awaiting = reads.read_awaiting
        self._awaiting: list[Awaiting] | None = None
        self._awaiting_due = float("-inf")  # when the targets awaiting are read again
        self._rpc_stats = reads.rpc_stats
        self._read_state = reads.read_state
        self._read: StateSummary | None = None
        self._read_silences = reads.read_silences
        self._silences: list[Silence] = []
        self._cadences_now = reads.cadences
        self._kind_of = reads.kind_of

    async def refresh(self) -> None:
        """Reads the firing alerts and the outbox (``Store.summary``) for the next scrape and
        ``state``; a failure leaves None (unreadable)."""
        now = self._clock()
        if self._read_awaiting is not None and now >= self._awaiting_due:
            # At most every AWAITING_EVERY: while a million targets await their first poll,
            # counting them is a second's read, and the figure moves over minutes.
            self._awaiting_due = now + AWAITING_EVERY
            try:
                self._awaiting = await self._read_awaiting()
            except StateError:
                self._awaiting = None
        if self._read_state is None:
            return
        try:
            self._read = await self._read_state()
            if self._read_silences is not None:
                self._silences = await self._read_silences(self._clock())
        except StateError:
            self._read = None

    def state(self) -> StateSummary | None:
        """The firing alerts and the outbox as the last ``refresh`` read them (None: not read,
        or the store cannot be read)."""
        return self._read

    def collect(self) -> Iterator[Metric]:
        stats = self._rpc_stats
        if stats is not None:
            yield CounterMetricFamily("watcher_rpc_retries", "RPC attempts retried", stats.retries)
            yield CounterMetricFamily(
                "watcher_rpc_rate_limited",
                "RPC attempts answered 429 (rate limited)",
                stats.errors[RATE_LIMITED],
            )
        yield from self._cadences()
        yield from self._first_polls()
        state = self._read
        if state is None:
            return
        firing, outbox = state
        now = self._clock()
        oldest = 0.0 if outbox.oldest_pending_at is None else now - outbox.oldest_pending_at
        yield GaugeMetricFamily("watcher_outbox_depth", "Deliveries pending", outbox.pending)
        yield GaugeMetricFamily(
            "watcher_outbox_oldest_pending_seconds", "Age of the oldest pending delivery", oldest
        )
        yield GaugeMetricFamily("watcher_dead_deliveries", "Deliveries given up", outbox.dead)
        yield GaugeMetricFamily("watcher_firing_alerts", "Alerts firing now", len(firing))
        yield self._alerts(firing, now)

    def _alerts(self, firing: Iterable[snapshot.Firing], now: float) -> Metric:
        """One series per state alert firing now, as Prometheus's ALERTS; a silenced one is
        kept (a dashboard still shows it) and labelled ``silenced="true"``, so that a rule
        paging on it can leave it out."""
        family = GaugeMetricFamily(
            "watcher_alert_firing",
            "1 for each state alert firing now (silenced: whether a watcher silence covers it)",
            labels=("rule", "kind", "severity", "subject", "silenced"),
        )
        seen: set[tuple[str, str]] = set()
        for alert in firing:
            if (alert.rule, alert.subject) in seen:
                continue
            seen.add((alert.rule, alert.subject))
            kind = self._kind_of(alert.rule)
            silenced = "true" if self._silenced(alert.rule, alert.subject, now) else "false"
            family.add_metric((alert.rule, kind, alert.severity, alert.subject, silenced), 1)
        return family

    def _first_polls(self) -> Iterator[Metric]:
        """The targets whose watch began and whose first poll has not come, per source, and
        how long the oldest of them has waited (0 series for a source with none waiting)."""
        if self._awaiting is None:
            return
        now = self._clock()
        targets = GaugeMetricFamily(
            "watcher_targets_awaiting_first_poll",
            "Targets whose watch began and whose first poll has not come, by source",
            labels=("source",),
        )
        oldest = GaugeMetricFamily(
            "watcher_first_poll_oldest_wait_seconds",
            "How long the target waiting longest for its first poll has waited, by source",
            labels=("source",),
        )
        for waiting in self._awaiting:
            targets.add_metric((waiting.source,), waiting.targets)
            oldest.add_metric((waiting.source,), max(0.0, now - waiting.oldest_since))
        yield targets
        yield oldest

    def _silenced(self, rule: str, subject: str, now: float) -> bool:
        return any(
            s.rule == rule and s.subject in (None, subject) and s.is_active(now)
            for s in self._silences
        )

    def _cadences(self) -> Iterator[Metric]:
        view = self._cadences_now()
        if view is None:
            return
        per_second, intervals = view
        yield GaugeMetricFamily(
            "watcher_projected_monthly_calls",
            "RPC calls a (30-day) month at the current intervals (one call per poll)",
            monthly_calls(per_second),
        )
        cumulative, buckets = 0, []
        for bound, count in interval_bands(intervals):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else f"{bound:g}", cumulative))
        yield HistogramMetricFamily(
            "watcher_target_interval_seconds",
            "Current poll interval of each target of the rules with max_every",
            buckets=buckets,
            sum_value=sum(intervals),
        )
