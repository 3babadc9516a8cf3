"""Each source's last failed poll's error, for its round's log line: the pipeline records the
polls that failed (an RPC error, an answer not taken as evidence), the sweeper those that
raised, and the sweeper reads it when a round fails. One owner, passed to both."""

from __future__ import annotations


class LastErrors:
    """Source -> the one-line form of its last failed poll's error (already redacted)."""

    def __init__(self) -> None:
        self._last: dict[str, str] = {}

    def failed(self, source: str, detail: str) -> None:
        """A poll of ``source`` failed with ``detail``: it is the one its round names."""
        self._last[source] = detail

    def last(self, source: str) -> str | None:
        """``source``'s last failed poll's error; None while none failed."""
        return self._last.get(source)
