"""The outbox's pure parts: where a delivery goes (as an id, never the URL) and when to retry it.

No clock, no database, no network: the caller passes ``now`` and the random ``jitter``. The
outbox's rows as values (``Destination``, ``DeliveryRow``, ``AlertRecord``) are in
``watcher.core.outbox_rows``: the store fills them, pure code (digests, rule tests) reads them.
"""

from __future__ import annotations


def next_attempt(
    attempts: int,
    now: float,
    *,
    jitter: float,
    first_retry: float = 2.0,
    factor: float = 2.0,
    max_backoff: float = 300.0,
    spread: float = 0.25,
) -> float:
    """When to try again after ``attempts`` failed attempts (1 after the first failure).

    The delay is ``first_retry * factor**(attempts-1)``, capped at ``max_backoff``, then
    stretched by up to ``spread`` (25 %) according to ``jitter`` in [0, 1): retries of many
    deliveries that failed together do not all hit the channel in the same second.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    if first_retry <= 0 or factor < 1.0 or max_backoff < first_retry or spread < 0:
        raise ValueError("need first_retry > 0, factor >= 1, max_backoff >= first_retry")
    delay = first_retry
    # A loop rather than factor**n: no float overflow for large attempt counts, and it stops
    # as soon as the cap is reached.
    for _ in range(attempts - 1):
        if delay >= max_backoff or factor == 1.0:
            break
        delay *= factor
    delay = min(delay, max_backoff)
    return now + delay * (1.0 + spread * jitter)


def is_dead(created_at: float, now: float, deadline: float = 86400.0) -> bool:
    """A delivery still failing ``deadline`` seconds after it was queued is given up."""
    return now - created_at >= deadline
