"""The registry of sources: adding a watch kind is one module plus one line here."""

from __future__ import annotations

from watcher.kinds import holders, nodes, signatures, votes
from watcher.kinds.base import Source

SOURCES: dict[str, Source] = {
    "signatures": signatures.SOURCE,
    "holders": holders.SOURCE,
    "votes": votes.SOURCE,
    "nodes": nodes.SOURCE,
}


def source_for_kind(kind: str) -> Source:
    """The source serving a rule kind (``KeyError`` for an unknown kind)."""
    for source in SOURCES.values():
        if kind in source.rule_kinds:
            return source
    raise KeyError(kind)
