"""All the wording of notifications, in one place.

Each message type has a pure function ``facts -> (title, body)``. The facts are a JSON-friendly
dict that always holds ``rule``, ``severity``, ``subject`` and ``reason``; they are stored with
the alert and are the context of a rule's own ``title``/``body`` Jinja2 templates, which, when
set, replace the default wording (rendered in a sandbox).

Texts are plain (Slack, email and Telegram all show them as they are), titles are short
(``[CRITICAL] my-validator: validator ELvd…mskf delinquent``); pubkeys are shortened only in
titles, bodies carry them in full.

How keys are shown is a ``Presentation`` (the settings' address book ``labels`` and
``explorer_url``): a labelled key reads ``ELvd…mskf (my validator)`` in titles and in full with
its label in bodies, and each signature or address of a body is followed by its explorer link.
Steps stay pure and word with ``PLAIN`` (no labels, no links); the daemon then words each alert
again with the real presentation (``present``), from the facts, before it is stored.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from jinja2 import StrictUndefined, Template, TemplateError, pass_context
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment

from watcher.alerting.events import AlertMessage, Grouping, Reason, Severity
from watcher.core.clock import human_duration, iso

Facts = Mapping[str, Any]

LAMPORTS_DECIMALS = 9


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
    """A rule whose alerts can be worded again: its kind names its wording (``WORDINGS``)."""

    @property
    def kind(self) -> str: ...


# -- small formatters ------------------------------------------------------------------------


def shorten(key: str) -> str:
    """``EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v`` -> ``EPjF…Dt1v`` (titles only)."""
    return key if len(key) <= 12 else f"{key[:4]}…{key[-4:]}"


@dataclass(frozen=True)
class Presentation:
    """How keys are shown: names from the address book, links to an explorer (settings)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    # "https://explorer.solana.com/{kind}/{id}"; kind is "tx" or "address". None: no links.
    explorer_url: str | None = None

    def label(self, *keys: str | None) -> str | None:
        """The label of the first of ``keys`` that has one (a validator by vote or identity)."""
        return next((self.labels[key] for key in keys if key and key in self.labels), None)

    def name(self, key: str, *aliases: str | None) -> str:
        """The key in full, with its label if any (bodies)."""
        label = self.label(key, *aliases)
        return f"{key} ({label})" if label else key

    def short(self, key: str, *aliases: str | None) -> str:
        """The key shortened, with its label if any (titles)."""
        label = self.label(key, *aliases)
        return f"{shorten(key)} ({label})" if label else shorten(key)

    def link(self, kind: str, key: str | None) -> str | None:
        """The line under a signature (``tx``) or an address (``address``) in a body."""
        if self.explorer_url is None or not key:
            return None
        return "  " + self.explorer_url.format(kind=kind, id=key)


PLAIN = Presentation()
Wording = Callable[[Facts, Presentation], tuple[str, str]]


def ui_amount(raw: int, decimals: int) -> str:
    """Exact decimal form of a raw token amount: ``(854699973338, 8)`` -> ``8,546.99973338``."""
    sign = "-" if raw < 0 else ""
    whole, fraction = divmod(abs(raw), 10**decimals)
    fraction_text = str(fraction).rjust(decimals, "0").rstrip("0") if decimals else ""
    return f"{sign}{whole:,}" + (f".{fraction_text}" if fraction_text else "")


def sol(lamports: int | None) -> str:
    return "unknown" if lamports is None else f"{ui_amount(lamports, LAMPORTS_DECIMALS)} SOL"


def _head(facts: Facts) -> str:
    return f"[{str(facts['severity']).upper()}] {facts['rule']}:"


def _rule_line(facts: Facts) -> str:
    built_in = "built in, " if facts.get("built_in") else ""
    return f"Rule: {facts['rule']} ({built_in}severity {facts['severity']})"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _lines(*parts: str | None) -> str:
    return "\n".join(part for part in parts if part is not None)


# -- transactions ----------------------------------------------------------------------------


def transactions_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    count = int(facts["count"])
    failed = int(facts.get("failed", 0))
    failed_note = f" ({failed} failed)" if failed else ""
    noun = _plural(count, "new transaction")
    address = facts["address"]
    title = f"{_head(facts)} {noun} on {shown.short(address)}{failed_note}"
    listed: list[str | None] = []
    for entry in facts["signatures"]:
        listed += [_signature_line(entry), shown.link("tx", entry["signature"])]
    more = int(facts.get("more", 0))
    body = _lines(
        _rule_line(facts),
        f"Address: {shown.name(address)}",
        shown.link("address", address),
        f"{noun}{failed_note}, newest in slot {facts['newest_slot']}",
        "",
        *listed,
        f"... and {more} more" if more else None,
    )
    return title, body


