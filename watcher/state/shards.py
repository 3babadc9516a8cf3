"""Targets in leased shards, for several instances sharing one database: which shard a target
falls in, how many shards an instance may hold, and what it takes and hands back. Pure: no
clock, network or database (``watcher.state.pg_leases`` holds the lease rows on PostgreSQL).

- ``shard_of(source, target)``: one of ``SHARDS`` shards, from a stable hash (BLAKE2b, 8
  bytes, big-endian, modulo ``SHARDS``): the same on every machine, run and Python version.
  Never Python's ``hash``, salted per process for strings.
- ``fair_share(live)``: ``ceil(SHARDS / live)``, the most any instance may hold while
  ``live`` instances are alive.
- ``balanced_share(live, rank)``: this instance's exact part, the floor or the ceiling of
  ``SHARDS / live``: the ``SHARDS % live`` lowest-ranked instances (ranks: the live instance
  ids sorted, ``rank_of``) hold one more. The parts sum to ``SHARDS`` exactly, so instances
  following their plans settle on the floor or the ceiling each. With ``fair_share`` for
  everyone, they would settle unevenly: 3 instances take 342, 342 and the 340 left.
- ``plan(held, takeable, share)``: what to take (expired or free shards, in the order given,
  up to the share) and what to hand back (the surplus over the share, voluntarily, so that a
  live owner is never fenced out mid-sweep); after the plan, never more than ``share``.

The surplus handed back is the highest-numbered shards held. The planner gets the shards held
as a set, with no history, so the choice is a function of its inputs alone: every instance,
run and test reproduces it. "The most recently taken" would need that history kept beside the
lease rows, for a small gain: a shard changes hands at no cost beyond its next due sweep (a new
owner runs a shard when its last sweep plus the interval falls due), warm or not. Takes go
lowest-numbered first (``pg_leases`` offers free shards in ascending order), so a shard handed
back is the last one a newcomer would have taken anyway, not one it turns around.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence, Set
from dataclasses import dataclass

SHARDS = 1024


def shard_of(source: str, target: str) -> int:
    """The shard of ``target`` of ``source``: stable across processes, runs and machines."""
    digest = hashlib.blake2b(
        # The length prefix keeps ("ab", "c") and ("a", "bc") apart.
        f"{len(source)}:{source}{target}".encode(),
        digest_size=8,
    ).digest()
    return int.from_bytes(digest, "big") % SHARDS


def fair_share(live_instances: int) -> int:
    """The most shards one instance may hold: ``ceil(SHARDS / live_instances)``."""
    if live_instances < 1:
        raise ValueError(f"live_instances must be at least 1, not {live_instances}")
    return -(-SHARDS // live_instances)


def balanced_share(live_instances: int, rank: int) -> int:
    """The part of the instance ranked ``rank`` (0-based, among ``live_instances``): the floor
    or the ceiling of ``SHARDS / live_instances``, never above ``fair_share``; the parts of
    ranks ``0 .. live_instances - 1`` sum to ``SHARDS``."""
    if not 0 <= rank < live_instances:
        raise ValueError(f"rank {rank} is not among {live_instances} live instances")
    base, extra = divmod(SHARDS, live_instances)
    return base + (1 if rank < extra else 0)


def rank_of(instance_id: str, live_ids: Sequence[str]) -> int:
    """Where ``instance_id`` stands among the live instances (their ids sorted). It counts
    itself live even when ``live_ids`` misses it (its heartbeat not seen yet)."""
    ids = sorted(set(live_ids) | {instance_id})
    return ids.index(instance_id)


@dataclass(frozen=True)
class Plan:
    """Shards to take (ascending, as offered) and to hand back (ascending)."""

    take: tuple[int, ...]
    release: tuple[int, ...]


def plan(held: Set[int], takeable: Sequence[int], share: int) -> Plan:
    """What an instance holding ``held`` does next with its ``share``: above it, hand back the
    highest-numbered surplus and take nothing; below it, take from ``takeable`` (expired or
    free shards, in the order given; those held already and repeats are passed over) until
    the share is reached. Never both; afterwards at most ``share`` held."""
    if share < 0:
        raise ValueError(f"share must not be negative, not {share}")
    if len(held) > share:
        surplus = sorted(held)[share:]
        return Plan(take=(), release=tuple(surplus))
    wanted = share - len(held)
    take: list[int] = []
    seen: set[int] = set()
    for shard in takeable:
        if len(take) == wanted:
            break
        if shard in held or shard in seen:
            continue
        seen.add(shard)
        take.append(shard)
    return Plan(take=tuple(take), release=())
