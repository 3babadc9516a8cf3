"""The dead man's switch (``heartbeat: {url, every}``): a ping after each healthy round, at most
every ``every`` seconds, so that a watcher that died or stopped polling is noticed from outside
(e.g. healthchecks.io). Never after a failed round. The URL is a secret: redacted in logs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import apprise
import httpx
import structlog

from watcher.core.clock import Clock
from watcher.core.redact import REDACTOR
from watcher.delivery.apprise_adapter import secret_fragments

log = structlog.get_logger(__name__)

PING_TIMEOUT_SECONDS = 10.0


class Heartbeat:
    def __init__(
        self,
        url: str,
        every: float,
        clock: Clock,
        *,
        on_accepted: Callable[[float], None] = lambda at: None,
    ) -> None:
        REDACTOR.add(*secret_fragments(url))
        # Told when a ping was accepted (/metrics: a Prometheus rule can say "heartbeat stale").
        self._on_accepted = on_accepted
        self._url = url
        self._every = every
        self._clock = clock
        self._last: float | None = None
        self._task: asyncio.Task[None] | None = None

    def due(self, now: float) -> bool:
        return self._last is None or now - self._last >= self._every

    def round_done(self, healthy: bool) -> None:
        """Ping (in the background) after a healthy round, when due and none is in flight."""
        now = self._clock()
        if not healthy or not self.due(now) or (self._task is not None and not self._task.done()):
            return
        self._last = now
        self._task = asyncio.create_task(self._ping(), name="heartbeat")

    async def _ping(self) -> None:
        try:
            if self._url.startswith(("http://", "https://")):
                async with httpx.AsyncClient(timeout=PING_TIMEOUT_SECONDS) as client:
                    (await client.get(self._url)).raise_for_status()
            else:
                sender = apprise.Apprise()
                sender.add(self._url)
                if not await asyncio.to_thread(sender.notify, "watcher is polling", "heartbeat"):
                    raise RuntimeError("apprise refused the heartbeat")
            self._on_accepted(self._clock())
        except Exception as exc:
            log.warning(
                "heartbeat ping failed", error=REDACTOR.redact(f"{type(exc).__name__}: {exc}")
            )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
