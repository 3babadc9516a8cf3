"""Target state, silences, the alert history, the sources' rounds and retention on PostgreSQL:
the repositories the SQLite engine has beside its outbox (``targets``, ``records``:
silences, history and rounds, ``retention``, ``pending_count`` of ``deliveries``), with the
same meaning and the same return values, so that the PostgreSQL engine can answer every call
of the ``Store`` protocol as the SQLite one does.

A building block of that engine, in ``pg_deliveries``' style: each function takes a
``psycopg.AsyncConnection`` outside any transaction (autocommit, as a pool hands out) and a
writing one runs ONE short transaction of its own (``conn.transaction()``), but for
``upsert_state_in``, which writes inside the caller's (a step's state with its alerts, in a
fenced transaction). Driver errors pass through; mapping them is the engine's boundary
(``pg_errors``).

The state documents stay JSON text, stored and read back byte for byte: encoding and decoding
them (``to_json``, ``decode_json``) stays in the engine, as on SQLite. The pure parts (column
lists, rows made values, which targets retention deletes) are the SQLite modules', imported.

Where SQLite uses its rowid, retention here walks the targets by their primary key (source,
target) and deletes ``group_sends`` rows by ``ctid`` within one statement. With several
instances on one database, a pass's batches may interleave with another instance's writes: a
target written again since the batch was read is not deleted, and the alert batches delete only
alerts whose deliveries are all finished, which no other writer changes back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import astuple

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from watcher.core.events import NewSilence, Silence
from watcher.core.fastjson import encode_json
from watcher.core.outbox_rows import AlertRecord, DeliveryStatus
from watcher.state.records import (
    HISTORY_ALERT_COLUMNS,
    HISTORY_DELIVERY_COLUMNS,
    ROUND_COLUMNS,
    SILENCE_COLUMNS,
    SourceRound,
    history_record,
    round_values,
    upsert_round,
)
from watcher.state.retention import (
    BATCH_ROWS,
    Pruned,
    TargetKey,
    WatchedTarget,
    batch_bounds,
    sort_targets,
)

Connection = AsyncConnection[TupleRow]

StateRow = tuple[str, str, str, float]  # (source, target, state JSON, updated_at)

# -- target state -----------------------------------------------------------------------------

# A state still holding the watch's start ("_since": a first poll held back as doubtful) keeps
# the target counted as awaiting; any other clears it (as on SQLite).
_AWAITING_KEPT = """awaiting_since = CASE WHEN strpos(excluded.state, '"_since"') > 0
        THEN targets.awaiting_since END"""
_UPSERT_STATE = f"""INSERT INTO targets (source, target, state, updated_at)
    VALUES (%s, %s, %s, %s)
    ON CONFLICT (source, target)
    DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, {_AWAITING_KEPT}"""


async def load_states(
    conn: Connection, source: str, targets: Sequence[str]
) -> dict[str, str | None]:
    """The state JSON of each of ``targets`` (None: no state yet), in one query."""
    found: dict[str, str | None] = dict.fromkeys(targets)
    if not found:
        return found
    rows = await (
        await conn.execute(
            # The list in binary (``%b``): as text, psycopg quotes each item with a regular
            # expression, most of a prefetch's CPU.
            "SELECT target, state FROM targets WHERE source = %s AND target = ANY(%b::text[])",
            [source, list(found)],
        )
    ).fetchall()
    found.update((row[0], row[1]) for row in rows)
    return found


async def load_state_text(conn: Connection, source: str, target: str) -> str | None:
    """A target's state JSON, None when it has none."""
    row = await (
        await conn.execute(
            "SELECT state FROM targets WHERE source = %s AND target = %s", [source, target]
        )
    ).fetchone()
    return None if row is None else str(row[0])


