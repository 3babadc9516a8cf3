"""What the rest of the watcher asks of its state: the ``Store`` protocol.

The daemon (``watcher.app``, ``watcher.service``), the sender (``watcher.delivery``) and what
runs a daemon in process (``watcher.cli.demo``, ``watcher.ruletest``) are typed against this
protocol, never against an engine: the SQLite one (``watcher.state.store.AsyncSqliteStore``, one
process owning a file) or the PostgreSQL one (``watcher.state.pg_store.PostgresStore``, several
instances sharing one database); ``watcher.app.open_store`` picks it from the settings.
Nothing outside ``watcher.state`` reaches past it to a connection, SQL or a driver (an import
contract in ``pyproject.toml`` forbids the drivers elsewhere). The one-shot commands outside the
event loop (``watcher alerts``, ``status``, ``silence``) use ``watcher.state.commands``: on
SQLite the synchronous ``SqliteStore`` (over a file opened read-only for those that only read),
on PostgreSQL the engine in command mode, each call run to its end on the command's own event
loop.

Roles
-----
``Store`` is the union of its roles, each a protocol of its own, so that a part is typed against
what it uses: ``LeaseStore`` (the shards this instance holds: the lease loop, the sweeps),
``TargetStateStore`` (the targets' states and a step's commit: the sweeps, the commit path),
``OutboxStore`` (the sender), ``SilenceStore``, ``HistoryStore`` (the history, the sources'
rounds, what ``/metrics`` and ``status`` read) and ``RetentionStore`` (the pruner). Each engine
holds one repository per concern along the same lines (SQLite: ``watcher.state.store``;
PostgreSQL: ``watcher.state.pg_store``).

Transactions and what each call guarantees
------------------------------------------
Every writing call is ONE short transaction, committed when the call returns; when it raises,
the transaction rolled back and nothing of it was written (a caller may retry it as it was).
No transaction is ever held across a call: between two calls, the store holds no lock.

- ``commit_step``: a target's new state, the step's alerts and their deliveries, all or
  nothing. An alert whose ``dedup_key`` is recorded already is skipped with its deliveries, so
  a step redone after a crash repeats nothing. Drops the target's staged and prefetched copies.
- ``stage_state`` writes nothing: it holds a quiet step's state in memory (lost in a crash: a
  poll redone) until ``flush_states`` writes every staged state in one transaction (a failed
  flush keeps them staged, to be tried again). ``load_state`` sees staged states first.
- ``prefetch_states`` reads a chunk of states in one query; each is taken once by
  ``load_state`` or ``load_states``. Only this process's writes drop a prefetched copy.
- ``claim_due``: due deliveries moved from ``pending`` to ``sending`` in one transaction
  (nothing claimed when it raises); with ``group_limit``, each digest group is completed with
  its other due rows. ``release`` puts claimed rows back to ``pending`` (only those still
  ``sending``). ``requeue_interrupted``: every ``sending`` row back to ``pending`` (SQLite: the
  one process that sends calls it at start-up; PostgreSQL: nothing, an interrupted send's claim
  expires and any instance takes it). ``next_due``: a read, when the next pending delivery
  falls due (what the idle sender sleeps until).
- ``mark_sent`` / ``mark_retry`` / ``mark_dead``: the deliveries' fate and their alerts'
  status in one transaction; each returns the ids no longer in the table (the others are
  marked all the same). ``mark_sent`` with ``group`` records the digest send in it;
  ``mark_dead`` queues the ``reports`` (dead letters) of its ``GiveUp`` in it, so each is
  reported once.
- Leased shards: ``maintain_leases`` is one round of the lease loop (renew, take up to this
  instance's share, hand back the surplus); ``shards_held`` and ``holds`` say what this
  instance may poll now (SQLite: everything, ``None``). ``commit_step`` and ``flush_states``
  are fenced on PostgreSQL: a write to a shard no longer held raises ``LeaseLost`` (or, for a
  flush, drops that shard's staged states) and writes nothing of it.
- ``watch_outbox(wake)``: wakes the sender when another process queued deliveries (PostgreSQL's
  NOTIFY); returns at once when no other process shares the outbox.
- ``add_silence`` / ``expire_silence``: one transaction each.
- ``record_round``: this instance's last round of one source, upserted in its own transaction.
- ``prune_batches``: an asynchronous iterator; each step is one bounded transaction (other
  work may run between two steps), a pass stopped half-way leaves consistent rows.
- Reads (``load_state``, ``group_sends``, ``pending_count``, ``standing_alerts``, ``history``,
  ``list_silences``, ``active_silences``, ``summary``, ``status``) see the committed rows.

``commits`` counts the steps and flushes committed: a caller tells from it whether its work
wrote anything (the health signal "the database works again").

Errors: every call raises the store's errors (``watcher.core.errors``), never its driver's: an
engine maps them at its boundary (``watcher.state.database``, ``watcher.state.pg_errors``;
the driver's error as ``__cause__``). ``TransientStateError``: locked or busy, disk full, I/O,
connection lost; the call rolled back, retry it with backoff. ``PermanentStateError``: corrupt,
read-only, schema or constraint errors, a bug; retrying cannot help. A caller tells what it was
doing with ``error.during("claim deliveries")``. ``LeaseLost``: a fenced write on a shard this
instance no longer holds (``watcher.state.pg_leases.fenced``); nothing was written, drop the
shard. The SQLite engine, one process owning everything, never raises it.

Synchronous or asynchronous: asynchronous, but for the in-memory staging
------------------------------------------------------------------------
Every call that may reach the database is a coroutine (``async def``; ``prune_batches`` an
asynchronous iterator; ``close`` a coroutine, and ``async with`` closes the store). The reason: a
call of a synchronous interface holds the event loop for its whole length, whatever thread runs
it underneath. SQLite answers in tens of microseconds from a local file, but PostgreSQL is a
network round trip away (a managed database: milliseconds), and unreachable or restarting it
holds a call for a connect timeout: a synchronous store would then stall every poll, every send,
``/metrics`` and the lease renewal, so that a live instance would lose its shards because its
own store call was slow. With coroutines, the PostgreSQL engine awaits psycopg 3's async pool
(``psycopg_pool.AsyncConnectionPool``) and the loop goes on meanwhile.

The SQLite engine (``AsyncSqliteStore``) runs each call of its repositories (synchronous,
``sqlite3``) on one thread of its own, in the order called (SQLite has one writer; a flush of a
thousand states or a WAL checkpoint would otherwise hold the loop for tens of milliseconds), and
reads what is true now (a scrape's, ``watcher status``'s) on a second thread with a read-only
connection, so that they do not queue behind a sweep's flush. The states held in memory stay
on the loop's thread.

Two members stay synchronous, because no engine touches the database in them: ``commits`` (a
counter) and ``stage_state`` (it puts a quiet step's state in memory and says whether to flush;
the flush is the coroutine). ``stage_state`` runs on most polls of a sweep, and a plain call
keeps the per-poll CPU where it was. ``load_state`` and ``prefetch_states`` are coroutines
although the SQLite engine usually answers them from memory: a miss (and every prefetch) is a
query, which for PostgreSQL is a round trip the loop must not wait on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, Self

from watcher.core.events import AlertMessage, NewSilence, Silence, TargetState, WatchSince
from watcher.core.outbox_rows import (
    AlertRecord,
    DeadLetterReports,
    DeliveryRow,
    Destination,
    GroupSends,
    ResolvedDestinations,
)
from watcher.state.records import SourceRound
from watcher.state.retention import BATCH_ROWS, Pruned, WatchedTarget
from watcher.state.snapshot import Awaiting, StateSummary, StoreStatus


@dataclass(frozen=True)
class StepToCommit:
    """A step to commit (``TargetStateStore.commit_step``): ``target``'s new ``state`` of
    ``source``, the step's ``alerts`` and where each goes (``destinations``, resolved before the
    transaction: one outbox row per URL; none, a silenced alert), written together at ``now``."""

    source: str
    target: str
    state: TargetState
    alerts: Sequence[AlertMessage]
    destinations: ResolvedDestinations
    now: float

    @classmethod
    def of(
        cls,
        source: str,
        target: str,
        state: TargetState,
        alerts: Sequence[AlertMessage],
        destinations: Callable[[AlertMessage], Sequence[Destination]],
        now: float,
    ) -> StepToCommit:
        """The step, each alert's destinations resolved now by ``destinations``."""
        routed = ResolvedDestinations.of(alerts, destinations)
        return cls(source, target, state, alerts, routed, now)


