"""End to end as a service: systemd's notify protocol on a real datagram socket, a SIGTERM
while starting, and SIGHUP reloads (a broken file keeps the old rules; a good one adds targets
and keeps all state)."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from watcher.simulator.keys import derived_pubkey
from watcher.testing.daemon import tx_rule
from watcher.testing.receivers import wait_until

from support.world import TREASURY, World, make_world, small_cluster

pytestmark = pytest.mark.e2e

SECOND = derived_pubkey("e2e second address")


class NotifySocket:
    """What systemd would read from $NOTIFY_SOCKET: every datagram, in order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.messages: list[str] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(path))
        self._sock.settimeout(0.2)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._closed.is_set():
            try:
                self.messages.append(self._sock.recv(4096).decode())
            except TimeoutError:
                continue
            except OSError:
                return

    def count(self, message: str) -> int:
        return sum(message in m.split("\n") for m in self.messages)

    def close(self) -> None:
        self._closed.set()
        self._thread.join()
        self._sock.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    ledger = small_cluster()
    ledger.add_transactions(SECOND, 3, ago=60)  # history: the baseline when it is added
    yield from make_world(tmp_path, ledger, rules=[tx_rule(TREASURY)])


def test_systemd_is_told_ready_watchdog_reloading_and_stopping(world: World) -> None:
    notify = NotifySocket(world.config.parent / "notify")
    world.daemon.env.update(NOTIFY_SOCKET=str(notify.path), WATCHDOG_USEC="200000")
    try:
        world.daemon.start()
        wait_until(lambda: notify.count("READY=1") == 1, 15, f"READY=1 in {notify.messages}")
        wait_until(lambda: notify.count("WATCHDOG=1") >= 3, 10, "three watchdog pings")
        assert world.daemon.proc is not None
        world.daemon.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: notify.count("READY=1") == 2, 10, "READY=1 after the reload")
        assert notify.count("RELOADING=1") == 1
        assert world.daemon.stop() == 0
        assert notify.messages[-1] == "STOPPING=1"
    finally:
        notify.close()


def test_a_sigterm_while_starting_is_a_clean_stop(world: World) -> None:
    # `watcher run` takes SIGTERM as a stop from its first line (systemctl stop while the unit
    # is still activating): one that comes while it reads its rules ends it with exit 0 and one
    # line, before anything started.
    world.daemon.start()
    wait_until(lambda: world.daemon.catches(signal.SIGTERM), 10, "a handler of SIGTERM")
    assert world.daemon.stop() == 0, world.daemon.output()
    output = world.daemon.output()
    assert '"event": "watcher stopped while starting"' in output, output
    assert '"signal": "SIGTERM"' in output
    assert "watcher started" not in output
    assert "Traceback" not in output
    assert world.polls("getSignaturesForAddress") == 0


def rewrite_rules(world: World, text: str) -> None:
    (world.config.parent / "rules" / "rules.yaml").write_text(text)


def hup(world: World) -> None:
    assert world.daemon.proc is not None
    world.daemon.proc.send_signal(signal.SIGHUP)


def polled(world: World, address: str) -> int:
    return sum(
        1
        for r in world.server.requests
        if r.method == "getSignaturesForAddress" and r.params[0] == address
    )


def test_sighup_keeps_old_rules_on_a_broken_file_and_adds_targets_keeping_state(
    world: World,
) -> None:
    world.daemon.start()
    world.wait_polls("getSignaturesForAddress", 2)
    world.ledger.add_transactions(TREASURY, 1)
    world.wait_notes(1)

    # A broken file: one FILE:LINE line in the log, the old rules keep running.
    rewrite_rules(
        world,
        "rules:\n  - name: treasury\n    kind: new_transactions\n"
        f"    addresses: [{TREASURY}]\n    every: banana\n",
    )
    hup(world)
    wait_until(lambda: "rules.yaml:5" in world.daemon.output(), 10, "the reload's problem")
    assert "reload refused" in world.daemon.output()
    world.daemon.assert_alive()
    world.ledger.add_transactions(TREASURY, 1)
    world.wait_notes(2)

    # A good file adding an address: it is polled, its history is a quiet baseline, and the
    # first address's cursor is kept (nothing it had is announced again).
    rewrite_rules(world, yaml.safe_dump({"rules": [tx_rule(TREASURY, SECOND)]}))
    hup(world)
    wait_until(lambda: polled(world, SECOND) >= 3, 10, "polls of the added address")
    world.wait_polls("getSignaturesForAddress", 4)
    assert len(world.notes()) == 2, world.titles()
    world.ledger.add_transactions(SECOND, 1)
    [*_, note] = world.wait_notes(3)
    assert SECOND in note["message"]
    world.wait_polls("getSignaturesForAddress", 4)
    assert len(world.notes()) == 3, world.titles()
    assert world.daemon.stop() == 0
