"""The console script's entry (``watcher``): a stop asked for while ``watcher run`` starts.

systemd (``systemctl stop``), Docker (``docker stop``) and an instance manager may send SIGTERM
at any moment of a start-up, the first milliseconds included. Python dies by the signal until
a handler is installed, and the command line's imports (typer, the settings' models) take
hundreds of milliseconds: so, for ``run``, the handler is installed here, before anything else
is imported, and the daemon takes the request as a clean stop (exit 0) when it starts.
"""

from __future__ import annotations

import sys

from watcher.core.stop_requests import stop_requests


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        stop_requests()  # first: before the command line's imports
    from watcher.cli import main as cli_main

    cli_main()
