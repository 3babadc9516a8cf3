"""The observed values kept for /metrics (``watcher.service.observed_values``): a target's
samples replaced whole by its next accepted answer, dropped by a reload that stops watching it,
and rendered by the collector."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from watcher.kinds.metric_samples import Sample
from watcher.service.observed_values import ObservedCollector, ObservedValues


@dataclass(frozen=True)
class Rule:
    name: str
    watched: tuple[str, ...]


def balances(rules: Sequence[Any], target: str, observation: Any) -> tuple[Sample, ...]:
    return (Sample("solana_account_balance", (target,), observation),)


def validators(rules: Sequence[Any], target: str, observation: Any) -> tuple[Sample, ...]:
    watched = [key for rule in rules for key in rule.watched]
    samples = [
        Sample("solana_validator_delinquent", (key, ""), observation, key) for key in watched
    ]
    return (*samples, Sample("solana_cluster_last_vote", (), 7))


SAMPLERS = {"accounts": balances, "votes": validators}


def watching_all(source: str, target: str) -> list[Rule]:
    return [Rule("r", ("A", "B"))]


def series(values: ObservedValues) -> dict[tuple[str, str], list[tuple[str, float]]]:
    return {
        key: [(sample.name, sample.value) for sample in samples]
        for key, samples in values.current().items()
    }


def test_an_accepted_answer_replaces_its_targets_samples_and_others_show_nothing() -> None:
    values = ObservedValues(SAMPLERS)
    values.accepted("accounts", "A", 1.5, watching_all)
    values.accepted("accounts", "A", 2.5, watching_all)
    values.accepted("signatures", "A", object(), watching_all)  # shows no value
    assert series(values) == {("accounts", "A"): [("solana_account_balance", 2.5)]}


def test_an_answer_for_a_target_no_rule_watches_now_drops_it() -> None:
    values = ObservedValues(SAMPLERS)
    values.accepted("accounts", "A", 1.5, watching_all)
    values.accepted("accounts", "A", 2.5, lambda source, target: [])
    assert series(values) == {}


def test_a_reload_keeps_only_the_targets_and_subjects_still_watched() -> None:
    values = ObservedValues(SAMPLERS)
    for target in ("A", "B"):
        values.accepted("accounts", target, 1.0, watching_all)
    values.accepted("votes", "cluster", 0, watching_all)

    def watching(source: str, target: str) -> list[Rule]:
        return [] if target == "B" else [Rule("r", ("A",))]

    values.retain(watching)
    assert set(values.current()) == {("accounts", "A"), ("votes", "cluster")}
    subjects = [sample.subject for sample in values.current()[("votes", "cluster")]]
    assert subjects == ["A", None]  # B's validator is gone, the cluster-wide value stays


def test_a_reload_leaves_what_a_poll_wrote_meanwhile() -> None:
    values = ObservedValues(SAMPLERS)
    values.accepted("accounts", "A", 1.0, watching_all)

    def watching(source: str, target: str) -> list[Rule]:
        values.accepted("accounts", "A", 9.0, watching_all)  # a poll, during the reload
        return []

    values.retain(watching)
    assert series(values) == {("accounts", "A"): [("solana_account_balance", 9.0)]}


def test_the_collector_renders_each_series_once() -> None:
    values = ObservedValues(SAMPLERS)
    values.accepted("accounts", "A", 1.5, watching_all)
    values.accepted("votes", "cluster", 1, watching_all)
    values.accepted("votes", "other", 1, watching_all)  # the same series again
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ObservedCollector(values))
    text = generate_latest(registry).decode()
    assert 'solana_account_balance{address="A"} 1.5' in text
    assert text.count('solana_validator_delinquent{nodekey="",votekey="A"} 1.0') == 1
    assert text.count("solana_cluster_last_vote 7.0") == 1
    assert "# TYPE solana_token_supply" not in text  # no sample, no family
