"""The channels in force, as one immutable value: what the sender and the commit path read of
the settings, replaced whole by a reload."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from watcher.alerting.formatting import PLAIN, Presentation
from watcher.core import outbox_rows
from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import Destination
from watcher.delivery.alertmanager import is_alertmanager
from watcher.delivery.paging import pages


@dataclass(frozen=True)
class Channels:
    """Each channel's URLs (``by_name``), the channels told of a delivery given up
    (``fallback``) and how digests show keys (``presentation``: labels and explorer links, as
    the alerts name them). ``urls``: every configured URL by its ``url_id``;
    ``has_alertmanager``: whether one of them is an Alertmanager's (its standing alerts are
    re-posted: ``watcher.delivery.alertmanager.Reposter``)."""

    by_name: Mapping[str, tuple[str, ...]]
    fallback: tuple[str, ...] = ()
    presentation: Presentation = PLAIN
    urls: Mapping[str, str] = field(init=False, repr=False)
    has_alertmanager: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        urls = {outbox_rows.url_id(url): url for urls in self.by_name.values() for url in urls}
        object.__setattr__(self, "urls", urls)
        object.__setattr__(self, "has_alertmanager", any(map(is_alertmanager, urls.values())))

    @classmethod
    def of(
        cls,
        channels: Mapping[str, Sequence[str]],
        fallback: Sequence[str] = (),
        presentation: Presentation = PLAIN,
    ) -> Channels:
        return cls(
            {name: tuple(urls) for name, urls in channels.items()}, tuple(fallback), presentation
        )

    def destinations(self, alert: AlertMessage) -> list[Destination]:
        """Every URL of every channel the alert names (unknown channels were refused earlier),
        but those that page (``pages``) for an inventory: information, not an
        incident, decided here, where an alert's URLs are known, for every engine and path."""
        return [
            Destination(channel, url)
            for channel in alert.channels
            for url in self.by_name.get(channel, ())
            if not (alert.is_inventory and pages(url))
        ]
