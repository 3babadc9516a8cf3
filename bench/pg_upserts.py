"""1,000 target states upserted on PostgreSQL: ``executemany``, one ``unnest`` statement, or
one statement over a JSON array of the rows?

What ``watcher.state.pg_rows.upsert_states`` (the staged quiet steps' flush) is built on. Each
form runs in one transaction on a throwaway local server (``watcher.testing.postgres``: a unix
socket, fsync off), first inserting 1,000 new rows, then updating the same 1,000; the median of
``--rounds`` runs of each. ``unnest`` twice: its arrays sent as text, then in binary
(what ``pg_rows`` did first); then the JSON array (``json_array_elements``: what
``pg_rows.upsert_states`` does). Besides the wall time, the client's CPU: what the sweep's event
loop pays. A remote server adds a round trip per pipeline sync to both, so the
gap measured here is the smallest it gets.

    python bench/pg_upserts.py [--rows 1000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import psycopg
from psycopg.rows import TupleRow

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from watcher.state import pg_rows  # noqa: E402
from watcher.state.postgresql_schema import migrate  # noqa: E402
from watcher.testing.postgres import Postgres  # noqa: E402

Connection = psycopg.AsyncConnection[TupleRow]
Rows = Sequence[pg_rows.StateRow]

_UPSERT = """INSERT INTO targets (source, target, state, updated_at) VALUES (%s, %s, %s, %s)
    ON CONFLICT (source, target)
    DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at"""


async def with_executemany(conn: Connection, rows: Rows) -> None:
    async with conn.transaction(), conn.cursor() as cursor:
        await cursor.executemany(_UPSERT, rows)


async def with_unnest(conn: Connection, rows: Rows, placeholder: str) -> None:
    """The statement ``pg_rows.upsert_states`` used before its JSON form, its arrays sent as
    text (``%s``) or in binary (``%b``, what it did)."""
    columns = [list(column) for column in zip(*rows, strict=True)]
    columns[3] = [float(at) for at in columns[3]]
    types = ("text", "text", "text", "double precision")
    arrays = ", ".join(f"{placeholder}::{name}[]" for name in types)
    async with conn.transaction():
        await conn.execute(
            f"""INSERT INTO targets (source, target, state, updated_at)
            SELECT * FROM unnest({arrays})
            ON CONFLICT (source, target)
            DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at""",
            columns,
        )


async def with_unnest_text(conn: Connection, rows: Rows) -> None:
    await with_unnest(conn, rows, "%s")


async def with_unnest_binary(conn: Connection, rows: Rows) -> None:
    await with_unnest(conn, rows, "%b")


async def with_json(conn: Connection, rows: Rows) -> None:
    await pg_rows.upsert_states(conn, rows)


def states(n: int, at: float) -> list[pg_rows.StateRow]:
    return [
        ("ledger", f"addr{i:06d}", f'{{"balance":{i * 7},"cursor":"c{i}","seen":{at}}}', at)
        for i in range(n)
    ]


async def timed(
    conn: Connection, upsert: Callable[[Connection, Rows], Awaitable[None]], n: int, rounds: int
) -> tuple[float, float, float]:
    """Median seconds to insert ``n`` new rows, and to update them; and the median of this
    process's CPU seconds for one of them (the client's: what a sweep's event loop pays)."""
    inserts: list[float] = []
    updates: list[float] = []
    cpu: list[float] = []
    for round_ in range(rounds):
        await conn.execute("TRUNCATE targets")
        for times, at in ((inserts, float(round_)), (updates, round_ + 0.5)):
            rows = states(n, at)
            started, started_cpu = time.perf_counter(), time.process_time()
            await upsert(conn, rows)
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
    return statistics.median(inserts), statistics.median(updates), statistics.median(cpu)


async def measure(conninfo: str, n: int, rounds: int) -> None:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        await migrate(conn)
        forms = (
            ("executemany", with_executemany),
            ("unnest text", with_unnest_text),
            ("unnest binary", with_unnest_binary),
            ("json array", with_json),
        )
        for name, upsert in forms:
            insert, update, cpu = await timed(conn, upsert, n, rounds)
            insert_ms, update_ms, cpu_ms = insert * 1000, update * 1000, cpu * 1000
            print(
                f"{name:13} {n} rows: insert {insert_ms:7.2f} ms, update {update_ms:7.2f} ms, "
                f"client CPU {cpu_ms:7.2f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with Postgres.start() as server, server.database() as conninfo:
        asyncio.run(measure(conninfo, args.rows, args.rounds))


if __name__ == "__main__":
    main()
