"""The simulator's print editions: getNftEditions.

``[mint, page, limit, cursor, before, after]``: the prints of a master edition, by edition
number. ``page`` counts from 1 (default 1); default and maximum ``limit`` 1000; cursor, before
and after are not simulated (refused). A mint that is not a master edition is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from watcher.simulator.keys import derived_pubkey
from watcher.simulator.params import _checked_pubkey, _positional, invalid_params

MAX_LIMIT: Final = 1000


@dataclass
class _Master:
    max_supply: int | None
    prints: dict[int, str] = field(default_factory=dict)  # edition number -> mint


class Editions:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._masters: dict[str, _Master] = {}

    def set_master(self, mint: str, max_supply: int | None) -> None:
        with self._lock:
            known = self._masters.get(mint)
            if known is None:
                self._masters[mint] = _Master(max_supply)
            else:
                known.max_supply = max_supply

    def print_edition(self, master: str, mint: str) -> int:
        """Prints the next edition; its number."""
        with self._lock:
            known = self._masters.get(master)
            if known is None:
                raise KeyError(f"no master edition {master}")
            if known.max_supply is not None and len(known.prints) >= known.max_supply:
                raise ValueError(f"{master} has printed its max supply {known.max_supply}")
            number = max(known.prints, default=0) + 1
            known.prints[number] = mint
            return number

    def get_nft_editions(self, params: list[Any]) -> Any:
        master = _checked_pubkey(_positional(params, 0, required=True))
        page = _positional(params, 1, required=False)
        limit = _positional(params, 2, required=False)
        for name, value in (("page", page), ("limit", limit)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise invalid_params(f"Invalid params: invalid type for `{name}`: expected u32")
        if any(_positional(params, index, required=False) is not None for index in (3, 4, 5)):
            raise invalid_params("Invalid params: the simulator pages getNftEditions by page")
        page, limit = 1 if page is None else page, MAX_LIMIT if limit is None else limit
        if page < 1 or not 1 <= limit <= MAX_LIMIT:
            raise invalid_params(f"Invalid params: page from 1, limit 1 to {MAX_LIMIT}")
        with self._lock:
            known = self._masters.get(master)
            if known is None:
                raise invalid_params(f"Invalid params: {master} is not a master edition")
            prints = sorted(known.prints.items())
            max_supply = known.max_supply
        shown = prints[(page - 1) * limit : page * limit]
        return {
            "total": len(prints),
            "limit": limit,
            "page": page,
            "master_edition_address": derived_pubkey(f"master edition of {master}"),
            "supply": len(prints),
            "max_supply": max_supply,
            "editions": [
                {
                    "mint": mint,
                    "edition_address": derived_pubkey(f"edition of {mint}"),
                    "edition": number,
                }
                for number, mint in shown
            ],
        }

    def handlers(self) -> dict[str, Callable[[list[Any]], Any]]:
        return {"getNftEditions": self.get_nft_editions}
