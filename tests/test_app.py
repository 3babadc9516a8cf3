"""The factories of the composition root (``watcher.app``) that turn settings into parts."""

from __future__ import annotations

from pathlib import Path

from watcher.app import public_endpoint, rpc_client
from watcher.config.settings import Settings
from watcher.ledger.rpc import RpcStats


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
