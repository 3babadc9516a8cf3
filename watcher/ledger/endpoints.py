"""Several RPC endpoints: which one a call goes to first, and which next when it fails.

``EndpointPool`` keeps each endpoint's health (consecutive failures, when it may be tried
again) and gives, for one call, the order in which to try them. It takes the time as a value
(no clock of its own) and does no I/O: whoever tries the endpoints reports each outcome back
(``failed``, ``succeeded``).

The order, decided here:

1. **A due probe.** An endpoint that failed cools down (5 s after its first failure, doubling
   with each further failure in a row, at most 5 min). Once the cool-down has passed, the next
   call tries it first, and only that call: handing out the probe starts a new cool-down, so a
   sweep of many targets does not all go to an endpoint that may still be down. A probe that
   fails costs that call a failover (a refused connection: nothing; a hanging endpoint: up to
   ``rpc.timeout``), never a failed poll while another endpoint answers. A probe that answers
   makes the endpoint healthy again: a failed endpoint is retried later, never forgotten.
2. **Healthy endpoints** (no failure since they last answered), in the order of the settings:
   the first one listed is the primary, the endpoint that answered last is kept over one that
   failed since.
3. **Endpoints cooling down**, the one due soonest first: the last resort, so a call still
   reaches every endpoint before it fails.

What counts as an endpoint failure is decided in ``watcher.ledger.retrying.is_endpoint_failure``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

E = TypeVar("E")

COOLDOWN_FIRST = 5.0  # seconds an endpoint rests after its first failure in a row
COOLDOWN_MAX = 300.0


@dataclass
class EndpointHealth:
    failures: int = 0  # in a row; 0: healthy
    retry_at: float = 0.0  # while failing: not tried before this (unless nothing else is left)


class EndpointPool(Generic[E]):
    """The endpoints of one client and their health; ``order`` says where a call goes."""

    def __init__(
        self,
        endpoints: Sequence[E],
        *,
        cooldown_first: float = COOLDOWN_FIRST,
        cooldown_max: float = COOLDOWN_MAX,
    ) -> None:
        if not endpoints:
            raise ValueError("at least one endpoint is needed")
        self.endpoints = tuple(endpoints)
        self._health = [EndpointHealth() for _ in self.endpoints]
        self._cooldown_first = cooldown_first
        self._cooldown_max = cooldown_max

    def health(self, endpoint: E) -> EndpointHealth:
        return self._health[self._index(endpoint)]

    def order(self, now: float) -> list[E]:
        """Every endpoint, in the order one call should try them (see the module's docstring).
        Reserves a due probe for this call."""
        probes, healthy, cooling = [], [], []
        for index, health in enumerate(self._health):
            if health.failures == 0:
                healthy.append(index)
            elif now >= health.retry_at:
                probes.append(index)
            else:
                cooling.append(index)
        probes.sort(key=lambda i: self._health[i].retry_at)
        cooling.sort(key=lambda i: self._health[i].retry_at)
        if probes:
            probe, probes = probes[0], probes[1:]
            self._health[probe].retry_at = now + self._cooldown(self._health[probe].failures)
            # Other due probes wait for a later call: they come after the healthy endpoints.
            ordered = [probe, *healthy, *probes, *cooling]
        else:
            ordered = [*healthy, *cooling]
        return [self.endpoints[i] for i in ordered]

    def succeeded(self, endpoint: E) -> None:
        health = self.health(endpoint)
        health.failures, health.retry_at = 0, 0.0

    def failed(self, endpoint: E, now: float) -> None:
        health = self.health(endpoint)
        health.failures += 1
        health.retry_at = now + self._cooldown(health.failures)

    def _cooldown(self, failures: int) -> float:
        return float(min(self._cooldown_max, self._cooldown_first * 2.0 ** max(failures - 1, 0)))

    def _index(self, endpoint: E) -> int:
        for index, known in enumerate(self.endpoints):
            if known is endpoint:
                return index
        raise ValueError("not an endpoint of this pool")
