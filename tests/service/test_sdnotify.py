"""systemd's notify protocol against a real datagram socket, as systemd listens on one."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from watcher.service.sdnotify import SystemdNotifier


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    try:
        yield sock, path
    finally:
        sock.close()


def test_ready_stopping_and_status_reach_the_socket(
    notify_socket: tuple[socket.socket, str],
) -> None:
    sock, path = notify_socket
    notifier = SystemdNotifier({"NOTIFY_SOCKET": path})
    notifier.ready("3 rules, 2 jobs")
    notifier.stopping()
    assert sock.recv(4096).decode().split("\n") == ["READY=1", "STATUS=3 rules, 2 jobs"]
    assert sock.recv(4096) == b"STOPPING=1"
    notifier.close()


def test_abstract_socket_names_start_with_at() -> None:
    name = f"watcher-test-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(5)
    try:
        SystemdNotifier({"NOTIFY_SOCKET": "@" + name}).ready()
        assert sock.recv(4096) == b"READY=1"
    finally:
        sock.close()


async def test_watchdog_pings_at_half_the_interval(
    notify_socket: tuple[socket.socket, str],
) -> None:
    sock, path = notify_socket
    notifier = SystemdNotifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "100000"})
    assert notifier.watchdog_interval == pytest.approx(0.05)
    task = asyncio.create_task(notifier.watchdog_forever())
    try:
        pings = [await asyncio.to_thread(sock.recv, 4096) for _ in range(3)]
    finally:
        task.cancel()
    assert pings == [b"WATCHDOG=1"] * 3


def test_a_watchdog_meant_for_another_process_is_ignored(tmp_path: Path) -> None:
    env = {"NOTIFY_SOCKET": str(tmp_path / "x"), "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"}
    assert SystemdNotifier(env).watchdog_interval is None


async def test_outside_systemd_nothing_is_sent_and_nothing_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_socket(*_args: object) -> socket.socket:
        raise AssertionError("a socket was opened outside systemd")

    monkeypatch.setattr(socket, "socket", no_socket)
    notifier = SystemdNotifier({"WATCHDOG_USEC": "100000"})
    assert not notifier.enabled
    with structlog.testing.capture_logs() as logged:
        notifier.ready("3 rules, 2 jobs")
        notifier.stopping()
        # The watchdog loop ends at once: no socket to ping.
        await asyncio.wait_for(notifier.watchdog_forever(), timeout=5)
    assert logged == []


def test_a_vanished_socket_is_logged_once_and_sending_resumes_when_it_is_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "notify"
    notifier = SystemdNotifier({"NOTIFY_SOCKET": str(path)})
    with structlog.testing.capture_logs() as logged:
        notifier.ready()  # no listener: logged, not raised
        notifier.stopping()  # not logged again
    assert [(line["log_level"], line["event"]) for line in logged] == [
        ("warning", "cannot reach systemd's notify socket")
    ]
    assert "No such file or directory" in logged[0]["error"]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    try:
        notifier.status("back")
        assert sock.recv(4096) == b"STATUS=back"
    finally:
        sock.close()
        notifier.close()
