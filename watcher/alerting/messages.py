"""How notifications are worded: the built-in wordings, the one renderer, and alerts as facts.

Each kind has a pure default wording ``facts -> (title, body)`` in its module
(``watcher.kinds``); the built-in ``rpc_unhealthy``'s and ``rpc_disagreement``'s are here. The
facts are a JSON-friendly dict that always holds ``rule``, ``severity``, ``subject`` and
``reason``; they are stored with the alert and are the context of a rule's own
``title``/``body`` Jinja2 templates, which, when set, replace the default wording (rendered in
a sandbox).

Texts are plain and read well as they are; channels that render Markdown get them as Markdown
at send time (``watcher.delivery.apprise_adapter.to_markdown``). Titles are short
(``[CRITICAL] my-validator: validator ELvd…mskf delinquent``; a resolution reads
``[RESOLVED] ...``); pubkeys are shortened in titles, bodies carry them in full, except a
signature listed with its explorer link, shortened to its first and last 8 characters (the link
carries it in full). A rule's ``summary`` and ``runbook`` frame every body (``framed``): the
summary its first line, under the title, the runbook its last (``Runbook: ...``); a digest
(``watcher.delivery.digest``) frames the body it makes from its newest alert's facts.
Reminders and resolutions count durations from the onset of the problem (``episode_facts``: the
pending time of ``for`` included).

How keys are shown is a ``Presentation`` (the settings' address book ``labels`` and
``explorer_url``): a labelled key reads ``ELvd…mskf (my validator)`` in titles and in full with
its label in bodies, and each signature or address of a body is followed by its explorer link.
Steps stay pure and word nothing: they return alerts as facts (``make_alert``: no title, no
body yet). Each alert is worded ONCE, from its facts, by ``word_alert`` (through
``watcher.kinds.word``, which knows each kind's wording): the default wording, the rule's
templates, labels and explorer links, before it is stored. Digests name what their alerts
name, and each alert's subject (``watcher.delivery.digest``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from jinja2 import TemplateError

# The formatters are named here too: each kind's wording reaches them as ``messages.*``.
from watcher.alerting.formatting import PLAIN, Presentation, lines, plural, shorten
from watcher.alerting.templating import rendered
from watcher.core.clock import human_duration, iso
from watcher.core.events import AlertMessage, Grouping, Reason, Severity

Facts = Mapping[str, Any]


class RuleView(Protocol):
    """What wording and alert building read of any rule."""

    @property
    def name(self) -> str: ...

    @property
    def severity(self) -> Severity: ...

    @property
    def notify(self) -> Sequence[str] | None: ...

    @property
    def title(self) -> str | None: ...

    @property
    def body(self) -> str | None: ...


class PresentedRule(RuleView, Protocol):
    """A rule whose alerts can be worded: its kind names its wording
    (``watcher.kinds.wording_of``)."""

    @property
    def kind(self) -> str: ...


Wording = Callable[[Facts, Presentation], tuple[str, str]]


def rule_head(facts: Facts) -> str:
    """``[CRITICAL] my-validator:``; a resolution reads ``[RESOLVED] my-validator:``."""
    return f"[{_tag(facts)}] {facts['rule']}:"


def _tag(facts: Facts) -> str:
    if facts.get("reason") == "resolved":
        return "RESOLVED"
    return str(facts.get("severity", "warning")).upper()


def rule_line(facts: Facts) -> str:
    built_in = "built in, " if facts.get("built_in") else ""
    return f"Rule: {facts['rule']} ({built_in}severity {facts['severity']})"


# -- the frame: a rule's summary and runbook around every message of the rule -------------------


def runbook_line(facts: Facts) -> str | None:
    runbook = facts.get("runbook")
    return f"Runbook: {runbook}" if runbook else None


def framed(body: str, facts: Facts, notes: Sequence[str] = ()) -> str:
    """A body between its rule's ``summary`` (the first line, under the title) and
    ``runbook`` (the last line), with ``notes`` (``watcher.delivery.digest``) before it."""
    summary = facts.get("summary")
    runbook = runbook_line(facts)
    return lines(
        *((str(summary), "") if summary else ()),
        body,
        *(("", *notes) if notes else ()),
        *(("", runbook) if runbook else ()),
    )


def with_notes(body: str, facts: Facts, notes: Sequence[str]) -> str:
    """A worded (``framed``) body with ``notes`` added, still before its runbook line."""
    if not notes:
        return body
    runbook = runbook_line(facts)
    if runbook and body.endswith("\n\n" + runbook):
        return lines(body[: -len(runbook) - 2], "", *notes, "", runbook)
    return lines(body, "", *notes)


# -- episodes (state kinds) ------------------------------------------------------------------


def episode_facts(
    facts: Facts,
    previous: Facts,
    episode: Mapping[str, Any],
    transition: Reason,
    now: float,
) -> dict[str, Any]:
    """Facts of one observation + what the episode adds: its number, its onset (``since``: when
    the condition was first seen, pending time included), when it fired (``firing_since``) and
    its duration counted from the onset (``was``: the facts of the last observation where the
    condition held, for resolutions)."""
    fired = episode.get("firing_since")
    onset = episode.get("onset")
    started = onset if onset is not None else fired
    out: dict[str, Any] = {**facts, "episode": episode.get("number")}
    if fired is not None:
        out["firing_since"] = iso(float(fired))
    if started is not None:
        out["since"] = iso(float(started))
        out["duration_seconds"] = now - float(started)
        out["duration"] = human_duration(now - float(started))
    if transition == "resolved":
        out["was"] = dict(previous)
    return out


def since_text(facts: Facts) -> str:
    """``since <onset>``, and when the alert fired later (``for``), ``(firing since <t>)``."""
    since = facts.get("since") or facts.get("firing_since") or "unknown"
    fired = facts.get("firing_since")
    return f"since {since}" + (f" (firing since {fired})" if fired and fired != since else "")


# -- built-in alerts (watcher.alerting.builtin)


def _firing_facts(facts: Facts) -> Facts:
    """The facts of the episode as it fired: the alert's own, or a resolution's ``was``."""
    was: Facts = facts.get("was", {}) if facts["reason"] == "resolved" else facts
    return was


def _still(facts: Facts) -> str:
    """`` for <duration>`` on a repeat (the episode is still firing), else nothing."""
    return f" for {facts['duration']}" if facts["reason"] == "repeat" else ""


def rpc_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    """``rpc_unhealthy``: the endpoint failed every call of ``failed_rounds`` rounds in a row."""
    was = _firing_facts(facts)
    if facts["reason"] == "resolved":
        title = f"{rule_head(facts)} the RPC endpoint answers again after {facts['down_for']}"
        summary = (
            f"Resolved: the RPC endpoint answers again, after failing for {facts['down_for']} "
            f"(since {was.get('failing_since', 'unknown')})."
        )
    else:
        title = f"{rule_head(facts)} the RPC endpoint is failing{_still(facts)}"
        summary = (
            f"Every call failed for {plural(int(facts['failed_rounds']), 'round')} in a row, "
            f"since {facts['failing_since']}. Until it answers, nothing is concluded from the "
            "ledger: no rule fires or resolves on a failed call."
        )
    body = lines(
        rule_line(facts),
        f"Endpoint: {facts['endpoint']}",
        summary,
        f"Last error: {was.get('last_error') or 'unknown'}",
    )
    return title, body


def disagreement_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    """``rpc_disagreement``: the endpoints of a quorum answer, but decide a target differently."""
    on = f"{facts['source']} {facts['target']}"
    was = _firing_facts(facts)
    if facts["reason"] == "resolved":
        title = f"{rule_head(facts)} the RPC endpoints agree again on {on}"
        summary = (
            f"Resolved: the endpoints agree again on {on}, after disagreeing for "
            f"{facts.get('duration', 'unknown')} (since {facts.get('since', 'unknown')})."
        )
    else:
        outvoted: list[str] = facts.get("outvoted") or []
        title = f"{rule_head(facts)} the RPC endpoints disagree on {on}{_still(facts)}"
        summary = (
            f"The endpoints answer, but their answers lead to different alerts on every poll "
            f"since {facts.get('since', 'unknown')} ({facts['disagreement_for']} or more). Until "
            f"they agree, nothing is concluded about {on}: no rule fires or resolves on it."
        )
        if outvoted:
            title += f": {', '.join(outvoted)} outvoted"
            summary = (
                f"The endpoints answer, but not alike, on every poll since "
                f"{facts.get('since', 'unknown')} ({facts['disagreement_for']} or more): the "
                f"majority decides {on}, and {', '.join(outvoted)} is outvoted (its answers "
                "are not taken)."
            )
    body = lines(
        rule_line(facts),
        f"Endpoints: {', '.join(was.get('endpoints', [])) or 'unknown'}",
        f"Outvoted: {', '.join(was['outvoted'])}" if was.get("outvoted") else None,
        f"Source: {facts['source']}, target: {facts['target']}",
        summary,
        f"{'They disagreed on' if was is not facts else 'Differences'}: "
        f"{was.get('differences', 'unknown')}",
    )
    return title, body


# -- wording and alert building ---------------------------------------------------------------


def render_checked(
    rule: RuleView | None, facts: Facts, wording: Wording, shown: Presentation = PLAIN
) -> tuple[str, str, tuple[str, ...]]:
    """The default wording, with the rule's own templates in its place where set, and what
    went wrong wording it. Templates see the facts; their filters ``named`` and ``explorer`` see
    ``shown``.

    Wording one alert must never lose it, nor stop the step (and the cursor) it belongs to: a
    template that fails at render time (any exception: an undefined name, ``TypeError``...) is
    replaced by the default wording; a default wording that fails (facts it cannot word) by
    ``minimal_text``. Each failure is noted at the end of the body, ``(title template failed:
    ...)``, and returned, for the caller to log."""
    problems: list[str] = []
    try:
        title, body = wording(facts, shown)
    except Exception as exc:  # any failure of one alert's wording is contained
        problems.append(f"default wording failed: {_short_reason(exc)}")
        title, body = minimal_text(facts)
    if rule is not None and rule.title:
        try:
            title = rendered(rule.title, facts, shown).strip()
        except Exception as exc:
            problems.append(f"title template failed: {_short_reason(exc)}")
    if rule is not None and rule.body:
        try:
            body = rendered(rule.body, facts, shown)
        except Exception as exc:
            problems.append(f"body template failed: {_short_reason(exc)}")
    if problems:
        body = lines(body, "", *(f"({problem})" for problem in problems))
    return title, body, tuple(problems)


def minimal_text(facts: Facts) -> tuple[str, str]:
    """The wording of last resort: rule, severity, subject and reason, nothing that can fail."""
    severity, rule = str(facts.get("severity", "warning")), str(facts.get("rule", "?"))
    subject, reason = str(facts.get("subject", "?")), str(facts.get("reason", "event"))
    title = f"[{_tag(facts)}] {rule}: {reason} on {shorten(subject)}"
    body = lines(f"Rule: {rule} (severity {severity})", f"Subject: {subject}", f"Reason: {reason}")
    return title, body


_REASON_CHARS = 200


def _short_reason(exc: BaseException) -> str:
    # A template's own error says what it is; anything else is named by its class.
    said = str(exc) if isinstance(exc, TemplateError) else f"{type(exc).__name__}: {exc}"
    text = " ".join(said.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def make_alert(
    rule: RuleView,
    *,
    subject: str,
    reason: Reason,
    dedup_key: str,
    facts: Facts,
) -> AlertMessage:
    """An alert as facts, not worded yet (``title`` and ``body`` empty): ``word_alert`` words
    it, once."""
    full_facts = {
        **facts,
        "rule": rule.name,
        "severity": rule.severity,
        "subject": subject,
        "reason": reason,
    }
    kind = getattr(rule, "kind", None)
    if kind:  # what Alertmanager labels it with (``watcher.delivery.alertmanager``)
        full_facts["kind"] = str(kind)
    for key in ("summary", "runbook"):  # every message of the rule shows them (``framed``)
        value = getattr(rule, key, None)
        if value:
            full_facts[key] = value
    return AlertMessage(
        rule=rule.name,
        severity=rule.severity,
        subject=subject,
        reason=reason,
        dedup_key=dedup_key,
        title="",
        body="",
        channels=tuple(rule.notify or ()),
        facts=full_facts,
        grouping=grouping_of(rule) if reason == "event" else None,
    )


def snapshot_event(
    rule: RuleView, *, subject: str, target: str, seq: int, facts: Facts
) -> AlertMessage:
    """The event of a snapshot kind: what changed between two snapshots of ``target``, the
    ``seq``-th snapshot taken (so a move back to an earlier state is a new event)."""
    key = f"{rule.name}|{target}|snapshot-{seq}|event"
    return make_alert(rule, subject=subject, reason="event", dedup_key=key, facts=facts)


def grouping_of(rule: RuleView) -> Grouping | None:
    """The digest settings of an event rule (``group_wait`` ...); None for other rules."""
    wait = getattr(rule, "group_wait", None)
    if wait is None:
        return None
    return Grouping(
        kind=str(getattr(rule, "kind", "event")),
        wait=float(wait),
        interval=float(getattr(rule, "group_interval", 0.0)),
        max_per_hour=getattr(rule, "max_per_hour", None),
    )


def word_alert(
    alert: AlertMessage,
    rule: RuleView | None,
    wording: Wording | None,
    shown: Presentation = PLAIN,
) -> AlertMessage:
    """THE place an alert is worded: from its facts, by ``wording`` (its kind's default) or the
    rule's own templates, with labels and explorer links (``shown``). Without a known wording
    (or without its rule: no templates), the wording of last resort, ``minimal_text``."""
    default: Wording = wording or (lambda facts, _shown: minimal_text(facts))
    title, body, problems = render_checked(rule, alert.facts, default, shown)
    return replace(alert, title=title, body=framed(body, alert.facts), wording_problems=problems)