async def upsert_states(conn: Connection, rows: Sequence[StateRow]) -> int:
    """Writes states in one transaction (the staged quiet steps' flush); how many rows.

    One statement over one JSON array of the rows (``json_array_elements``): orjson writes the
    rows as they are, in C, where psycopg would dump arrays item by item in Python. For 1,000
    rows on a local server the client's CPU is about two thirds that of an ``unnest`` of binary
    arrays and a tenth of a pipelined ``executemany``, in about the same time
    (``bench/pg_upserts.py``). A (source, target) given twice keeps its last row, as a sequence
    of upserts would (one statement may not update a row twice): the server keeps each key's
    last element, so the client loops over nothing."""
    if not rows:
        return 0
    async with conn.transaction():
        cursor = await conn.execute(
            """INSERT INTO targets (source, target, state, updated_at)
            SELECT DISTINCT ON (r->>0, r->>1) r->>0, r->>1, r->>2, (r->>3)::double precision
            FROM json_array_elements(%s::json) WITH ORDINALITY AS e(r, n)
            ORDER BY r->>0, r->>1, n DESC
            ON CONFLICT (source, target)
            DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, """
            + _AWAITING_KEPT,
            [encode_json(rows).decode()],
        )
    return cursor.rowcount


async def register_watch(
    conn: Connection, source: str, targets: Sequence[str], state_json: str, since: float
) -> int:
    """The first row of each of ``targets`` that has none: ``state_json`` (the watch's start),
    awaiting its first poll since ``since``; a row that exists is never changed. One statement
    (the keys as one binary array); how many were new."""
    cursor = await conn.execute(
        """INSERT INTO targets (source, target, state, updated_at, awaiting_since)
        SELECT %s, t, %s, %s, %s FROM unnest(%b::text[]) AS t
        ON CONFLICT (source, target) DO NOTHING""",
        [source, state_json, since, since, list(targets)],
    )
    return cursor.rowcount


async def upsert_state_in(
    conn: Connection, source: str, target: str, state_json: str, now: float
) -> None:
    """Writes a target's state inside the caller's transaction (a step's, with its alerts:
    ``pg_deliveries.insert_alerts``); no transaction of its own."""
    await conn.execute(_UPSERT_STATE, [source, target, state_json, now])


# -- silences -----------------------------------------------------------------------------------


async def add_silence(conn: Connection, new: NewSilence, now: float) -> Silence:
    async with conn.transaction():
        row = await (
            await conn.execute(
                """INSERT INTO silences
                (rule, subject, starts_at, ends_at, comment, created_by, created_at)
                VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id""",
                [*astuple(new), now],
            )
        ).fetchone()
    assert row is not None  # an INSERT ... RETURNING without conflict returns its row
    return new.added(int(row[0]), now)


async def list_silences(
    conn: Connection, now: float, include_expired: bool = False
) -> list[Silence]:
    """Silences not ended yet (or every one with ``include_expired``), newest first."""
    where = "" if include_expired else "WHERE expired_at IS NULL AND ends_at > %s"
    rows = await (
        await conn.execute(
            f"SELECT {SILENCE_COLUMNS} FROM silences {where} ORDER BY id DESC",
            [] if include_expired else [now],
        )
    ).fetchall()
    return [Silence(*row) for row in rows]


async def active_silences(conn: Connection, now: float) -> list[Silence]:
    """The silences muting alerts at ``now`` (what the daemon reads before each commit)."""
    rows = await (
        await conn.execute(
            f"""SELECT {SILENCE_COLUMNS} FROM silences
            WHERE ends_at > %(now)s AND starts_at <= %(now)s AND expired_at IS NULL
            ORDER BY id""",
            {"now": now},
        )
    ).fetchall()
    return [Silence(*row) for row in rows]


async def expire_silence(conn: Connection, silence_id: int, now: float) -> bool:
    """End a silence now; ``False`` when there is no such silence still running."""
    async with conn.transaction():
        cursor = await conn.execute(
            """UPDATE silences SET expired_at = %(now)s
            WHERE id = %(id)s AND expired_at IS NULL AND ends_at > %(now)s""",
            {"now": now, "id": silence_id},
        )
    return cursor.rowcount == 1


# -- history, the outbox's backlog, rounds ------------------------------------------------------


