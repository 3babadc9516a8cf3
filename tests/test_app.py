"""The factories of the composition root (``watcher.app``) that turn settings into parts."""

from __future__ import annotations

from pathlib import Path

from watcher.app import public_endpoint, rpc_client
from watcher.config.settings import Settings
from watcher.ledger.rpc import RpcStats

from support.imports import fresh_output


async def test_the_endpoint_named_before_the_client_is_the_one_the_client_shows(
    tmp_path: Path,
) -> None:
    settings = Settings.build(
        base=tmp_path,
        rpc_urls=[
            "https://rpc.example.com/v3/SECRETKEY",
            {"url": "https://other.example.com/solana?api-key=K2", "max_rps": 5},
        ],
        rules=[tmp_path],
    )
    stats = RpcStats()
    async with rpc_client(settings, lambda method, seconds: None, stats) as client:
        assert public_endpoint(settings) == client.public_url
        assert "SECRETKEY" not in client.public_url and "K2" not in client.public_url
        assert client.stats is stats


# What a start on each engine imports, in a fresh interpreter: the store it opens, nothing of
# the other engine's driver (psycopg and its pool were a seventh of a SQLite start's imports).
_STARTED_IMPORTS = """
import sys
from watcher.app import open_store
from watcher.config.settings import Settings
settings = Settings(rpc_url="https://rpc.example.com", rules=["rules.yaml"], {engine})
store = open_store(settings)
print(type(store).__name__, "psycopg" in sys.modules)
"""


def _started_imports(engine: str) -> str:
    return fresh_output(_STARTED_IMPORTS.format(engine=engine))


def test_a_sqlite_start_does_not_import_postgresqls_driver(tmp_path: Path) -> None:
    assert _started_imports(f"state_path={str(tmp_path / 'w.db')!r}") == "AsyncSqliteStore False"
    url = "postgresql://watcher@127.0.0.1:9/watcher"  # built without I/O: nothing listens there
    assert _started_imports(f"state_url={url!r}") == "PostgresStore True"
