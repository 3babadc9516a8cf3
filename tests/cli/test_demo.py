"""``watcher demo`` serves /metrics on ``--listen``: a port already taken ends it at once, with
one line saying so."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from watcher.cli.demo import run_demo
from watcher.core import logs

RULES = Path(__file__).parents[2] / "rules"


@pytest.fixture(autouse=True)
def logs_back() -> Iterator[None]:
    yield
    logs.configure("info", "json")  # the demo set up its own: back to stderr for the other tests


def test_a_taken_port_ends_the_demo_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        assert run_demo(RULES, listen=listen) == 1
    out = capsys.readouterr().out
    assert f"metrics: http://{listen}/metrics" in out
    assert out.splitlines()[-1].startswith(f"watcher demo: http.listen {listen}: ")


def test_a_listen_that_is_no_host_and_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_demo(RULES, listen="nowhere") == 2
    assert "listen" in capsys.readouterr().out