async def history(conn: Connection, limit: int = 50, rule: str | None = None) -> list[AlertRecord]:
    """The most recent alerts, newest first, each with its deliveries."""
    where, params = ("WHERE rule = %s", [rule]) if rule is not None else ("", [])
    alerts = await (
        await conn.execute(
            f"""SELECT {HISTORY_ALERT_COLUMNS}
            FROM alerts {where} ORDER BY created_at DESC, id DESC LIMIT %s""",
            [*params, limit],
        )
    ).fetchall()
    by_alert: dict[int, list[DeliveryStatus]] = {a[0]: [] for a in alerts}
    if by_alert:
        deliveries = await (
            await conn.execute(
                f"""SELECT {HISTORY_DELIVERY_COLUMNS}
                FROM deliveries WHERE alert_id = ANY(%s) ORDER BY id""",
                [list(by_alert)],
            )
        ).fetchall()
        for d in deliveries:
            by_alert[d[0]].append(DeliveryStatus(*d[1:]))
    return [history_record(a, by_alert) for a in alerts]


async def pending_count(conn: Connection) -> int:
    """Deliveries not yet sent nor given up (pending or being sent)."""
    row = await (
        await conn.execute("SELECT COUNT(*) FROM deliveries WHERE status IN ('pending', 'sending')")
    ).fetchone()
    assert row is not None  # an aggregate always returns a row
    return int(row[0])


_UPSERT_ROUND = upsert_round("%s")


async def record_round(conn: Connection, round_: SourceRound, instance: str) -> None:
    """``instance``'s last round of a source, upserted; a round that all failed keeps that
    instance's last success."""
    async with conn.transaction():
        await conn.execute(_UPSERT_ROUND, round_values(round_, instance))


async def last_rounds(conn: Connection) -> list[SourceRound]:
    """Each source's last round of each instance, by source and instance."""
    rows = await (
        await conn.execute(f"SELECT {ROUND_COLUMNS} FROM sources ORDER BY source, instance")
    ).fetchall()
    return [SourceRound(*row) for row in rows]


# -- retention ----------------------------------------------------------------------------------

# Alerts of one batch (keyset: created_at, id) that may go: every delivery finished before the
# cutoff, and not the latest transition of a rule and subject that is firing (SQLite's in
# ``watcher.state.retention``; the parameters of ``batch_bounds``).
_ALERTS_TO_DELETE = """
SELECT a.id FROM alerts a
WHERE a.created_at < %(cutoff)s
    AND (a.created_at, a.id) > (%(after_at)s, %(after_id)s)
    AND (a.created_at, a.id) <= (%(last_at)s, %(last_id)s)
    AND NOT EXISTS (
        SELECT 1 FROM deliveries d
        WHERE d.alert_id = a.id AND NOT (
            (d.status = 'sent' AND d.sent_at < %(cutoff)s)
            OR (d.status = 'dead' AND d.next_attempt_at < %(cutoff)s)
        )
    )
    AND NOT EXISTS (
        SELECT 1 FROM firing_alerts f
        WHERE f.rule = a.rule AND f.subject = a.subject AND f.alert_id = a.id
    )
"""


async def _prune_alerts(
    conn: Connection, cutoff: float, after: tuple[float, int], limit: int
) -> tuple[Pruned, tuple[float, int] | None]:
    """One batch of the alerts created before ``cutoff`` (retention's ``prune_alerts``)."""
    batch = await (
        await conn.execute(
            """SELECT created_at, id FROM alerts
            WHERE created_at < %s AND (created_at, id) > (%s, %s)
            ORDER BY created_at, id LIMIT %s""",
            [cutoff, *after, limit],
        )
    ).fetchall()
    if not batch:
        return Pruned(), None
    last = (float(batch[-1][0]), int(batch[-1][1]))
    async with conn.transaction():
        selected = await conn.execute(_ALERTS_TO_DELETE, batch_bounds(cutoff, after, last))
        ids = [row[0] for row in await selected.fetchall()]
        # Deliveries first (not by the cascade): their count is part of what a pass reports.
        deliveries = await conn.execute("DELETE FROM deliveries WHERE alert_id = ANY(%s)", [ids])
        alerts = await conn.execute("DELETE FROM alerts WHERE id = ANY(%s)", [ids])
    done = Pruned(alerts=alerts.rowcount, deliveries=deliveries.rowcount)
    return done, (last if len(batch) == limit else None)


