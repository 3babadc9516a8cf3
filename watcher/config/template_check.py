"""``watcher check``: a rule's ``title``/``body`` templates rendered once against sample alerts.

A template that compiles can still fail at render time (``{{ count + 'x' }}``, a fact its kind
does not have). The daemon then sends the default wording
(``watcher.alerting.messages.render_checked``);
``check`` tells the user before. The samples come from the rule's own source stepping over
made-up observations (every transition its kind has: an event; firing, repeat and resolved), so
their facts are exactly what real alerts carry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import base58

from watcher.alerting.events import AlertMessage, StepOutcome, TargetState
from watcher.core.errors import Problem
from watcher.kinds import SOURCES, word
from watcher.kinds.account_samples import SAMPLES as MORE_SAMPLES
from watcher.kinds.drift import ClusterObservation
from watcher.kinds.holders import HoldersObservation
from watcher.kinds.transactions import Cursor, SignaturesObservation
from watcher.kinds.vote_samples import SAMPLE_KINDS, sample_vote_alerts
from watcher.ledger.models import (
    ClusterNode,
    SignatureEntry,
    TokenAmount,
    VoteAccount,
    VoteAccounts,
)

SAMPLE_TIME = 1_790_000_000.0
FEATURE_SET = 3640012085


def _key(label: str, size: int = 32) -> str:
    digest = hashlib.sha512(label.encode()).digest()[:size]
    text: str = base58.b58encode(digest).decode()
    return text


def template_problems(rules: Sequence[Any]) -> list[Problem]:
    """One problem per rule whose templates fail on a sample alert of its kind."""
    problems: list[Problem] = []
    for rule in rules:
        if not (rule.title or rule.body):
            continue
        try:
            alerts = [word(alert, rule) for alert in sample_alerts(rule)]
        except Exception:  # no sample for this rule (e.g. nothing watched): nothing to say
            continue
        said = sorted({p for alert in alerts for p in alert.wording_problems})
        if said:
            file, _, line = str(rule.origin).rpartition(":")
            where = (file, int(line)) if line.isdigit() else (str(rule.origin), None)
            problems.append(Problem(where[0], where[1], f"rule '{rule.name}': " + "; ".join(said)))
    return problems


def sample_alerts(rule: Any) -> list[AlertMessage]:
    """Alerts of every transition of ``rule``'s kind, as facts (``word`` words them)."""
    kind = rule.kind
    if kind == "new_transactions":
        return list(_transactions(rule))
    if kind == "holder_changes":
        return list(_holders(rule))
    if kind in ("delinquent_validators", "version_drift"):
        return list(_episodes(rule))
    if kind in SAMPLE_KINDS:
        return sample_vote_alerts(rule)
    if kind in MORE_SAMPLES:
        return MORE_SAMPLES[kind](rule)
    return []


def _transactions(rule: Any) -> Iterator[AlertMessage]:
    source = SOURCES["signatures"]
    address = rule.addresses[0]
    state = {"v": 1, "cursor": Cursor(_key("old", 64), 100).to_json(), "slot_time": None}
    entries = (
        SignatureEntry(signature=_key("new", 64), slot=102, block_time=int(SAMPLE_TIME), memo="m"),
        SignatureEntry(signature=_key("failed", 64), slot=101, err={"e": 1}),
    )
    observation = SignaturesObservation(pages=(entries,), baseline=False)
    yield from source.step([rule], address, state, observation, SAMPLE_TIME).alerts


def _holders(rule: Any) -> Iterator[AlertMessage]:
    source = SOURCES["holders"]
    mint = rule.mints[0]

    def top(amounts: dict[str, int]) -> HoldersObservation:
        return HoldersObservation(
            tuple(
                TokenAmount(address=account, amount=amount, decimals=6)
                for account, amount in amounts.items()
            ),
            100,
        )

    a, b, c, d = (_key(f"holder {n}") for n in range(4))
    first = source.step([rule], mint, None, top({a: 5_000_000, b: 3_000_000, c: 1_000}), 0.0)
    later = top({a: 5_000_000, b: 1_000_000, d: 2_000_000})
    yield from source.step([rule], mint, first.state, later, SAMPLE_TIME).alerts


def _episodes(rule: Any) -> Iterator[AlertMessage]:
    """Firing, a repeat (when the rule repeats) and resolved, for its first validator."""
    source = SOURCES["votes" if rule.kind == "delinquent_validators" else "nodes"]
    watched = rule.validators[0]
    vote, node = watched, _key("node of " + watched)

    def observe(bad: bool) -> Any:
        account = VoteAccount(
            vote_pubkey=vote,
            node_pubkey=node,
            activated_stake=10**15,
            last_vote=1000 if bad else 5000,
        )
        big = VoteAccount(
            vote_pubkey=_key("big vote"),
            node_pubkey=_key("big"),
            activated_stake=10**16,
            last_vote=5001,
        )
        if rule.kind == "delinquent_validators":
            if bad:
                return VoteAccounts(current=[big], delinquent=[account])
            return VoteAccounts(current=[big, account], delinquent=[])
        nodes = (
            ClusterNode(pubkey=_key("big"), version="2.3.6", feature_set=FEATURE_SET),
            ClusterNode(pubkey=node, version="2.3.5" if bad else "2.3.6", feature_set=FEATURE_SET),
        )
        return ClusterObservation(nodes, VoteAccounts(current=[big, account], delinquent=[]))

    state: TargetState | None = None
    # Fire (after ``for``), repeat (when it repeats), stop holding, resolve (after
    # ``keep_firing_for``): each step at the time it needs.
    now, steps = SAMPLE_TIME, []
    for bad, wait in ((True, 0.0), (True, rule.for_ + 1), (True, (rule.repeat or 0.0) + 1),
                      (False, 1.0), (False, rule.keep_firing_for + 1)):  # fmt: skip
        now += wait
        steps.append((bad, now))
    for bad, at in steps:
        outcome: StepOutcome = source.step([rule], "cluster", state, observe(bad), at)
        yield from outcome.alerts
        state = outcome.state
