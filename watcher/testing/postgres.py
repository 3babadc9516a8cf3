"""A throwaway PostgreSQL server for tests and benchmarks: ``with Postgres.start() as pg:``.

The binaries come from ``pg_config --bindir`` (Debian's ``postgresql`` package; else the newest
``/usr/lib/postgresql/*/bin``); ``make test`` installs the package when it is missing
(``deploy/ensure-postgresql``). ``initdb`` refuses to run as root, and CI runs as root: then
``initdb``, ``pg_ctl`` and the server run as the ``postgres`` user (``runuser -u postgres --``),
in a temporary folder given to that user. The server listens on a unix socket in that folder
only (no TCP port: parallel test workers never collide), with fsync off (nothing here must
survive a crash), trusts local connections, and is stopped and deleted at the end.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

USER = "postgres"  # the database superuser initdb creates (and the OS user it runs as, as root)
PORT = 5432  # only names the socket file (.s.PGSQL.5432): no TCP listener
START_SECONDS = 60


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def find_bindir() -> Path:
    """The folder of ``initdb`` and ``pg_ctl``: ``pg_config --bindir``, else the newest
    ``/usr/lib/postgresql/<version>/bin``."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and out.stdout.strip():
            candidates.append(Path(out.stdout.strip()))
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: [int(x) for x in Path(p).parent.name.split(".") if x.isdigit()],
        reverse=True,
    )
    candidates += [Path(p) for p in versions]
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise PostgresMissing(
        "PostgreSQL's server binaries (initdb, pg_ctl) were not found via `pg_config --bindir` "
        "nor in /usr/lib/postgresql/*/bin: run deploy/ensure-postgresql "
        "(apt-get install postgresql), as `make test` does"
    )


@dataclass
class Postgres:
    """A running throwaway server."""

    bindir: Path
    folder: Path  # the socket's folder; the data folder and the log are in it
    as_user: Sequence[str]  # the command prefix that runs as the postgres user ([] if we can)

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    @property
    def conninfo(self) -> str:
        """A libpq connection string to the ``postgres`` database (psycopg's ``connect``)."""
        return f"host={self.folder} port={PORT} user={USER} dbname=postgres"

    @property
    def options(self) -> str:
        """The server's own options (``pg_ctl -o``): the same at every start and restart."""
        return f"-F -c fsync=off -k {self.folder} -c listen_addresses='' -p {PORT}"

    def url(self, dbname: str = "postgres") -> str:
        """The same as a URL (``state_url``'s form): the socket folder as the ``host``."""
        return f"postgresql://{USER}@/{dbname}?host={self.folder}&port={PORT}"

    @contextmanager
    def database(self) -> Iterator[str]:
        """A new empty database for one test, dropped at the end: its connection string."""
        name = f"test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield f"host={self.folder} port={PORT} user={USER} dbname={name}"
        finally:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )

    @classmethod
    @contextmanager
    def start(cls) -> Iterator[Postgres]:
        bindir = find_bindir()
        folder = Path(tempfile.mkdtemp(prefix="watcher-pg-"))
        as_user: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run everything as the postgres user
            owner = pwd.getpwnam(USER)
            os.chown(folder, owner.pw_uid, owner.pw_gid)
            as_user = ["runuser", "-u", USER, "--"]
        server = cls(bindir, folder, as_user)
        try:
            server._run(
                "initdb",
                "-D",
                str(server.data),
                "-U",
                USER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",  # nothing here must survive a crash
            )
            server._pg_ctl("start")
        except BaseException:
            server._stop()
            raise
        try:
            yield server
        finally:
            server._stop()

    def restart(self) -> None:
        """Stops the server (``-m fast``: every client's connection is cut) and starts it
        again with the same options, as an operator's restart or a failover does."""
        self._pg_ctl("restart", "-m", "fast")

    def _pg_ctl(self, action: str, *args: str) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            self.options,
            "-w",
            "-t",
            str(START_SECONDS),
            action,
            *args,
        )

    def _run(self, program: str, *args: str) -> None:
        command = [*self.as_user, str(self.bindir / program), *args]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{log}"
            )

    def _stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            command = [*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.data)]
            subprocess.run(
                [*command, "-m", "immediate", "-w", "stop"], capture_output=True, check=False
            )
        shutil.rmtree(self.folder, ignore_errors=True)
