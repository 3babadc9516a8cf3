"""Quorum (``quorum: 2``): a state alert fires or resolves only when that many endpoints agree.

agave-watchtower's answer to false alarms from one lagging or broken node, made kind-agnostic:

- **Which targets.** A target watched by at least one state rule (delinquency, drift and any
  later state kind: the rules that have episodes). Event kinds (transactions, holders) move a
  cursor and are not put to a vote: failover covers them.
- **Observing.** The target is observed once from each of ``quorum`` different endpoints, the
  healthiest first (``RpcClient.readers``), concurrently; each observation is retried on its own
  endpoint. An endpoint that fails is replaced by the next one, if any. With fewer endpoints
  answering than the quorum, the poll fails like any failed call: never evidence (no step, no
  commit), and it counts toward ``rpc_unhealthy``.
- **Deciding.** The pure step runs on each observation from the same previous state and the same
  time. The endpoints agree when every step gives the same transitions: the same alerts (their
  dedup keys: rule, subject, episode, reason) and the same episode changes (status, number and
  times of every episode; the facts an episode keeps, such as a vote's slot, may differ between
  nodes and are left out). Then the step of the first (healthiest) endpoint is committed, with
  its facts in the messages.
- **Disagreeing.** The poll is not evidence: nothing is committed, the state stays as it was,
  so a pending ``for`` does not advance either. A warning is logged once per stretch of
  disagreement of a target, and one line when its endpoints agree again. The endpoints did
  answer, so a disagreement is not an RPC failure and does not count toward ``rpc_unhealthy``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import structlog

from watcher.alerting.events import StepOutcome
from watcher.core.errors import RpcError

R = TypeVar("R")
T = TypeVar("T")

log = structlog.get_logger(__name__)

# Facts of the last observation an episode keeps: they may differ between nodes (slots, stake).
_FACT_FIELDS = frozenset({"details", "active_details"})


async def observe_from(
    readers: Sequence[R], needed: int, observe: Callable[[R], Awaitable[T]]
) -> list[T]:
    """``needed`` observations, each from a different reader, in the readers' order; raises the
    last ``RpcError`` when fewer than ``needed`` readers answer."""
    answers: list[T] = []
    waiting = list(readers)
    last_error: RpcError | None = None
    while len(answers) < needed and len(waiting) >= needed - len(answers):
        batch, waiting = waiting[: needed - len(answers)], waiting[needed - len(answers) :]
        results = await asyncio.gather(*(observe(r) for r in batch), return_exceptions=True)
        for result in results:
            if isinstance(result, RpcError):
                last_error = result
            elif isinstance(result, BaseException):
                raise result
            else:
                answers.append(result)
    if len(answers) < needed:
        if last_error is None:
            raise ValueError(f"quorum {needed} needs at least {needed} endpoints")
        raise last_error
    return answers


def transitions(outcome: StepOutcome) -> tuple[tuple[str, ...], Any]:
    """What a step decided, without the facts that may differ between nodes."""
    keys = tuple(sorted(alert.dedup_key for alert in outcome.alerts))
    episodes = outcome.state.get("episodes", {})
    decided = {
        rule: {
            subject: {k: v for k, v in episode.items() if k not in _FACT_FIELDS}
            for subject, episode in by_subject.items()
        }
        for rule, by_subject in episodes.items()
    }
    return keys, decided


def agree(outcomes: Sequence[StepOutcome]) -> bool:
    if len(outcomes) < 2:  # one endpoint (the usual case): nothing to compare, on every poll
        return True
    first = transitions(outcomes[0])
    return all(transitions(outcome) == first for outcome in outcomes[1:])


class Quorum:
    """The daemon's quorum: how many endpoints must agree, and which targets disagree now."""

    def __init__(self, needed: int) -> None:
        self.needed = needed
        self._disagreeing: set[tuple[str, str]] = set()

    def agreed(self, source: str, target: str, outcomes: Sequence[StepOutcome]) -> bool:
        """Whether the steps agree; logs the start and the end of a disagreement once."""
        key = (source, target)
        if agree(outcomes):
            if key in self._disagreeing:
                self._disagreeing.discard(key)
                log.info("rpc endpoints agree again", source=source, target=target)
            return True
        if key not in self._disagreeing:
            self._disagreeing.add(key)
            log.warning(
                "rpc endpoints disagree; not evidence until they agree",
                source=source,
                target=target,
                quorum=self.needed,
            )
        return False
