"""Quorum at run time: a state kind's target observed by several endpoints, committed only when
they agree (``watcher.ledger.quorum``: which endpoints to ask, what agreeing means, a majority).

A disagreement is not evidence and not a failed poll: it is counted (``/metrics``, the round's
tally) and kept by the built-in rpc_disagreement, whose episode names the endpoints outvoted and
which an agreement on that target resolves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from watcher.alerting import builtin
from watcher.alerting.messages import PresentedRule
from watcher.config.rule_models import StateRule
from watcher.core.errors import RpcError
from watcher.core.events import StepOutcome, TargetState
from watcher.core.tally import count_disagreement
from watcher.kinds.base import Source
from watcher.ledger.quorum import Quorum, agree, majority, observe_from
from watcher.ledger.rpc_methods import PinnedReader
from watcher.service.committing import Committer
from watcher.service.configuration import Configured
from watcher.state.interface import TargetStateStore

Answers = list[tuple[str, Any]]  # each answer with the endpoint that gave it (its public URL)


class Disagreements(Protocol):
    """Counts the polls whose endpoints disagreed (``Metrics.disagreed``)."""

    def disagreed(self, source: str) -> None: ...


class Agreement:
    """The quorum's part of a poll. ``endpoints``: one reader pinned to each endpoint,
    healthiest first (None: one endpoint only, so no quorum)."""

    def __init__(
        self,
        *,
        quorum: Quorum,
        endpoints: Callable[[], Sequence[PinnedReader]] | None,
        store: TargetStateStore,
        committer: Committer,
        config: Configured,
        metrics: Disagreements,
    ) -> None:
        self.quorum, self.endpoints, self.store = quorum, endpoints, store
        self.committer, self.config, self.metrics = committer, config, metrics
        # The rpc_disagreement episodes, read once: every poll under quorum looks at them.
        self._disagreements: TargetState | None = None
        self._disagreements_read = False

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

    async def observe(self, source: Source[Any], target: str, state: TargetState | None) -> Answers:
        """One observation from each of ``quorum`` endpoints (raises the last ``RpcError``
        when too few answer)."""
        assert self.endpoints is not None
        observe = lambda reader: source.observe(reader, target, state)  # noqa: E731
        answers = await observe_from(self.endpoints(), self.quorum.needed, observe)
        return [(reader.public_url, answer) for reader, answer in answers]

    async def agreed(
        self,
        source: Source[Any],
        target: str,
        rules: Sequence[PresentedRule],
        state: TargetState | None,
        answers: Answers,
        outcome: StepOutcome,
        now: float,
    ) -> tuple[StepOutcome, Any] | None:
        """The step to commit and its observation, when ``quorum`` endpoints agree: every one
        asked (``outcome``, the first's), or, when they do not and more endpoints are
        configured, a majority once one more is asked; None: no agreement, not evidence."""
        answers = list(answers)
        outcomes = [outcome]
        outcomes += [source.step(rules, target, state, other, now) for _, other in answers[1:]]
        if not agree(outcomes):
            for endpoint, extra in await self._observe_more(source, target, state, answers):
                answers.append((endpoint, extra))
                outcomes.append(source.step(rules, target, state, extra, now))
        endpoints = [endpoint for endpoint, _ in answers]
        found = self.quorum.compare(source.name, target, endpoints, outcomes)
        if not self._disagreements_read:
            self._disagreements = await self.store.load_state(
                builtin.SOURCE, builtin.DISAGREEMENT_TARGET
            )
            self._disagreements_read = True
        builtins = self.config.current.builtins
        step = builtins.disagreement_step(self._disagreements, source.name, target, found, now)
        if step is not None:
            disagreement = [builtins.rpc_disagreement]
            await self.committer.commit(
                builtin.SOURCE, builtin.DISAGREEMENT_TARGET, step, disagreement, now
            )
            self._disagreements = step.state  # once committed (or staged): a failed write raises
        decided = (0,) if found is None else majority(outcomes, self.quorum.needed)
        if found is not None:
            self.metrics.disagreed(source.name)
            count_disagreement()
        if decided is None:
            return None
        first = decided[0]
        return outcomes[first], answers[first][1]

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
