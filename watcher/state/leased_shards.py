"""The shards an instance holds, each with the epoch it took it at, and how long their leases
last: the bookkeeping of the PostgreSQL engine's lease rounds (``PostgresStore``), apart from
their SQL (``watcher.state.pg_leases``). Pure: the caller passes its monotonic clock's readings.

- A round's renewal keeps what the database renewed (``renewed``): the shards not kept are
  lost, and every lease held lasts ``ttl`` from when the round started (the renewal started
  before its statement ran: the leases last at least that long).
- ``taken`` adds shards with their new epochs; ``drop`` removes one (handed back, or found lost
  by a fenced write); ``clear`` all of them (a graceful stop).
- ``view(now)``: what a sweep polls. Empty once the leases may have lapsed (no renewal for
  ``ttl``: a paused or cut-off instance polls nothing when it resumes); otherwise the same
  frozenset until a shard moves, so that a sweep tells "nothing moved" by identity.
- ``epoch(shard, now)``: what a fenced write checks against the lease row; raises ``LeaseLost``
  for a shard not held or whose lease may have lapsed (nothing is written).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from watcher.core.errors import LeaseLost

_NONE: frozenset[int] = frozenset()


class LeasedShards:
    """The shards held, their epochs and the leases' end (see the module)."""

    def __init__(self, owner: str) -> None:
        self.owner = owner  # the instance: named by ``LeaseLost``
        self._epochs: dict[int, int] = {}  # shard -> the epoch this instance took it at
        self._view: frozenset[int] | None = None  # ``view``'s; None: changed since
        self._until = 0.0  # monotonic: the leases may have lapsed from then on

    def __len__(self) -> int:
        return len(self._epochs)

    @property
    def shards(self) -> set[int]:
        """The shards held (a copy), lapsed or not."""
        return set(self._epochs)

    def view(self, now: float) -> frozenset[int]:
        """The shards this instance may poll at ``now``: none once the leases may have lapsed;
        the same object until a shard moves."""
        if now >= self._until:
            return _NONE
        if self._view is None:
            self._view = frozenset(self._epochs)
        return self._view

    def holds(self, shard: int, now: float) -> bool:
        return shard in self._epochs and now < self._until

    def epoch(self, shard: int, now: float) -> int:
        """The epoch ``shard`` was taken at, for a fenced write at ``now``."""
        epoch = self._epochs.get(shard)
        if epoch is None or now >= self._until:
            raise LeaseLost(shard=shard, owner=self.owner, epoch=-1 if epoch is None else epoch)
        return epoch

    def epochs(self, shards: Iterable[int]) -> dict[int, int]:
        """The epochs of those of ``shards`` held (a flush fences them all at once)."""
        return {shard: self._epochs[shard] for shard in shards if shard in self._epochs}

    def renewed(self, kept: Iterable[int], started: float, ttl: float) -> set[int]:
        """A round's renewal, started at ``started``, kept ``kept``: the others are lost (and
        returned); the leases held last until ``started + ttl``."""
        lost = set(self._epochs).difference(kept)
        for shard in lost:
            self.drop(shard)
        self._until = started + ttl
        return lost

    def taken(self, epochs: Mapping[int, int]) -> None:
        """Shards taken, at their new epochs."""
        if epochs:
            self._epochs.update(epochs)
            self._view = None

    def drop(self, shard: int) -> None:
        """``shard`` is no longer held (handed back or lost)."""
        if self._epochs.pop(shard, None) is not None:
            self._view = None

    def clear(self) -> None:
        self._epochs.clear()
        self._view = None
