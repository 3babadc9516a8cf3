"""The tests' throwaway PostgreSQL server (``watcher.testing.postgres``) is what it says."""

from __future__ import annotations

import psycopg

from watcher.testing.postgres import Postgres


def test_the_throwaway_server_answers_on_its_socket_only_with_fsync_off(postgres: Postgres) -> None:
    with psycopg.connect(postgres.conninfo, autocommit=True) as conn:
        settings: dict[str, str] = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('fsync', 'listen_addresses', 'unix_socket_directories', 'server_encoding')"
            ).fetchall()
        )
        assert settings == {
            "fsync": "off",
            "listen_addresses": "",
            "unix_socket_directories": str(postgres.folder),
            "server_encoding": "UTF8",
        }
        assert conn.info.server_version >= 130000
    with psycopg.connect(postgres.url()) as conn:  # the URL form reaches the same server
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
