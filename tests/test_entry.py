"""The console script's entry: for ``watcher run``, a stop is noted from its first line."""

from __future__ import annotations

from support.imports import fresh_output

PROBE = """
import signal, sys
sys.argv = ["watcher", "{command}", "--help"]
import watcher.entry
from watcher.core.stop_requests import STOP_SIGNALS
installed = []
real_cli = sys.modules.get("watcher.cli")
# What main does before it imports the command line: stop there and look.
sys.modules["watcher.cli"] = type(sys)("watcher.cli")
sys.modules["watcher.cli"].main = lambda: None
watcher.entry.main()
print(all(signal.getsignal(s) not in (signal.SIG_DFL, signal.default_int_handler)
          for s in STOP_SIGNALS), "typer" in sys.modules)
"""


def probe(command: str) -> str:
    return fresh_output(PROBE.format(command=command))


def test_run_notes_a_stop_before_the_command_line_is_imported() -> None:
    # SIGTERM and SIGINT are taken before typer (the command line's first heavy import) loads.
    assert probe("run") == "True False"


def test_other_commands_keep_the_default_signals() -> None:
    # `watcher status` and the others die by SIGTERM as any short command does.
    assert probe("status") == "False False"