def _signature_line(entry: Mapping[str, Any]) -> str:
    details = [f"slot {entry['slot']}"]
    if entry.get("block_time") is not None:
        details.append(iso(float(entry["block_time"])))
    if entry.get("failed"):
        details.append("(failed)")
    if entry.get("memo"):
        details.append(f"memo: {entry['memo']}")
    return f"- {entry['signature']}  " + ", ".join(details)


# -- holders ---------------------------------------------------------------------------------


def holders_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    changes: Sequence[Mapping[str, Any]] = facts["changes"]
    noun = _plural(len(changes), "top-holder change")
    mint = facts["mint"]
    title = f"{_head(facts)} {noun} on {shown.short(mint)}"
    listed: list[str | None] = []
    for change in changes:
        listed += [_holder_line(change, shown), shown.link("address", change["account"])]
    body = _lines(
        _rule_line(facts),
        f"Mint: {shown.name(mint)}",
        shown.link("address", mint),
        f"{noun}; a balance counts from a {float(facts['min_change_pct']):g}% move since it was "
        "last notified",
        "",
        *listed,
    )
    return title, body


def _holder_line(change: Mapping[str, Any], shown: Presentation) -> str:
    account = shown.name(change["account"])
    if change["kind"] == "entered":
        return f"- entered the top 20 at rank {change['rank']}: {account}  {change['new_ui']}"
    if change["kind"] == "left":
        was = f"(was rank {change['old_rank']}): {account}  was {change['old_ui']}"
        return f"- left the top 20 {was}"
    pct = change["pct"] if change["pct"] is not None else "new balance"
    return f"- rank {change['rank']}: {account}  {change['old_ui']} -> {change['new_ui']} ({pct})"


# -- episodes (state kinds) ------------------------------------------------------------------


def episode_facts(
    facts: Facts,
    previous: Facts,
    episode: Mapping[str, Any],
    transition: Reason,
    now: float,
) -> dict[str, Any]:
    """Facts of one observation + what the episode adds: its number, start and duration
    (``was``: the facts of the last observation where the condition held, for resolutions)."""
    started = episode.get("firing_since")
    out: dict[str, Any] = {**facts, "episode": episode.get("number")}
    if started is not None:
        out["firing_since"] = iso(float(started))
        out["duration_seconds"] = now - float(started)
        out["duration"] = human_duration(now - float(started))
    if transition == "resolved":
        out["was"] = dict(previous)
    return out


def validator_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    reason = facts["reason"]
    vote, node = facts.get("vote_pubkey"), facts.get("node_pubkey")
    who = shown.short(facts["subject"], vote, node)
    if reason == "resolved":
        was = facts.get("was", {}).get("status", "delinquent")
        title = f"{_head(facts)} validator {who} is voting again (current)"
        summary = f"Resolved: back in the current vote accounts after {facts['duration']} {was}."
    elif reason == "repeat":
        title = f"{_head(facts)} validator {who} still {facts['status']} ({facts['duration']})"
        since = f"for {facts['duration']}, since {facts['firing_since']}"
        summary = f"Still {facts['status']}: {since}."
    else:
        title = f"{_head(facts)} validator {who} {facts['status']}"
        summary = _validator_problem(facts)
    body = _lines(
        _rule_line(facts),
        f"Validator: {shown.name(facts['subject'], vote, node)}",
        summary,
        f"Vote account: {shown.name(vote) if vote else 'unknown'}",
        shown.link("address", vote),
        f"Identity: {shown.name(node) if node else 'unknown'}",
        shown.link("address", node),
        f"Activated stake: {sol(facts.get('activated_stake'))}",
        _last_vote_line(facts),
    )
    return title, body


def _validator_problem(facts: Facts) -> str:
    if facts["status"] == "missing":
        return (
            "It is in neither the current nor the delinquent vote accounts "
            "(wrong pubkey, closed vote account, or an unstaked delinquent)."
        )
    return "It is delinquent: its last vote is more than 128 slots behind the cluster."


def _last_vote_line(facts: Facts) -> str | None:
    if facts.get("last_vote") is None:
        return None
    behind = facts.get("slots_behind")
    note = f" ({_plural(behind, 'slot')} behind the newest vote)" if behind is not None else ""
    return f"Last vote: slot {facts['last_vote']}{note}"