@dataclass(frozen=True)
class GiveUp:
    """Deliveries given up (``OutboxStore.mark_dead``): ``delivery_ids`` dead at ``now`` after
    ``error``, and the dead letters saying so (``reports``), queued in the same transaction."""

    delivery_ids: int | Sequence[int]
    error: str
    now: float
    reports: DeadLetterReports | None = None


@dataclass(frozen=True)
class LeaseRound:
    """What one round of the lease loop did (``Store.maintain_leases``)."""

    held: int  # shards held after the round
    taken: int
    released: int  # handed back: the surplus over this instance's share
    lost: int  # found lapsed or taken over at the renewal
    live_instances: int
    seconds: float  # how long the round took (the renewal's latency)


class LeaseStore(Protocol):
    """Leased shards: which targets this instance may poll and write (the lease loop,
    ``watcher.service.leasing``; the sweeps)."""

    def shards_held(self) -> frozenset[int] | None:
        """The shards (``watcher.state.shards``) whose targets this instance polls now; None:
        every target (one instance owns the whole state). The same object for as long as they
        do not change: a sweep that sees the set it started with need not ask ``holds`` of each
        target."""

    def holds(self, source: str, target: str) -> bool:
        """Whether this instance may poll and write ``target`` of ``source`` now."""

    async def maintain_leases(self) -> LeaseRound | None:
        """One round of the lease loop (renew, take, hand back); None: no leases to keep."""


