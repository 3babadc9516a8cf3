"""``watcher check``: a rule's ``title``/``body`` templates rendered once against sample alerts.

A template that compiles can still fail at render time (``{{ count + 'x' }}``, a fact its kind
does not have). The daemon then sends the default wording
(``watcher.alerting.messages.render_checked``);
``check`` tells the user before. The samples are the kind's own (``Kind.samples``, made by its
step or alert builder over made-up values: every transition its kind has, an event or firing,
repeat and resolved), so their facts are exactly what real alerts carry. The kinds are the
registry's (``watcher.kinds.KINDS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from watcher.alerting.messages import word_alert
from watcher.core.errors import Problem
from watcher.core.events import AlertMessage
from watcher.kinds import KINDS


def template_problems(rules: Sequence[Any]) -> list[Problem]:
    """One problem per rule whose templates fail on a sample alert of its kind."""
    problems: list[Problem] = []
    for rule in rules:
        if not (rule.title or rule.body):
            continue
        try:
            wording = KINDS[rule.kind].wording
            alerts = [word_alert(alert, rule, wording) for alert in sample_alerts(rule)]
        except Exception:  # no sample for this rule (e.g. nothing watched): nothing to say
            continue
        said = sorted({p for alert in alerts for p in alert.wording_problems})
        if said:
            file, _, line = str(rule.origin).rpartition(":")
            where = (file, int(line)) if line.isdigit() else (str(rule.origin), None)
            problems.append(Problem(where[0], where[1], f"rule '{rule.name}': " + "; ".join(said)))
    return problems


def sample_alerts(rule: Any) -> list[AlertMessage]:
    """Alerts of every transition of ``rule``'s kind, as facts (``word_alert`` words them):
    the kind's own ``samples`` (``watcher.kinds.toolkit.alert_samples``)."""
    samples = KINDS[rule.kind].samples
    return [] if samples is None else samples(rule)
