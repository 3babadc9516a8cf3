"""What a part holds to read the configuration in force, whatever holds it: the service's
``Configured`` box, or a test's stand-in giving just the members the part reads."""

from __future__ import annotations

from typing import Protocol, TypeVar

Shown = TypeVar("Shown", covariant=True)


class Current(Protocol[Shown]):
    """What a part holds to read the configuration in force: ``Configured`` (a part states, as
    ``Shown``, the few members of ``Configuration`` it reads, so that its tests can give just
    those)."""

    @property
    def current(self) -> Shown: ...
