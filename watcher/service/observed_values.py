"""The values the rules observe, kept in memory for ``/metrics``: the latest samples of each
watched target, taken from accepted answers only (``Daemon.poll_target`` hands each one over
once it is evidence; a failed or doubted poll changes nothing, so the last values stay).

The samples of a target are replaced as a whole by its next accepted answer (a holder that left
the top leaves with it); a reload drops those of the targets and subjects no rule watches any
more. The polls write on the event loop while a scrape renders in a thread: each write swaps one
immutable tuple in under a lock, and a scrape copies the dict under the same lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric, UnknownMetricFamily
from prometheus_client.registry import Collector

from watcher.kinds.metric_samples import METRICS, SAMPLERS, Sample, Sampler

Key = tuple[str, str]  # (source, target)
Watching = Callable[[str, str], Sequence[Any]]  # (source, target) -> the rules watching it


class ObservedValues:
    def __init__(self, samplers: Mapping[str, Sampler] = SAMPLERS) -> None:
        self._samplers = samplers
        self._lock = threading.Lock()
        self._values: dict[Key, tuple[Sample, ...]] = {}

    def accepted(self, source: str, target: str, observation: Any, watching: Watching) -> None:
        """An answer taken as evidence, with the rules watching its target now (none: a target
        a reload dropped while its poll was under way, which shows nothing any more)."""
        sampler = self._samplers.get(source)
        if sampler is None:
            return  # a source that shows no value (signatures, assets ...)
        rules = watching(source, target)
        samples = sampler(rules, target, observation) if rules else ()
        with self._lock:
            if samples:
                self._values[(source, target)] = samples
            else:
                self._values.pop((source, target), None)

    def retain(self, watching: Watching) -> None:
        """After a reload: only the targets some rule watches (``watching(source, target)``)
        keep their samples, and of those only the ones about a subject still watched. Run in a
        thread (a million targets take a while): a target a poll wrote meanwhile keeps what
        that poll wrote, made with the new rules."""
        seen = self.current()
        kept: dict[Key, tuple[Sample, ...]] = {}
        for key, samples in seen.items():
            rules = watching(*key)
            if not rules:
                continue
            if all(sample.subject is None for sample in samples):
                kept[key] = samples
                continue
            # Only validators and fee rules name subjects: a few rules, a few keys each.
            subjects = {name for rule in rules for name in (rule.name, *rule.watched)}
            kept[key] = tuple(s for s in samples if s.subject is None or s.subject in subjects)
        with self._lock:
            for key, samples in seen.items():
                if self._values.get(key) is not samples:
                    continue  # written since
                if kept.get(key):
                    self._values[key] = kept[key]
                else:
                    del self._values[key]

    def current(self) -> dict[Key, tuple[Sample, ...]]:
        """A copy, safe to read while the polls go on."""
        with self._lock:
            return dict(self._values)


class ObservedCollector(Collector):
    """Renders the observed values: one family (a gauge, as a rule) per metric that has
    samples."""

    def __init__(self, values: ObservedValues) -> None:
        self._values = values

    def collect(self) -> Iterator[Metric]:
        by_metric: dict[str, dict[tuple[str, ...], float]] = {}
        for samples in self._values.current().values():
            for sample in samples:
                by_metric.setdefault(sample.name, {}).setdefault(sample.labels, sample.value)
        for name, series in sorted(by_metric.items()):
            spec = METRICS[name]
            family = (UnknownMetricFamily if spec.untyped else GaugeMetricFamily)(
                name, spec.help, labels=spec.labels
            )
            for labels, value in series.items():
                family.add_metric(labels, value)
            yield family
