"""State in SQLite: per-target state documents, the alert history and the delivery outbox.

One connection, used only from the thread that opened it (the event loop's); every method is
one short transaction. A step's new state, its alerts and their deliveries are committed
together (``commit_step``), so a crash either loses the whole step (the cursor did not move:
the step is redone) or nothing (the deliveries wait in the outbox).

Apprise URLs hold tokens and passwords: the store only ever sees their ``url_id``.

``SqliteStore`` is the SQLite engine of the ``Store`` protocol (``watcher.state.interface``:
what the rest of the watcher is typed against), the one facade over the file; each concern is a
repository of its own module: target state (``watcher.state.targets``), the delivery outbox
(``watcher.state.deliveries``), silences (``watcher.state.silence_rows``), the alert history
(``watcher.state.history``), its retention (``watcher.state.retention``) and the sources' last
rounds (``watcher.state.source_rounds``).
The values they read and write are pure code's (``watcher.delivery.outbox``,
``watcher.alerting``). ``with SqliteStore(path) as store:`` closes the file at the end.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlite_utils import Database

from watcher.core.errors import StateError, state_error
from watcher.state.database import (
    StateUnusable,
    migrate,
    open_database,
    open_readonly,
    require_schema,
    schema_version,
    state_errors,
    transaction,
)
from watcher.state.deliveries import Deliveries
from watcher.state.history import History
from watcher.state.interface import Store as StoreProtocol
from watcher.state.retention import Retention
from watcher.state.silence_rows import Silences
from watcher.state.source_rounds import SourceRound, record_round
from watcher.state.targets import TargetStates


class SqliteStore(TargetStates, Deliveries, Silences, History, Retention):
    """The watcher's SQLite state. Synchronous and fast; call it from one thread only."""

    def __init__(self, path: Path | str, *, readonly: bool = False, upgrade: bool = True) -> None:
        """``readonly``: open an existing database for reading only (``open_readonly``).
        ``upgrade=False``: a command writing beside a running daemon (``silence add``) uses
        an existing database as it is, its schema must be this watcher's; only a new one is
        set up. Otherwise (``watcher run``) create and upgrade it."""
        self.path = Path(path)
        if readonly:
            self._db = open_readonly(self.path)
        else:
            with state_errors(self.path):
                self._db = open_database(self.path)
                version = schema_version(self._db)
                if upgrade or version == 0:
                    migrate(self._db)
            if not upgrade and version != 0:
                try:
                    require_schema(self.path, version)
                except StateUnusable:
                    self._db.close()
                    raise
        self.commits = 0
        self._staged = {}
        self._prefetched = {}

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def db(self) -> Database:
        return self._db

    def close(self) -> None:
        # A staged state that cannot be written now is a poll not done: the next run redoes it.
        with contextlib.suppress(StateError):
            self.flush_states()
        self._db.close()

    def transaction(self) -> AbstractContextManager[None]:
        return transaction(self._db)

    def record_round(self, round_: SourceRound) -> None:
        record_round(self._db, round_)


def _mapped(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` raising ``StateError`` (``state_error``: transient or permanent) where the
    driver raised ``sqlite3.Error``; the driver's error is its ``__cause__``."""
    operation = name.replace("_", " ")
    if inspect.isgeneratorfunction(method):  # prune_batches: errors come while iterating

        @functools.wraps(method)
        def batches(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(*args, **kwargs)
            except sqlite3.Error as exc:
                raise state_error(exc, operation) from exc

        return batches

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            raise state_error(exc, operation) from exc

    return call


# Every call of the protocol maps the driver's errors at the engine's boundary: callers catch
# the store's errors, never sqlite3's (what a second engine needs: it raises the same ones).
for _name, _member in vars(StoreProtocol).items():
    if not _name.startswith("_") and inspect.isfunction(_member):
        setattr(SqliteStore, _name, _mapped(_name, getattr(SqliteStore, _name)))


# The SQLite engine under its first name, for the tests and benchmarks that build one.
Store = SqliteStore
