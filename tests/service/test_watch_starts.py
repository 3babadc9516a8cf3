"""The watch of each history-reading target begins once: at start for every target, at a
reload for the targets it adds, listed in a rule or packed from an ``addresses_file``."""

from __future__ import annotations

from collections.abc import Sequence

import base58

from watcher.config.packed_keys import JoinedTargets, PackedAddresses
from watcher.core.events import WatchSince
from watcher.kinds.ruleset import Job
from watcher.service.watch_starts import WatchStarts


def key(number: int) -> str:
    return base58.b58encode(number.to_bytes(32, "big")).decode()


class Registered:
    """A store that keeps what was registered (each target once, as the stores do)."""

    def __init__(self) -> None:
        self.targets: list[str] = []

    async def register_watch(self, source: str, targets: Sequence[str], since: WatchSince) -> int:
        assert source == "signatures"
        new = [t for t in targets if t not in self.targets]
        self.targets.extend(new)
        return len(new)


class NoTip:
    tip = None


def starts(store: Registered) -> WatchStarts:
    return WatchStarts(store, lambda: 1000.0, NoTip())  # type: ignore[arg-type]


def job(listed: list[str], packed: list[str]) -> Job:
    targets = JoinedTargets((tuple(listed), PackedAddresses(packed))) if packed else tuple(listed)
    return Job("signatures", 600.0, targets)


LISTED = [key(n) for n in range(1, 4)]
FILE = [key(n) for n in range(10, 25_000)]  # more than one piece


async def test_at_start_every_target_listed_or_packed_begins() -> None:
    store = Registered()
    assert await starts(store).began([job(LISTED, FILE)]) == len(LISTED) + len(FILE)
    assert sorted(store.targets) == sorted(LISTED + FILE)


async def test_a_reload_begins_only_the_targets_it_adds() -> None:
    store = Registered()
    before = [job(LISTED, FILE)]
    added = [key(100_000), key(100_001)]
    after = [job([*LISTED[1:], FILE[0]], [*FILE[1:], *added])]
    assert await starts(store).began(after, before) == 2
    assert sorted(store.targets) == sorted(added)
    store.targets.clear()
    same = [job(LISTED, FILE)]
    assert await starts(store).began(same, before) == 0