def drift_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    reason = facts["reason"]
    node: str = facts.get("node_pubkey") or facts["subject"]
    vote_pubkeys: Sequence[str] = facts.get("vote_pubkeys") or ()
    who = shown.short(facts["subject"], node, *vote_pubkeys)
    if reason == "resolved":
        title = f"{_head(facts)} node {who} back in line ({_version_of(facts)})"
        was = _drift_problem(facts.get("was", {}))
        summary = f"Resolved after {facts['duration']}. Was: {was} Now: {_version_of(facts)}."
    elif reason == "repeat":
        title = f"{_head(facts)} node {who} still {_drift_short(facts)} ({facts['duration']})"
        summary = f"Still drifting, for {facts['duration']}. {_drift_problem(facts)}"
    else:
        title = f"{_head(facts)} node {who} {_drift_short(facts)}"
        summary = _drift_problem(facts)
    votes_named = ", ".join(shown.name(vote) for vote in vote_pubkeys)
    body = _lines(
        _rule_line(facts),
        f"Node: {shown.name(node)}",
        shown.link("address", node),
        summary,
        f"Vote account: {votes_named or 'unknown'}",
        *(shown.link("address", vote) for vote in vote_pubkeys),
        f"Version: {facts.get('version') or 'unknown'} (client {facts.get('client') or 'unknown'})",
        _reference_line(facts),
        f"Feature set: {facts.get('feature_set') or 'unknown'}; stake majority: "
        f"{facts.get('reference_feature_set') or 'unknown'}"
        f" ({facts.get('reference_feature_set_stake_pct', '?')}% of stake)",
        f"Activated stake: {sol(facts.get('stake'))}",
    )
    return title, body


def _version_of(facts: Facts) -> str:
    return f"{facts.get('client') or 'unknown client'} {facts.get('version') or 'unknown'}"


def _drift_short(facts: Facts) -> str:
    status = facts.get("status")
    if status == "missing":
        return "missing from gossip"
    if status == "feature_set":
        return (
            f"on feature set {facts.get('feature_set')}, "
            f"majority on {facts.get('reference_feature_set')}"
        )
    return (
        f"behind: {facts.get('client')} {facts.get('version')} < {facts.get('reference_version')}"
    )


def _drift_problem(facts: Facts) -> str:
    status = facts.get("status")
    if status == "missing":
        return "Missing from gossip (getClusterNodes)."
    if status == "feature_set":
        return (
            f"Feature set {facts.get('feature_set')} differs from "
            f"{facts.get('reference_feature_set')}, the one holding the most stake."
        )
    if status == "behind":
        return (
            f"Runs {facts.get('client')} {facts.get('version')}, behind "
            f"{facts.get('reference_version')}, the {facts.get('client')} version holding the "
            f"most stake."
        )
    return "Drifting."


def _reference_line(facts: Facts) -> str | None:
    if not facts.get("reference_version"):
        return None
    return (
        f"Reference {facts.get('client')} version: {facts['reference_version']} "
        f"({facts.get('reference_stake_pct', '?')}% of that client's stake)"
    )


# -- built-in alerts (watcher.alerting.builtin)


def rpc_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    """``rpc_unhealthy``: the endpoint failed every call of ``failed_rounds`` rounds in a row."""
    if facts["reason"] == "resolved":
        was: Facts = facts.get("was", {})
        title = f"{_head(facts)} the RPC endpoint answers again after {facts['down_for']}"
        summary = (
            f"Resolved: the RPC endpoint answers again, after failing for {facts['down_for']} "
            f"(since {was.get('failing_since', 'unknown')})."
        )
        error = was.get("last_error")
    else:
        still = f" for {facts['duration']}" if facts["reason"] == "repeat" else ""
        title = f"{_head(facts)} the RPC endpoint is failing{still}"
        summary = (
            f"Every call failed for {_plural(int(facts['failed_rounds']), 'round')} in a row, "
            f"since {facts['failing_since']}. Until it answers, nothing is concluded from the "
            "ledger: no rule fires or resolves on a failed call."
        )
        error = facts.get("last_error")
    body = _lines(
        _rule_line(facts),
        f"Endpoint: {facts['endpoint']}",
        summary,
        f"Last error: {error or 'unknown'}",
    )
    return title, body


def cluster_stake_text(facts: Facts, shown: Presentation = PLAIN) -> tuple[str, str]:
    """``cluster_delinquent_stake``: more than the threshold of activated stake is delinquent."""
    share = f"{facts['delinquent_pct']:.1f}%"
    threshold = f"{float(facts['threshold_pct']):g}%"
    if facts["reason"] == "resolved":
        title = f"{_head(facts)} delinquent stake back to {share}"
        was = float(facts.get("was", {}).get("delinquent_pct", 0.0))
        summary = (
            f"Resolved after {facts['duration']}: {share} of the activated stake is delinquent, "
            f"at or under the {threshold} threshold (it was {was:.1f}%). Validator rules are "
            "evaluated one by one again."
        )
    else:
        title = f"{_head(facts)} {share} of the activated stake is delinquent"
        summary = (
            f"{share} of the activated stake is delinquent, above the {threshold} threshold. "
            "While this lasts, delinquent_validators rules are held: their validators fire or "
            "resolve one by one once the share is back under the threshold."
        )
    largest: Sequence[Mapping[str, Any]] = facts.get("largest") or ()
    listed: list[str | None] = []
    for account in largest:
        vote, node = account["vote_pubkey"], account["node_pubkey"]
        stake = sol(account["activated_stake"])
        listed += [f"- {shown.name(vote)}  {stake}, identity {shown.name(node)}"]
        listed += [shown.link("address", vote)]
    body = _lines(
        _rule_line(facts),
        summary,
        f"Delinquent: {sol(facts['delinquent_stake'])} of {sol(facts['total_stake'])}; "
        f"{facts['delinquent_count']} of {facts['total_count']} vote accounts",
        *(("", "Largest delinquent vote accounts:", *listed) if listed else ()),
    )
    return title, body


