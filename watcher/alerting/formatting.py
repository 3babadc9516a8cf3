"""How numbers, keys and lines read in a notification: plain text, nothing that can fail on
facts. A key is shown through a ``Presentation`` (the settings' address book ``labels`` and
``explorer_url``): shortened in titles, in full with its label in bodies, followed by its
explorer link in lists."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from watcher.core.lamports import LAMPORTS_DECIMALS

LISTED_CHARS = 8  # a key listed with its link shows its first and last 8 characters


def shorten(key: str, chars: int = 4) -> str:
    """``EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v`` -> ``EPjF…Dt1v`` (titles; lists with
    links, ``chars=8``)."""
    return key if len(key) <= 3 * chars else f"{key[:chars]}…{key[-chars:]}"


@dataclass(frozen=True)
class Presentation:
    """How keys are shown: names from the address book, links to an explorer (settings)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    # "https://explorer.solana.com/{kind}/{id}"; kind is "tx" or "address". None: no links.
    explorer_url: str | None = None

    def label(self, *keys: str | None) -> str | None:
        """The label of the first of ``keys`` that has one (a validator by vote or identity)."""
        return next((self.labels[key] for key in keys if key and key in self.labels), None)

    def name(self, key: str, *aliases: str | None) -> str:
        """The key in full, with its label if any (bodies)."""
        label = self.label(key, *aliases)
        return f"{key} ({label})" if label else key

    def short(self, key: str, *aliases: str | None) -> str:
        """The key shortened, with its label if any (titles)."""
        label = self.label(key, *aliases)
        return f"{shorten(key)} ({label})" if label else shorten(key)

    def listed(self, kind: str, key: str, *aliases: str | None) -> str:
        """A key in a list: its first and last 8 characters when its link (the next line)
        carries it in full, else in full; with its label if any."""
        text = key if self.link(kind, key) is None else shorten(key, LISTED_CHARS)
        label = self.label(key, *aliases)
        return f"{text} ({label})" if label else text

    def link(self, kind: str, key: str | None) -> str | None:
        """The line under a signature (``tx``) or an address (``address``) in a body; none
        for anything else (``kind`` "": a search, a rule name)."""
        if self.explorer_url is None or not key or not kind:
            return None
        return "  " + self.explorer_url.format(kind=kind, id=key)


PLAIN = Presentation()


def ui_amount(raw: int, decimals: int) -> str:
    """Exact decimal form of a raw token amount: ``(854699973338, 8)`` -> ``8,546.99973338``."""
    sign = "-" if raw < 0 else ""
    whole, fraction = divmod(abs(raw), 10**decimals)
    fraction_text = str(fraction).rjust(decimals, "0").rstrip("0") if decimals else ""
    return f"{sign}{whole:,}" + (f".{fraction_text}" if fraction_text else "")


def sol(lamports: int | None) -> str:
    return "unknown" if lamports is None else f"{ui_amount(lamports, LAMPORTS_DECIMALS)} SOL"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def lines(*parts: str | None) -> str:
    return "\n".join(part for part in parts if part is not None)