async def _prune_targets(
    conn: Connection,
    watched: WatchedTarget,
    now: float,
    cutoff: float,
    after: TargetKey | None,
    limit: int,
) -> tuple[Pruned, TargetKey | None]:
    """One batch of the targets after ``after`` (None: from the first) by primary key
    (retention's ``prune_targets``); where the next batch starts (None: done)."""
    where, params = ("WHERE (t.source, t.target) > (%s, %s)", list(after)) if after else ("", [])
    rows = await (
        await conn.execute(
            f"""SELECT t.source, t.target, u.since, t.updated_at
            FROM targets t LEFT JOIN unwatched_targets u USING (source, target)
            {where} ORDER BY t.source, t.target LIMIT %s""",
            [*params, limit],
        )
    ).fetchall()
    found, back, gone = sort_targets(rows, watched, now, cutoff)
    done = Pruned()
    if found or back or gone:
        async with conn.transaction():
            if found:
                noted = await conn.execute(
                    """INSERT INTO unwatched_targets (source, target, since)
                    SELECT * FROM unnest(%s::text[], %s::text[], %s::double precision[])
                    ON CONFLICT DO NOTHING""",
                    [list(column) for column in zip(*found, strict=True)],
                )
                done.unwatched = noted.rowcount
            if back:
                await conn.execute(_DELETE_NOTES, _columns(back))
            if gone:
                # Only those still unwritten since before the cutoff: another instance may
                # have written one since this batch was read.
                deleted = await (
                    await conn.execute(
                        """DELETE FROM targets
                        WHERE (source, target) IN
                            (SELECT * FROM unnest(%s::text[], %s::text[]))
                            AND updated_at < %s
                        RETURNING source, target""",
                        [*_columns(gone), cutoff],
                    )
                ).fetchall()
                done.targets = len(deleted)
                if deleted:
                    await conn.execute(_DELETE_NOTES, _columns([(s, t) for s, t in deleted]))
    last = (str(rows[-1][0]), str(rows[-1][1])) if len(rows) == limit else None
    return done, last


_DELETE_NOTES = """DELETE FROM unwatched_targets
    WHERE (source, target) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"""


def _columns(keys: Sequence[TargetKey]) -> list[list[str]]:
    """(source, target) pairs as the two arrays an ``unnest`` takes."""
    return [[source for source, _ in keys], [target for _, target in keys]]


async def _prune_small_tables(conn: Connection, cutoff: float, limit: int) -> tuple[Pruned, bool]:
    """One batch of the digest groups' send times and the silences ended before ``cutoff``;
    whether any may be left."""
    async with conn.transaction():
        sends = await conn.execute(
            """DELETE FROM group_sends WHERE ctid = ANY(ARRAY(
                SELECT ctid FROM group_sends WHERE sent_at < %s LIMIT %s))""",
            [cutoff, limit],
        )
        silences = await conn.execute(
            """DELETE FROM silences WHERE id IN (SELECT id FROM silences
                WHERE LEAST(ends_at, COALESCE(expired_at, ends_at)) < %s LIMIT %s)""",
            [cutoff, limit],
        )
    done = Pruned(group_sends=sends.rowcount, silences=silences.rowcount)
    return done, max(done.group_sends, done.silences) == limit


async def prune_batches(
    conn: Connection,
    watched: WatchedTarget,
    now: float,
    retention: float,
    limit: int = BATCH_ROWS,
) -> AsyncIterator[Pruned]:
    """A whole pass (``watcher.state.retention``'s rules), one batch (one transaction of at
    most ``limit`` rows) per step: yields each batch's counts, so that other work runs between
    them."""
    cutoff = now - retention
    after: tuple[float, int] | None = (-1.0, -1)
    while after is not None:
        done, after = await _prune_alerts(conn, cutoff, after, limit)
        yield done
    key: TargetKey | None = None
    while True:
        done, key = await _prune_targets(conn, watched, now, cutoff, key, limit)
        yield done
        if key is None:
            break
    more = True
    while more:
        done, more = await _prune_small_tables(conn, cutoff, limit)
        yield done