class TargetStateStore(Protocol):
    """The targets' state documents: loaded, staged, flushed, committed with a step's alerts
    (the sweeps and the commit path, ``watcher.service``)."""

    @property
    def commits(self) -> int:
        """Steps and flushes committed so far (a health signal: did my work write?)."""

    async def prefetch_states(self, source: str, targets: Sequence[str]) -> None: ...

    def stage_state(self, source: str, target: str, state: TargetState, now: float) -> bool:
        """Holds a quiet step's state (in memory: synchronous); whether it is time to
        ``flush_states``."""

    async def flush_states(self) -> int:
        """Writes the staged states in one transaction; how many."""

    async def load_state(self, source: str, target: str) -> TargetState | None: ...

    async def load_states(self, source: str, targets: Sequence[str]) -> list[TargetState | None]:
        """``load_state`` of each of ``targets``, in order: a sweep's batch in one await, the
        states not held in memory read in one query."""

    async def register_watch(self, source: str, targets: Sequence[str], since: WatchSince) -> int:
        """Keeps ``since`` as the moment the watch of each of ``targets`` began, for those with
        no state yet (their first row, in one transaction, durable before it returns); never
        changes a target that has one. How many were new."""

    async def commit_step(self, step: StepToCommit) -> list[int]:
        """State, alerts and deliveries in one transaction; the ids of the alerts inserted."""


