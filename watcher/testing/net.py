"""Loopback helpers for the tests: a free port, and a GET that tells "not listening" apart."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick; free until someone binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    """The status and body of a GET of ``url``; (0, "") when nothing listens there (yet)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""  # not listening (yet)
