"""End to end: two real `watcher run` processes sharing one PostgreSQL (``state_url``) against
the simulator, delivering to one real json:// receiver. They split the targets by leased shards;
every transaction is announced once; when one is killed (-9) the other takes its shards over
and its addresses are watched again; a graceful stop hands the shards over at once. Every wait
is on a condition with a deadline."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher.simulator import Ledger, SimulatorServer
from watcher.simulator.keys import derived_pubkey
from watcher.state.shards import shard_of
from watcher.testing.daemon import DaemonProcess, write_config
from watcher.testing.postgres import Postgres
from watcher.testing.receivers import JsonReceiver, wait_until

pytestmark = pytest.mark.e2e

# Fewer than a digest lists in full (10 titles): each signature is named in a message.
ADDRESSES = [derived_pubkey(f"shared {n}") for n in range(8)]
LEASE_TTL = 3.0


def state_url(conninfo: str) -> str:
    """The test database's ``host=... user=... dbname=...`` as the URL a user writes."""
    parts = dict(item.split("=", 1) for item in conninfo.split())
    return (
        f"postgresql://{parts['user']}@/{parts['dbname']}?host={parts['host']}&port={parts['port']}"
    )


def shard_lines(daemon: DaemonProcess) -> list[dict[str, Any]]:
    lines = []
    for line in daemon.output().splitlines():
        if line.startswith("{") and '"shards"' in line:
            lines.append(json.loads(line))
    return lines


def held(daemon: DaemonProcess) -> int:
    """Shards the daemon said it holds after its last round that moved any."""
    lines = [line for line in shard_lines(daemon) if line.get("event") == "shards"]
    return int(lines[-1]["held"]) if lines else 0


@pytest.fixture
def shared(
    request: pytest.FixtureRequest, tmp_path: Path, postgres: Postgres
) -> Iterator[tuple[Ledger, JsonReceiver, list[DaemonProcess]]]:
    ledger = Ledger(seed=11)
    for address in ADDRESSES:
        ledger.add_transactions(address, 2, ago=60)  # history: a baseline, never announced
    with (
        postgres.database() as conninfo,
        SimulatorServer(ledger, api_key="k3yN3v3rL3aks0ut1234567") as server,
        JsonReceiver() as receiver,
    ):
        daemons = []
        for name in ("box-a", "box-b"):
            folder = tmp_path / name
            path = write_config(
                folder,
                rpc_url=server.url,
                channels={"hooks": [receiver.url]},
                rules=[
                    {
                        "name": "deposits",
                        "kind": "new_transactions",
                        "addresses": ADDRESSES,
                        "every": getattr(request, "param", "300ms"),
                        # Sent as they come: each signature is named in a message either way,
                        # and the test waits for them.
                        "group_wait": "0s",
                        "notify": ["hooks"],
                    }
                ],
                extra={"instance": name, "lease_ttl": f"{LEASE_TTL:g}s"},
            )
            settings = yaml.safe_load(path.read_text())
            del settings["state_path"]
            settings["state_url"] = state_url(conninfo)
            path.write_text(yaml.safe_dump(settings))
            daemons.append(DaemonProcess(path))
        try:
            yield ledger, receiver, daemons
        finally:
            for daemon in daemons:
                daemon.kill()