# Each kind's default wording, for wording an alert again from its facts (``present``).
WORDINGS: Mapping[str, Wording] = {
    "new_transactions": transactions_text,
    "holder_changes": holders_text,
    "delinquent_validators": validator_text,
    "version_drift": drift_text,
    "rpc_unhealthy": rpc_text,
    "cluster_delinquent_stake": cluster_stake_text,
}


# -- rendering and alert building ------------------------------------------------------------

_PRESENTATION = "_presentation"  # where templates' filters find the presentation


@pass_context
def _named_filter(context: Context, key: str) -> str:
    shown = context.get(_PRESENTATION, PLAIN)
    return shown.name(key) if isinstance(shown, Presentation) else key


@pass_context
def _explorer_filter(context: Context, key: str, kind: str = "address") -> str:
    shown = context.get(_PRESENTATION, PLAIN)
    line = shown.link(kind, key) if isinstance(shown, Presentation) else None
    return line.strip() if line else ""


@functools.cache
def _environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(autoescape=False, undefined=StrictUndefined)
    env.filters.update(short=shorten, duration=human_duration, iso=iso, amount=ui_amount)
    env.filters.update(named=_named_filter, explorer=_explorer_filter)
    return env


@functools.lru_cache(maxsize=256)
def _compiled(source: str) -> Template:
    return _environment().from_string(source)


def template_problem(source: str) -> str | None:
    """Why a rule's template cannot be compiled, or None (for ``watcher check``)."""
    try:
        _compiled(source)
    except TemplateError as exc:
        return f"template error: {exc}"
    return None


def render(
    rule: RuleView, facts: Facts, wording: Wording, shown: Presentation = PLAIN
) -> tuple[str, str]:
    """The alert's (title, body): see ``render_checked``."""
    title, body, _ = render_checked(rule, facts, wording, shown)
    return title, body


def render_checked(
    rule: RuleView, facts: Facts, wording: Wording, shown: Presentation = PLAIN
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
    context = {**facts, _PRESENTATION: shown}
    if rule.title:
        try:
            title = _compiled(rule.title).render(context).strip()
        except Exception as exc:
            problems.append(f"title template failed: {_short_reason(exc)}")
    if rule.body:
        try:
            body = _compiled(rule.body).render(context)
        except Exception as exc:
            problems.append(f"body template failed: {_short_reason(exc)}")
    if problems:
        body = _lines(body, "", *(f"({problem})" for problem in problems))
    return title, body, tuple(problems)


def minimal_text(facts: Facts) -> tuple[str, str]:
    """The wording of last resort: rule, severity, subject and reason, nothing that can fail."""
    severity, rule = str(facts.get("severity", "warning")), str(facts.get("rule", "?"))
    subject, reason = str(facts.get("subject", "?")), str(facts.get("reason", "event"))
    title = f"[{severity.upper()}] {rule}: {reason} on {shorten(subject)}"
    body = _lines(f"Rule: {rule} (severity {severity})", f"Subject: {subject}", f"Reason: {reason}")
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
    wording: Wording,
) -> AlertMessage:
    """An alert worded ``PLAIN`` (steps are pure); the daemon words it again with ``present``."""
    full_facts = {
        **facts,
        "rule": rule.name,
        "severity": rule.severity,
        "subject": subject,
        "reason": reason,
    }
    title, body, problems = render_checked(rule, full_facts, wording)
    return AlertMessage(
        rule=rule.name,
        severity=rule.severity,
        subject=subject,
        reason=reason,
        dedup_key=dedup_key,
        title=title,
        body=body,
        channels=tuple(rule.notify or ()),
        facts=full_facts,
        grouping=grouping_of(rule) if reason == "event" else None,
        wording_problems=problems,
    )


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


def present(alert: AlertMessage, rule: PresentedRule, shown: Presentation) -> AlertMessage:
    """The alert worded again from its facts with labels and explorer links (``shown``).
    An alert of a kind without a known wording is left as it is."""
    wording = WORDINGS.get(rule.kind)
    if wording is None:
        return alert
    title, body, problems = render_checked(rule, alert.facts, wording, shown)
    return replace(alert, title=title, body=body, wording_problems=problems)
