"""Time as a value. Logic takes ``now`` as an argument; only the edges read a clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

# A clock returns the current Unix time in seconds (float). Tests pass their own.
Clock = Callable[[], float]


def system_clock() -> float:
    return time.time()


def iso(ts: float) -> str:
    """Unix seconds -> ``2026-11-21T12:00:00Z`` (what users read in history and messages)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def human_duration(seconds: float) -> str:
    """``3725`` -> ``1h 2m 5s``; used in resolved and reminder messages."""
    seconds = max(0, round(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if secs or not parts:
        parts.append(f"{secs}s")
    return " ".join(parts)