def status_of(daemon: DaemonProcess) -> str:
    """What `watcher status` prints for the daemon's configuration (the shared database)."""
    return subprocess.run(
        [sys.executable, "-m", "watcher", "status", "--config", str(daemon.config)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def announced(receiver: JsonReceiver, signatures: list[str]) -> dict[str, int]:
    """How many notifications name each signature."""
    return {sig: sum(sig in note["message"] for note in receiver.received) for sig in signatures}


def wait_announced(
    receiver: JsonReceiver, signatures: list[str], daemons: list[DaemonProcess], timeout: float
) -> None:
    try:
        wait_until(lambda: all(announced(receiver, signatures).values()), timeout)
    except AssertionError:
        missing = [s for s, n in announced(receiver, signatures).items() if not n]
        notes = [note["message"] for note in receiver.received]
        logs = "\n".join(d.output()[-2000:] for d in daemons)
        raise AssertionError(f"not announced: {missing}\nnotes: {notes}\n{logs}") from None


def test_two_instances_share_the_targets_and_one_takes_over_when_the_other_dies(
    shared: tuple[Ledger, JsonReceiver, list[DaemonProcess]],
) -> None:
    ledger, receiver, (a, b) = shared
    a.start()
    wait_until(lambda: held(a) == 1024, 20, "box-a holding every shard\n" + a.output()[-2000:])
    b.start()
    wait_until(
        lambda: held(a) == 512 and held(b) == 512,
        20,
        "the two settling on 512 shards each\n" + a.output()[-1500:] + b.output()[-1500:],
    )
    # Read until both are live in the database: each daemon's log says what it holds, but a
    # daemon the loaded machine paused past LEASE_TTL is rightly not live for that moment.
    both = "instances: 2, holding 1024 of 1024 shards\n"
    status = wait_until(
        lambda: status if both in (status := status_of(a)) else None, 20, f"{both!r} in status"
    )
    assert " box-a " in status and " box-b " in status and ": 512 shards, renewed" in status
    # Each sweeps its own shards: each has its own last round of the source.
    wait_until(
        lambda: all(f" on {box}: " in status_of(a) for box in ("box-a", "box-b")),
        20,
        "a round of each instance in `watcher status`",
    )
    first = [sig for address in ADDRESSES for sig in ledger.add_transactions(address, 1)]
    wait_announced(receiver, first, [a, b], timeout=20)
    assert set(announced(receiver, first).values()) == {1}  # each once, by one of them
    # Marked sent before the kill: a kill between the channel's accept and that commit would
    # send the message again (the one duplicate at-least-once allows), not what this tests.
    wait_until(lambda: "deliveries: 0 pending" in status_of(a), 20, "deliveries marked sent")

    a.kill()  # -9: its leases lapse after LEASE_TTL, then b takes them
    wait_until(lambda: held(b) == 1024, 20, "box-b taking every shard over\n" + b.output()[-2000:])
    second = [sig for address in ADDRESSES for sig in ledger.add_transactions(address, 1)]
    wait_announced(receiver, second, [b], timeout=20)
    counts = announced(receiver, second)
    assert set(counts.values()) == {1}, counts

    # A graceful stop hands b's shards back at once: a, started again, takes them all.
    a.start()
    wait_until(lambda: held(b) == 512, 20, "box-b handing half back\n" + b.output()[-2000:])
    assert b.stop() == 0
    wait_until(lambda: held(a) == 1024, 2 * LEASE_TTL, "box-a taking over at once")
    third = [sig for address in ADDRESSES for sig in ledger.add_transactions(address, 1)]
    wait_announced(receiver, third, [a], timeout=20)
    assert set(announced(receiver, third).values()) == {1}
    assert a.stop() == 0


@pytest.mark.parametrize("shared", ["1h"], indirect=True)
def test_with_a_slow_interval_a_takeover_polls_the_dead_instances_targets_at_once(
    shared: tuple[Ledger, JsonReceiver, list[DaemonProcess]],
) -> None:
    """Shards taken are swept when taken, not at the job's next interval (an hour here)."""
    ledger, receiver, (a, b) = shared
    a.start()
    wait_until(lambda: held(a) == 1024, 20, "box-a holding every shard\n" + a.output()[-2000:])
    b.start()
    wait_until(lambda: held(a) == 512 and held(b) == 512, 20, "the two settling")
    wait_until(lambda: rounds_over(b) >= 1, 20, "box-b sweeping the shards it took\n" + b.output())
    a.kill()
    # While box-a is dead: a transaction on every address. box-b's next round is an hour away,
    # but it sweeps box-a's shards as it takes them: each is announced, once.
    # box-a kept the lower half of the shards (a surplus goes back highest-numbered first).
    of_a = [address for address in ADDRESSES if shard_of("signatures", address) < 512]
    assert of_a
    added = [sig for address in of_a for sig in ledger.add_transactions(address, 1)]
    wait_until(lambda: held(b) == 1024, 20, "box-b taking every shard over\n" + b.output()[-2000:])
    wait_announced(receiver, added, [b], timeout=20)
    assert set(announced(receiver, added).values()) == {1}


def rounds_over(daemon: DaemonProcess) -> int:
    """Rounds of the daemon's last run that polled at least one target."""
    run = daemon.output().rsplit("--- run", 1)[-1]
    lines = [json.loads(line) for line in run.splitlines() if line.startswith("{")]
    return sum(1 for line in lines if line.get("event") == "round" and line.get("targets"))
