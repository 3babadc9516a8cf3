"""Log lines as journald sees them: a "<N>" syslog priority prefix when stderr is the journal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import structlog

from watcher.core import logs


def log_lines(tmp_path: Path, journal: bool) -> list[str]:
    path = tmp_path / "stderr"
    with path.open("w") as stream:
        stat = os.fstat(stream.fileno())
        environ = {"JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino}"} if journal else {}
        logs.configure("debug", "json", stream=stream, environ=environ)
        log = structlog.get_logger("test")
        log.warning("sweep overran", source="signatures")
        log.info("round done")
        log.error("cannot go on")
        logs.configure("info", "json")  # back to stderr for the other tests
    return path.read_text().splitlines()


def test_lines_carry_their_journald_priority_when_stderr_is_the_journal(tmp_path: Path) -> None:
    lines = log_lines(tmp_path, journal=True)
    assert [line[:3] for line in lines] == ["<4>", "<6>", "<3>"]
    assert json.loads(lines[0][3:])["event"] == "sweep overran"


def test_no_prefix_elsewhere_or_when_the_journal_is_another_stream(tmp_path: Path) -> None:
    lines = log_lines(tmp_path, journal=False)
    assert [json.loads(line)["event"] for line in lines] == [
        "sweep overran",
        "round done",
        "cannot go on",
    ]
    path = tmp_path / "other"
    path.write_text("")
    with path.open("w") as stream:
        logs.configure("info", "json", stream=stream, environ={"JOURNAL_STREAM": "1:2"})
        structlog.get_logger("test").warning("x")
        logs.configure("info", "json")
    assert path.read_text().startswith("{")
