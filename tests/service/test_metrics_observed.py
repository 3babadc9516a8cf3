"""The observed values kept for /metrics (``watcher.service.metrics.ObservedValues``): a target's
samples replaced whole by its next accepted answer, dropped by a reload that stops watching it,
and rendered as prometheus_client renders them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric, UnknownMetricFamily
from prometheus_client.registry import Collector

from watcher.kinds.toolkit.metric_values import METRICS, Sample
from watcher.service.metrics import ObservedValues


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


def test_the_exposition_renders_each_series_once() -> None:
    values = ObservedValues(SAMPLERS)
    values.accepted("accounts", "A", 1.5, watching_all)
    values.accepted("votes", "cluster", 1, watching_all)
    values.accepted("votes", "other", 1, watching_all)  # the same series again
    text = values.exposition().decode()
    assert 'solana_account_balance{address="A"} 1.5' in text
    assert text.count('solana_validator_delinquent{nodekey="",votekey="A"} 1.0') == 1
    assert text.count("solana_cluster_last_vote 7.0") == 1
    assert "# TYPE solana_token_supply" not in text  # no sample, no family


def reference(values: ObservedValues) -> bytes:
    """What prometheus_client renders of the same values: one family per metric with
    samples, sorted by name, each series once (the first target's)."""
    by_metric: dict[str, dict[tuple[str, ...], float]] = {}
    for samples in values.current().values():
        for sample in samples:
            by_metric.setdefault(sample.name, {}).setdefault(sample.labels, sample.value)

    class Families(Collector):
        def collect(self) -> Iterator[Metric]:
            for name, series in sorted(by_metric.items()):
                spec = METRICS[name]
                family = (UnknownMetricFamily if spec.untyped else GaugeMetricFamily)(
                    name, spec.help, labels=spec.labels
                )
                for labels, value in series.items():
                    family.add_metric(labels, value)
                yield family

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families())
    return generate_latest(registry)


label_text = st.text(alphabet=st.sampled_from('ab1\\"\n {}=,é'), max_size=6)
number = st.one_of(
    st.floats(allow_nan=False), st.integers(-(10**20), 10**20), st.sampled_from([0.0, 1e21])
)


@st.composite
def observed(draw: st.DrawFn) -> list[tuple[str, str, tuple[Sample, ...]]]:
    answers = []
    for index in range(draw(st.integers(0, 6))):
        names = draw(st.lists(st.sampled_from(sorted(METRICS)), min_size=1, max_size=4))
        samples = tuple(
            Sample(
                name,
                tuple(draw(label_text) for _ in METRICS[name].labels),
                draw(number),
            )
            for name in names
        )
        answers.append((draw(st.sampled_from(["votes", "accounts"])), f"t{index % 3}", samples))
    return answers


@settings(max_examples=200, deadline=None)
@given(observed())
def test_the_exposition_is_what_prometheus_client_renders(
    answers: list[tuple[str, str, tuple[Sample, ...]]],
) -> None:
    values = ObservedValues({"votes": given_samples, "accounts": given_samples})
    for source, target, samples in answers:
        values.accepted(source, target, samples, watching_all)
        assert values.exposition() == reference(values)  # the second time from what it kept


def given_samples(rules: Sequence[Any], target: str, observation: Any) -> tuple[Sample, ...]:
    return cast(tuple[Sample, ...], observation)


def test_an_equal_answer_keeps_the_samples_and_their_lines() -> None:
    values = ObservedValues(SAMPLERS)
    values.accepted("accounts", "A", 1.5, watching_all)
    before = values.current()[("accounts", "A")]
    first = values.exposition()
    values.accepted("accounts", "A", 1.5, watching_all)
    assert values.current()[("accounts", "A")] is before
    assert values.exposition() == first
    values.accepted("accounts", "A", 2.5, watching_all)
    assert b'solana_account_balance{address="A"} 2.5' in values.exposition()


def test_a_scrape_while_no_sample_changed_answers_the_same_text() -> None:
    values = ObservedValues(SAMPLERS)
    values.accepted("accounts", "A", 1.5, watching_all)
    first = values.exposition()
    values.accepted("accounts", "A", 1.5, watching_all)  # the same answer again
    assert values.exposition() is first
    values.accepted("accounts", "A", 2.5, watching_all)
    moved = values.exposition()
    assert b'solana_account_balance{address="A"} 2.5' in moved
    assert b"1.5" not in moved
    values.accepted("accounts", "A", 2.5, lambda source, target: [])  # no rule watches it now
    assert b"solana_account_balance{" not in values.exposition()
    values.accepted("accounts", "B", 3.0, watching_all)
    values.retain(lambda source, target: [])  # a reload that watches nothing
    assert b"solana_account_balance{" not in values.exposition()


def test_a_reload_that_drops_a_subject_drops_its_line_from_the_next_scrape() -> None:
    values = ObservedValues(SAMPLERS)
    values.accepted("votes", "cluster", 1, watching_all)
    before = values.exposition().decode()
    assert 'votekey="A"' in before and 'votekey="B"' in before
    values.retain(lambda source, target: [Rule("r", ("A",))])
    after = values.exposition().decode()
    assert 'votekey="A"' in after and 'votekey="B"' not in after
    assert "solana_cluster_last_vote 7.0" in after