class OutboxStore(Protocol):
    """The delivery outbox: claimed, marked, watched (the sender, ``watcher.delivery``)."""

    async def claim_due(
        self, now: float, limit: int = 100, group_limit: int = 0, skip_urls: Sequence[str] = ()
    ) -> list[DeliveryRow]: ...

    async def next_due(self, skip_urls: Sequence[str] = ()) -> float | None:
        """When the earliest pending delivery a claim could take falls due (its
        ``next_attempt_at``, on the clock ``claim_due`` is given), leaving out those to
        ``skip_urls``; None when there is none. On PostgreSQL, a URL another instance holds
        under a live claim is left out too (that instance sends its rows)."""

    async def group_sends(self, group_key: str, url_id: str) -> GroupSends: ...

    async def release(
        self, delivery_ids: Sequence[int], not_before: float | None = None
    ) -> None: ...

    async def requeue_interrupted(self) -> int: ...

    async def mark_sent(
        self, delivery_ids: int | Sequence[int], now: float, group: tuple[str, str] | None = None
    ) -> list[int]: ...

    async def mark_retry(
        self, delivery_ids: int | Sequence[int], error: str, next_attempt_at: float
    ) -> list[int]: ...

    async def mark_dead(self, give_up: GiveUp) -> list[int]: ...

    async def pending_count(self) -> int: ...

    async def standing_alerts(
        self, url_ids: Sequence[str], resolved_since: float
    ) -> list[DeliveryRow]:
        """The alerts firing now (``firing_alerts``) and the resolutions queued since
        ``resolved_since``, one row per delivery of each to one of ``url_ids``, whatever its
        status (the Alertmanager channel posts them again: ``watcher.delivery.alertmanager``)."""

    async def watch_outbox(self, wake: Callable[[], None]) -> None:
        """Calls ``wake`` whenever another process queued deliveries, until cancelled; returns
        at once when no other process shares the outbox (this process wakes its own sender)."""


class SilenceStore(Protocol):
    """Silences: added, listed, read before each commit, expired."""

    async def add_silence(self, new: NewSilence, now: float) -> Silence: ...

    async def list_silences(self, now: float, include_expired: bool = False) -> list[Silence]: ...

    async def active_silences(self, now: float) -> list[Silence]: ...

    async def expire_silence(self, silence_id: int, now: float) -> bool: ...


class HistoryStore(Protocol):
    """The alert history, each source's last round and what is true now (``/metrics``,
    ``watcher status``, ``watcher alerts``)."""

    async def summary(self) -> StateSummary:
        """The firing alerts and the outbox's figures (``/metrics``, ``/healthz``)."""

    async def awaiting_first_poll(self) -> list[Awaiting]:
        """Per source, the targets whose watch began and whose first poll has not come, and
        the oldest start among them (``/metrics``)."""

    async def status(self, cadence_key: str) -> StoreStatus:
        """What ``watcher status`` shows: the firing alerts, the outbox, each source's last
        round of each instance, the instances sharing the store and their shards (PostgreSQL),
        and the intervals stored under ``cadence_key`` in the targets' states (SQLite)."""

    async def history(self, limit: int = 50, rule: str | None = None) -> list[AlertRecord]: ...

    async def record_round(self, round_: SourceRound) -> None: ...


class RetentionStore(Protocol):
    """Retention: the history older than a cutoff deleted in bounded batches (the pruner,
    ``watcher.service.pruning``)."""

    def prune_batches(
        self, watched: WatchedTarget, now: float, retention: float, limit: int = BATCH_ROWS
    ) -> AsyncIterator[Pruned]:
        """One bounded transaction per step (an ``async def`` with ``yield`` in an engine)."""


class Store(
    LeaseStore,
    TargetStateStore,
    OutboxStore,
    SilenceStore,
    HistoryStore,
    RetentionStore,
    Protocol,
):
    """The watcher's state, whatever the engine (see the module's docstring)."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc_info: object) -> None:
        """Closes (``close``), however the block ended."""

    async def start(self) -> None:
        """Connects (an engine built without I/O): the daemon calls it before any other call."""

    async def close(self) -> None:
        """Flushes the staged states if it can (a failure is a poll redone), then closes."""


# The roles ``Store`` is the union of.
ROLES: tuple[type, ...] = tuple(base for base in Store.__bases__ if base is not Protocol)


def store_members() -> dict[str, object]:
    """Every member the ``Store`` protocol declares, its roles' included, by name (what an
    engine must have)."""
    members: dict[str, object] = {}
    for declared in (*ROLES, Store):
        members.update(vars(declared))
    return members
