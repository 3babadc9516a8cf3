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
- **A majority of three.** With three endpoints or more, two that disagree are not the end of
  it: one more endpoint is asked (the next healthiest that answers), and when ``quorum`` of the
  steps agree, they decide: the step of the first of them is committed, as if they had agreed
  at once. The endpoints outvoted are named (``Disagreement.outvoted``) by ``rpc_disagreement``,
  and counted as a disagreement. With two endpoints, or when no ``quorum`` of the three agree,
  it is a disagreement as below.
- **Disagreeing.** The poll is not evidence: nothing is committed, the state stays as it was,
  so a pending ``for`` does not advance either. But the endpoints did answer: the poll counts as
  answered (the round succeeds, the heartbeat goes on, ``/healthz`` stays healthy, nothing counts
  toward ``rpc_unhealthy``). A disagreement is its own condition: ``compare`` says which
  endpoints disagree on what, for the built-in ``rpc_disagreement`` (``watcher.alerting.builtin``),
  the ``watcher_rpc_disagreements_total`` counter and the round's ``disagreed`` count. A warning
  is logged once per stretch of disagreement of a target, and one line when its endpoints agree
  again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from watcher.core.errors import RpcError
from watcher.core.events import StepOutcome

R = TypeVar("R")
T = TypeVar("T")

log = structlog.get_logger(__name__)

# Facts of the last observation an episode keeps: they may differ between nodes (slots, stake).
_FACT_FIELDS = frozenset({"details", "active_details"})


async def observe_from(
    readers: Sequence[R], needed: int, observe: Callable[[R], Awaitable[T]]
) -> list[tuple[R, T]]:
    """``needed`` observations, each from a different reader (with it), in the readers' order;
    raises the last ``RpcError`` when fewer than ``needed`` readers answer."""
    answers: list[tuple[R, T]] = []
    waiting = list(readers)
    last_error: RpcError | None = None
    while len(answers) < needed and len(waiting) >= needed - len(answers):
        batch, waiting = waiting[: needed - len(answers)], waiting[needed - len(answers) :]
        results = await asyncio.gather(*(observe(r) for r in batch), return_exceptions=True)
        for reader, result in zip(batch, results, strict=True):
            if isinstance(result, RpcError):
                last_error = result
            elif isinstance(result, BaseException):
                raise result
            else:
                answers.append((reader, result))
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


# Differing (rule, subject) pairs named in a disagreement's summary; the rest are counted.
SHOWN_DIFFERENCES = 3


@dataclass(frozen=True)
class Disagreement:
    """Endpoints that answered one poll of a target with different transitions."""

    source: str
    target: str
    endpoints: tuple[str, ...]  # public URLs (keys masked), in the order asked
    differences: str  # short: per differing (rule, subject), what each endpoint's step decided
    # The endpoints a majority outvoted (their steps lost; the majority's was taken); empty:
    # no majority, nothing was decided.
    outvoted: tuple[str, ...] = ()


def majority(outcomes: Sequence[StepOutcome], needed: int) -> tuple[int, ...] | None:
    """The indices of the outcomes that decide: the largest group whose steps agree (the first
    such group asked, on a tie), if it has at least ``needed`` members; None: no majority."""
    groups: list[tuple[Any, list[int]]] = []
    for index, outcome in enumerate(outcomes):
        decided = transitions(outcome)
        same = next((members for seen, members in groups if seen == decided), None)
        if same is None:
            groups.append((decided, [index]))
        else:
            same.append(index)
    largest = max((members for _, members in groups), key=len, default=[])
    return tuple(largest) if needed <= len(largest) else None


def _decisions(outcome: StepOutcome) -> dict[tuple[str, str], str]:
    """(rule, subject) -> what the step decided about it: episode status and any notification."""
    decided: dict[tuple[str, str], str] = {}
    for rule, by_subject in outcome.state.get("episodes", {}).items():
        for subject, episode in by_subject.items():
            decided[rule, subject] = str(episode.get("status", "inactive"))
    for alert in outcome.alerts:
        said = decided.get((alert.rule, alert.subject), "inactive")
        decided[alert.rule, alert.subject] = f"{said} (would notify {alert.reason})"
    return decided


def differences(endpoints: Sequence[str], outcomes: Sequence[StepOutcome]) -> str:
    """``rule subject: A says firing (would notify firing); B says inactive`` for the first few
    (rule, subject) pairs the steps decided differently (pure)."""
    decided = [_decisions(outcome) for outcome in outcomes]
    keys = sorted({key for each in decided for key in each})
    differing = [key for key in keys if len({each.get(key, "inactive") for each in decided}) > 1]
    parts = [
        f"{rule} {subject}: "
        + "; ".join(
            f"{endpoint} says {each.get((rule, subject), 'inactive')}"
            for endpoint, each in zip(endpoints, decided, strict=True)
        )
        for rule, subject in differing[:SHOWN_DIFFERENCES]
    ]
    if len(differing) > SHOWN_DIFFERENCES:
        parts.append(f"and {len(differing) - SHOWN_DIFFERENCES} more")
    # Equal statuses can hide a difference in episode numbers or times: say so, not nothing.
    return " | ".join(parts) or "the same statuses, different episode numbers or times"


class Quorum:
    """The daemon's quorum: how many endpoints must agree, and which targets disagree now."""

    def __init__(self, needed: int) -> None:
        self.needed = needed
        self._disagreeing: set[tuple[str, str]] = set()

    def compare(
        self,
        source: str,
        target: str,
        endpoints: Sequence[str],
        outcomes: Sequence[StepOutcome],
    ) -> Disagreement | None:
        """None when the steps agree, else what the endpoints (public URLs, one per outcome)
        disagree on; logs the start and the end of a stretch of disagreement once."""
        key = (source, target)
        if agree(outcomes):
            if key in self._disagreeing:
                self._disagreeing.discard(key)
                log.info("rpc endpoints agree again", source=source, target=target)
            return None
        decided = majority(outcomes, self.needed) or ()
        outvoted = tuple(e for i, e in enumerate(endpoints) if decided and i not in decided)
        found = Disagreement(
            source, target, tuple(endpoints), differences(endpoints, outcomes), outvoted
        )
        if key not in self._disagreeing:
            self._disagreeing.add(key)
            event = (
                "rpc endpoints disagree; the majority decides"
                if outvoted
                else "rpc endpoints disagree; not evidence until they agree"
            )
            log.warning(
                event,
                source=source,
                target=target,
                quorum=self.needed,
                endpoints=", ".join(found.endpoints),
                outvoted=", ".join(outvoted),
                differences=found.differences,
            )
        return found
