"""systemd's notify protocol without a library: datagrams to ``$NOTIFY_SOCKET``.

``Type=notify`` units wait for ``READY=1`` before they count as started; ``WatchdogSec=`` restarts
a service that stops sending ``WATCHDOG=1`` (pinged from the event loop, so a wedged loop is
caught); ``STOPPING=1`` and ``RELOADING=1`` say what the service is doing. Outside systemd (no
``NOTIFY_SOCKET``) every call is a no-op. A failed send is logged once and never raised: the
supervisor's channel must not take the daemon down.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Mapping

import structlog

log = structlog.get_logger(__name__)


class SystemdNotifier:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        # A leading "@" names a socket in the abstract namespace (a leading NUL byte).
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self._watchdog_usec = _positive_int(env.get("WATCHDOG_USEC"))
        watchdog_pid = _positive_int(env.get("WATCHDOG_PID"))
        if watchdog_pid is not None and watchdog_pid != os.getpid():
            self._watchdog_usec = None  # the watchdog is meant for another process
        self._socket: socket.socket | None = None
        self._warned = False

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between pings: half of ``WatchdogSec=``, as sd_watchdog_enabled(3) advises."""
        return None if self._watchdog_usec is None else self._watchdog_usec / 2_000_000

    def notify(self, *fields: str) -> None:
        if not self._address:
            return
        try:
            if self._socket is None:
                kind = socket.SOCK_DGRAM | socket.SOCK_CLOEXEC
                self._socket = socket.socket(socket.AF_UNIX, kind)
            self._socket.sendto("\n".join(fields).encode(), self._address)
        except OSError as exc:
            if not self._warned:
                log.warning("cannot reach systemd's notify socket", error=str(exc))
                self._warned = True

    def ready(self, status: str = "") -> None:
        self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def reloading(self) -> None:
        # MONOTONIC_USEC lets systemd (>= 253) tie the reload's end to this message.
        self.notify("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")

    def stopping(self) -> None:
        self.notify("STOPPING=1")

    def status(self, text: str) -> None:
        self.notify(f"STATUS={text}")

    async def watchdog_forever(self) -> None:
        """Ping the watchdog from the event loop itself: a loop that stops turning stops pinging."""
        interval = self.watchdog_interval
        if interval is None or not self._address:
            return
        while True:
            self.notify("WATCHDOG=1")
            await asyncio.sleep(interval)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def _positive_int(text: str | None) -> int | None:
    try:
        value = int(text or "")
    except ValueError:
        return None
    return value if value > 0 else None
