"""Observing a target: one endpoint's answer, or under quorum the answer several endpoints agree
on (``watcher.ledger.quorum``: which endpoints to ask, what agreeing means, a majority).

A disagreement is not evidence and not a failed poll: it is counted (``/metrics``, the round's
tally) and kept by the built-in rpc_disagreement, whose episode names the endpoints outvoted and
which an agreement on that target resolves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from watcher.alerting.messages import PresentedRule
from watcher.config.rule_models import StateRule
from watcher.core.clock import Clock
from watcher.core.errors import RpcError
from watcher.core.events import TargetState
from watcher.kinds.base import LedgerReader, Source
from watcher.ledger.quorum import Disagreement, Quorum, agree, majority, observe_from
from watcher.ledger.rpc import PinnedReader
from watcher.service.configuration import Configured

Answers = list[tuple[str, Any]]  # each answer with the endpoint that gave it (its public URL)


@dataclass(frozen=True)
class Observed:
    """One observation of a target at ``now``: ``observation``, the answer to judge, step and
    commit (under quorum the one agreed on; with no agreement, the first endpoint's).
    ``quorum``: it was observed under quorum, so its rpc_disagreement episode is stepped with
    ``disagreement`` (None: the endpoints agree)."""

    observation: Any
    now: float
    quorum: bool = False
    disagreement: Disagreement | None = None

    @property
    def agreed(self) -> bool:
        """Whether it is evidence: the endpoints agree, or a majority of them does."""
        return self.disagreement is None or bool(self.disagreement.outvoted)


class Observer:
    """Observes targets through ``ledger``, or, for a state kind's target watched by a state
    rule when ``quorum`` needs more than one endpoint, through ``endpoints``: one reader pinned
    to each endpoint, healthiest first (None: one endpoint only, so no quorum)."""

    def __init__(
        self,
        *,
        ledger: LedgerReader,
        quorum: Quorum,
        endpoints: Callable[[], Sequence[PinnedReader]] | None,
        config: Configured,
        clock: Clock,
    ) -> None:
        self.ledger, self.quorum, self.endpoints = ledger, quorum, endpoints
        self.config, self.clock = config, clock

    def applies(self, source: Source[Any], target: str) -> bool:
        """Whether ``target`` is polled under quorum: more than one endpoint must agree and a
        state rule watches it."""
        return (
            self.quorum.needed > 1
            and self.endpoints is not None
            and any(
                isinstance(rule, StateRule)
                for rule in self.config.current.ruleset.rules_for(source.name, target)
            )
        )

    async def observe(
        self,
        source: Source[Any],
        target: str,
        state: TargetState | None,
        rules: Sequence[PresentedRule],
        ledger: LedgerReader | None = None,
    ) -> Observed:
        """One observation of ``target`` (raises ``RpcError`` when it failed; under quorum, when
        too few endpoints answer). Under quorum the endpoints' steps by ``rules`` are compared:
        when they do not agree and more endpoints are configured, one more is asked, for a
        majority. ``ledger``: the reader to observe through, one endpoint's answer (a
        ``Primed`` reader holding the poll's first answer); none: ``self.ledger``."""
        if not self.applies(source, target):
            observation = await source.observe(ledger or self.ledger, target, state)
            return Observed(observation, self.clock())
        assert self.endpoints is not None
        observe = lambda reader: source.observe(reader, target, state)  # noqa: E731
        asked = await observe_from(self.endpoints(), self.quorum.needed, observe)
        answers: Answers = [(reader.public_url, answer) for reader, answer in asked]
        now = self.clock()
        outcomes = [source.step(rules, target, state, answer, now) for _, answer in answers]
        if not agree(outcomes):
            for endpoint, extra in await self._observe_more(source, target, state, answers):
                answers.append((endpoint, extra))
                outcomes.append(source.step(rules, target, state, extra, now))
        endpoints = [endpoint for endpoint, _ in answers]
        found = self.quorum.compare(source.name, target, endpoints, outcomes)
        decided = (0,) if found is None else majority(outcomes, self.quorum.needed)
        taken = 0 if decided is None else decided[0]
        return Observed(answers[taken][1], now, quorum=True, disagreement=found)

    async def _observe_more(
        self, source: Source[Any], target: str, state: TargetState | None, answers: Answers
    ) -> Answers:
        """One more observation, from an endpoint not asked yet (the next healthiest that
        answers), for a majority; none when every endpoint was asked or none of the rest
        answers (then the endpoints asked disagree, as with two)."""
        if self.endpoints is None:
            return []
        asked = {endpoint for endpoint, _ in answers}
        rest = [reader for reader in self.endpoints() if reader.public_url not in asked]
        if not rest:
            return []
        observe = lambda reader: source.observe(reader, target, state)  # noqa: E731
        try:
            more = await observe_from(rest, 1, observe)
        except RpcError:
            return []
        return [(reader.public_url, answer) for reader, answer in more]
