"""The delivery path under faults: a channel that stalls, a database that fails.

Real parts: local HTTP receivers, a SQLite file. Only the database failure is simulated (a
store whose writes raise what SQLite raises on a full disk or a held lock)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Coroutine, Sequence
from contextlib import closing
from typing import Any

import pytest
import structlog.testing

from watcher.alerting.builtin import StateHealth
from watcher.config.sections import DeliverySettings
from watcher.core.errors import PermanentStateError, TransientStateError
from watcher.core.events import AlertMessage
from watcher.delivery.apprise_adapter import AppriseNotifier
from watcher.delivery.channels import Channels
from watcher.delivery.notifier import Message, Outcome
from watcher.delivery.outbox_sender import DELIVERY_DEFAULTS, Sender, SendSettings
from watcher.state.database import state_error
from watcher.state.interface import StepToCommit
from watcher.state.store import AsyncSqliteStore, SqliteStore
from watcher.testing.receivers import JsonReceiver, TrickleReceiver

from support.sending import alert, delivery_settings

ID_HEADER = "X-Watcher-Id"


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_sender(
    store: SqliteStore,
    urls: Sequence[str],
    clock: FakeClock,
    delivery: DeliverySettings = DELIVERY_DEFAULTS,
    **kwargs: Any,
) -> Sender:
    return Sender(
        AsyncSqliteStore(store),  # the engine runs the test's store: its failures, mapped
        Channels.of({"ops": list(urls)}),
        clock=clock,
        # Retries from the default first_retry, 2 s, without jitter.
        settings=SendSettings(delivery, random=lambda: 0.0, db_retry=(0.01, 0.05)),
        **kwargs,
    )


def enqueue(store: SqliteStore, sender: Sender, clock: FakeClock, *alerts: AlertMessage) -> None:
    store.commit_step(
        StepToCommit.of("signatures", "addr1", {}, alerts, sender.destinations, clock())
    )


def statuses(store: SqliteStore) -> list[tuple[str, str, int]]:
    """(alert title, delivery status, attempts) for every delivery, oldest alert first."""
    return [
        (record.alert.title, d.status, d.attempts)
        for record in reversed(store.history(limit=1000))
        for d in record.deliveries
    ]


def titles(receiver: JsonReceiver) -> list[str]:
    return [post["title"] for post in receiver.received]


async def until(predicate: Callable[[], object], within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


# -- a channel that stalls ----------------------------------------------------------------------


async def test_a_stalled_send_times_out_is_retried_and_never_repeats_a_message(
    tmp_store: SqliteStore,
) -> None:
    """A receiver trickling its answer. The send gives up after send_timeout (a
    failed attempt, rescheduled); while the stalled send still runs, its URL gets nothing
    else; when it turns out accepted, that counts: the message is not posted twice."""
    with TrickleReceiver() as slow:
        clock = FakeClock()
        sender = make_sender(
            tmp_store, [slow.url], clock, delivery=delivery_settings(send_timeout=0.5)
        )
        enqueue(tmp_store, sender, clock, alert("k1"))

        assert await sender.send_due() == 0
        assert slow.stalled == 1
        [(_, status, attempts)] = statuses(tmp_store)
        assert (status, attempts) == ("pending", 1)
        [delivery] = tmp_store.history()[0].deliveries
        assert "no answer within 0.5s" in (delivery.last_error or "")

        clock.advance(2.0)  # the retry is due, but the stalled send has not ended
        assert await sender.send_due() == 0
        assert len(slow.received) == 1
        assert statuses(tmp_store) == [("[warning] treasury: k1", "pending", 2)]

        slow.release()  # the channel answers 200 to the first post after all
        await until(lambda: slow.stalled == 0)
        clock.advance(4.0)
        assert await sender.send_due() == 1
        assert titles(slow) == ["[warning] treasury: k1"]
        assert statuses(tmp_store) == [("[warning] treasury: k1", "sent", 3)]


# -- the notification id ------------------------------------------------------------------------


async def test_each_webhook_message_carries_a_stable_id_the_same_on_every_retry(
    tmp_store: SqliteStore, json_receiver: JsonReceiver
) -> None:
    clock = FakeClock()
    sender = make_sender(tmp_store, [json_receiver.url], clock)
    enqueue(tmp_store, sender, clock, alert("k1"), alert("k2"))
    json_receiver.refuse(1)

    await sender.send_due()  # k1 refused, k2 waits behind it
    clock.advance(2.0)
    assert await sender.send_due() == 2
    assert titles(json_receiver) == ["[warning] treasury: k1", "[warning] treasury: k2"]
    first, second = (headers.get(ID_HEADER) for headers in json_receiver.headers)
    assert first and second and first != second
    assert json_receiver.paths[0] == json_receiver.paths[1]  # the refused post: same URL


# -- a database that fails ----------------------------------------------------------------------


class FailingStore(SqliteStore):
    """The real store, except that the named methods first fail with the driver's ``error``
    ``times`` times (after rolling back, as SQLite does), mapped as the store maps it."""

    def __init__(self, path: Any, failures: dict[str, int], error: sqlite3.Error) -> None:
        super().__init__(path)
        self.failures = dict(failures)
        self.error = error
        for name in failures:
            setattr(self, name, self._failing(name, getattr(self, name)))

    def _failing(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self.failures[name] > 0:
                self.failures[name] -= 1
                raise state_error(self.error, name.replace("_", " ")) from self.error
            return method(*args, **kwargs)

        return call


async def test_a_full_disk_at_mark_sent_is_retried_and_the_message_is_not_sent_twice(
    tmp_path: Any, json_receiver: JsonReceiver
) -> None:
    """Once, COMMIT of mark_sent failed on a full disk and the sender died. Now the mark
    is retried until it works; the accepted message is not sent again; the next ones go."""
    full = sqlite3.OperationalError("database or disk is full")
    store = FailingStore(tmp_path / "watcher.db", {"mark_sent": 3}, full)
    clock = FakeClock()
    health = StateHealth()
    sender = make_sender(store, [json_receiver.url], clock, state_health=health)
    enqueue(store, sender, clock, alert("k1"))

    with structlog.testing.capture_logs() as logs:
        assert await sender.send_due() == 1
    assert titles(json_receiver) == ["[warning] treasury: k1"]
    assert statuses(store) == [("[warning] treasury: k1", "sent", 1)]
    events = [(e["event"], e["log_level"]) for e in logs if "state database" in e["event"]]
    assert events == [
        ("state database failing; retrying with backoff", "warning"),
        ("state database recovered", "info"),
    ]
    assert health.healthy and health.last_error and "disk is full" in health.last_error

    enqueue(store, sender, clock, alert("k2"))  # and the sender goes on
    assert await sender.send_due() == 1
    assert titles(json_receiver) == ["[warning] treasury: k1", "[warning] treasury: k2"]
    store.close()


async def test_a_locked_database_at_claim_leaves_nothing_claimed_and_the_next_claim_works(
    tmp_path: Any, json_receiver: JsonReceiver
) -> None:
    store = FailingStore(
        tmp_path / "watcher.db", {"claim_due": 1}, sqlite3.OperationalError("database is locked")
    )
    clock = FakeClock()
    sender = make_sender(store, [json_receiver.url], clock)
    enqueue(store, sender, clock, alert("k1"))

    with pytest.raises(TransientStateError):
        await sender.dispatch()  # the daemon's loop records it and tries again (test_e2e_faults)
    assert statuses(store) == [("[warning] treasury: k1", "pending", 0)]
    assert await sender.send_due() == 1
    assert titles(json_receiver) == ["[warning] treasury: k1"]
    store.close()


async def test_a_permanent_database_error_ends_the_worker_for_the_supervisor(
    tmp_path: Any, json_receiver: JsonReceiver
) -> None:
    corrupt = sqlite3.DatabaseError("database disk image is malformed")
    store = FailingStore(tmp_path / "watcher.db", {"mark_sent": 1}, corrupt)
    clock = FakeClock()
    sender = make_sender(store, [json_receiver.url], clock)
    enqueue(store, sender, clock, alert("k1"))

    with pytest.raises(PermanentStateError, match="mark sent: DatabaseError: database disk image"):
        await sender.send_due()
    await until(lambda: sender.failure is not None)
    assert isinstance(sender.failure, PermanentStateError)
    assert sender.state_health.fatal(clock()) is not None
    store.close()


class RowDeletingNotifier:
    """Apprise's notifier, except that while the first message is in flight its delivery row
    is deleted by another connection to the database file (as an operator's ``sqlite3`` or a
    cleanup would do)."""

    def __init__(self, path: Any) -> None:
        self.path = path
        self.delete: int | None = None  # the delivery id to delete, once
        self.inner = AppriseNotifier()

    def send(self, url: str, message: Message) -> Outcome:
        if self.delete is not None:
            with closing(sqlite3.connect(self.path)) as db, db:
                db.execute("DELETE FROM deliveries WHERE id = ?", [self.delete])
            self.delete = None
        return self.inner.send(url, message)


@pytest.mark.parametrize(
    ("outcome", "refusals", "deadline"),
    [("sent", 0, 86400.0), ("retried", 1, 86400.0), ("given up", 1, 0.0)],
)
async def test_a_delivery_row_gone_while_in_flight_is_logged_and_the_sender_goes_on(
    tmp_path: Any, json_receiver: JsonReceiver, outcome: str, refusals: int, deadline: float
) -> None:
    """Marking a delivery whose row was deleted meanwhile raised KeyError: the worker died,
    and with it the daemon. Now it is a warning naming the delivery, and the next alert goes."""
    store = SqliteStore(tmp_path / "watcher.db")
    clock = FakeClock()
    notifier = RowDeletingNotifier(store.path)
    sender = make_sender(
        store,
        [json_receiver.url],
        clock,
        notifier=notifier,
        delivery=delivery_settings(deadline=deadline),
    )
    enqueue(store, sender, clock, alert("k1"))
    [row] = store.due_deliveries(clock())
    notifier.delete = row.id
    json_receiver.refuse(refusals)

    with structlog.testing.capture_logs() as logs:
        await asyncio.wait(await sender.dispatch())
    assert sender.failure is None
    assert notifier.delete is None and len(json_receiver.paths) == 1
    gone = [e for e in logs if e["event"] == "delivery no longer in the database; skipped"]
    assert [(e["log_level"], e["delivery_id"], e["outcome"]) for e in gone] == [
        ("warning", row.id, outcome)
    ]

    enqueue(store, sender, clock, alert("k2"))  # the sender goes on
    await asyncio.wait(await sender.dispatch())
    assert sender.failure is None
    assert titles(json_receiver)[-1] == "[warning] treasury: k2"
    assert statuses(store) == [("[warning] treasury: k2", "sent", 1)]
    store.close()


# -- the pieces ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("database is locked", TransientStateError),
        ("database table is locked", TransientStateError),
        ("database or disk is full", TransientStateError),
        ("disk I/O error", TransientStateError),
        ("database disk image is malformed", PermanentStateError),
        ("attempt to write a readonly database", PermanentStateError),
        ("no such table: deliveries", PermanentStateError),
    ],
)
def test_sqlite_errors_are_transient_or_permanent(message: str, kind: type) -> None:
    error = state_error(sqlite3.OperationalError(message), "claim")
    assert type(error) is kind
    assert str(error) == f"claim: OperationalError: {message}"


def test_a_real_busy_database_is_transient(tmp_path: Any) -> None:
    path = tmp_path / "x.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, timeout=0.05, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError) as caught:
        other.execute("BEGIN IMMEDIATE")
    assert state_error(caught.value, "write").transient
    holder.close()
    other.close()


def test_state_health_logs_once_per_stretch_and_turns_fatal_after_its_limit() -> None:
    health = StateHealth(down_for_limit=300.0)
    locked = state_error(sqlite3.OperationalError("database is locked"), "commit step")
    with structlog.testing.capture_logs() as logs:
        for second in range(0, 300, 10):
            health.failed(locked, 1000.0 + second)
            assert health.fatal(1000.0 + second) is None
        health.succeeded(1299.0)
        for second in range(300, 600, 30):
            health.failed(locked, 1000.0 + second)
    assert [e["event"] for e in logs] == [
        "state database failing; retrying with backoff",
        "state database recovered",
        "state database failing; retrying with backoff",
    ]
    assert health.fatal(1599.0) is None
    reason = health.fatal(1600.0)
    assert reason is not None and "failing for 300s" in reason and "database is locked" in reason
    # One failure, then nothing written for a long time (nothing to show either way): not
    # evidence that the database is still down.
    quiet = StateHealth(down_for_limit=300.0)
    quiet.failed(locked, 1000.0)
    assert quiet.fatal(1400.0) is None


# -- the supervisor -----------------------------------------------------------------------------


async def run_until_the_supervisor_ends_it(
    folder: Any,
    receiver: JsonReceiver,
    plant: Callable[[Any], Callable[[], Coroutine[Any, Any, None]]],
    stopped: str,
) -> list[str]:
    """Runs a daemon (one rule, ``http.listen``) with the bug ``plant`` puts in it; ``plant``
    returns what to do once it runs (nothing, or ask for /metrics). The run must end with
    ``DaemonFailed`` matching ``stopped``; the supervisor's lines' reasons are returned."""
    from watcher.app import Daemon
    from watcher.checks import load_config
    from watcher.core.errors import DaemonFailed
    from watcher.kinds.ruleset import RuleSet
    from watcher.simulator import Ledger, SimulatorServer
    from watcher.testing.daemon import write_config

    with SimulatorServer(Ledger(seed=1), api_key="k3y-for-the-supervisor-test") as server:
        config = write_config(
            folder,
            rpc_url=server.url,
            channels={"hooks": [receiver.url]},
            rules=[
                {
                    "name": "treasury",
                    "kind": "new_transactions",
                    "every": "200ms",
                    "addresses": ["9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"],
                    "notify": ["hooks"],
                }
            ],
            extra={"http": {"listen": "127.0.0.1:0"}},
        )
        settings, rules = load_config(config)
        daemon = Daemon(settings, RuleSet(rules))
        meanwhile = plant(daemon)
        failed = pytest.raises(DaemonFailed, match=stopped)
        with structlog.testing.capture_logs() as logs, failed:
            beside = asyncio.create_task(meanwhile())
            await asyncio.wait_for(daemon.run(asyncio.Event()), 15.0)
        await beside
    line = "watcher cannot go on; exiting for its supervisor"
    return [e["reason"] for e in logs if e["event"] == line]


async def nothing() -> None:
    return None


async def test_run_ends_with_daemon_failed_when_the_sender_dies(
    tmp_path: Any, json_receiver: JsonReceiver
) -> None:
    """A bug that kills the sender task must not leave the daemon polling with nobody
    delivering: run() logs one line and raises, so `watcher run` exits 1 (cli)."""

    def plant(daemon: Any) -> Callable[[], Coroutine[Any, Any, None]]:
        async def broken() -> list[Any]:
            raise RuntimeError("a bug in the sender")

        daemon.sender.dispatch = broken
        return nothing

    reasons = await run_until_the_supervisor_ends_it(
        tmp_path, json_receiver, plant, "the sender stopped: RuntimeError"
    )
    assert len(reasons) == 1 and "a bug in the sender" in reasons[0]


async def test_run_ends_with_daemon_failed_when_the_metrics_reading_dies(
    tmp_path: Any, json_receiver: JsonReceiver
) -> None:
    """/metrics shows the store's figures as the daemon last read them: a bug that kills that
    reading must not leave it showing old figures as current. run() ends as for the sender."""

    def plant(daemon: Any) -> Callable[[], Coroutine[Any, Any, None]]:
        async def broken() -> None:
            raise RuntimeError("a bug in the reading")

        daemon.metrics.refresh = broken
        endpoint = daemon.http.endpoint
        listening, start = asyncio.Event(), endpoint.start

        async def start_and_tell() -> None:
            await start()
            listening.set()

        endpoint.start = start_and_tell

        async def scrape() -> None:  # the reading runs while /metrics is asked for
            await listening.wait()
            _, writer = await asyncio.open_connection("127.0.0.1", endpoint.port)
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            await writer.drain()
            writer.close()

        return scrape

    reasons = await run_until_the_supervisor_ends_it(
        tmp_path, json_receiver, plant, "store reading stopped: RuntimeError"
    )
    assert len(reasons) == 1 and "a bug in the reading" in reasons[0]
