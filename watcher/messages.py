"""All the wording of notifications, in one place.

Each message type has a pure function ``facts -> (title, body)``. The facts are a JSON-friendly
dict that always holds ``rule``, ``severity``, ``subject`` and ``reason``; they are stored with
the alert and are the context of a rule's own ``title``/``body`` Jinja2 templates, which, when
set, replace the default wording (rendered in a sandbox).

Texts are plain (Slack, email and Telegram all show them as they are), titles are short
(``[CRITICAL] my-validator: validator ELvd…mskf delinquent``); pubkeys are shortened only in
titles, bodies carry them in full.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from jinja2 import StrictUndefined, Template, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from watcher.clock import human_duration, iso
from watcher.events import AlertMessage, Reason, Severity

Facts = Mapping[str, Any]
Wording = Callable[[Facts], tuple[str, str]]

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


# -- small formatters ------------------------------------------------------------------------


def shorten(key: str) -> str:
    """``EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v`` -> ``EPjF…Dt1v`` (titles only)."""
    return key if len(key) <= 12 else f"{key[:4]}…{key[-4:]}"


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
    return f"Rule: {facts['rule']} (severity {facts['severity']})"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _lines(*parts: str | None) -> str:
    return "\n".join(part for part in parts if part is not None)


# -- transactions ----------------------------------------------------------------------------


def transactions_text(facts: Facts) -> tuple[str, str]:
    count = int(facts["count"])
    failed = int(facts.get("failed", 0))
    failed_note = f" ({failed} failed)" if failed else ""
    noun = _plural(count, "new transaction")
    title = f"{_head(facts)} {noun} on {shorten(facts['address'])}{failed_note}"
    listed = [_signature_line(entry) for entry in facts["signatures"]]
    more = int(facts.get("more", 0))
    body = _lines(
        _rule_line(facts),
        f"Address: {facts['address']}",
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


def holders_text(facts: Facts) -> tuple[str, str]:
    changes: Sequence[Mapping[str, Any]] = facts["changes"]
    noun = _plural(len(changes), "top-holder change")
    title = f"{_head(facts)} {noun} on {shorten(facts['mint'])}"
    body = _lines(
        _rule_line(facts),
        f"Mint: {facts['mint']}",
        f"{noun}; a balance counts from a {float(facts['min_change_pct']):g}% move since it was "
        "last notified",
        "",
        *(_holder_line(change) for change in changes),
    )
    return title, body


def _holder_line(change: Mapping[str, Any]) -> str:
    account = change["account"]
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


def validator_text(facts: Facts) -> tuple[str, str]:
    reason = facts["reason"]
    who = shorten(facts["subject"])
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
        f"Validator: {facts['subject']}",
        summary,
        f"Vote account: {facts.get('vote_pubkey') or 'unknown'}",
        f"Identity: {facts.get('node_pubkey') or 'unknown'}",
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


def drift_text(facts: Facts) -> tuple[str, str]:
    reason = facts["reason"]
    who = shorten(facts["subject"])
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
    vote_pubkeys: Sequence[str] = facts.get("vote_pubkeys") or ()
    body = _lines(
        _rule_line(facts),
        f"Node: {facts.get('node_pubkey') or facts['subject']}",
        summary,
        f"Vote account: {', '.join(vote_pubkeys) if vote_pubkeys else 'unknown'}",
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


# -- rendering and alert building ------------------------------------------------------------


def _template_filters() -> dict[str, Callable[..., str]]:
    return {"short": shorten, "duration": human_duration, "iso": iso, "amount": ui_amount}


@functools.cache
def _environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(autoescape=False, undefined=StrictUndefined)
    env.filters.update(_template_filters())
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


def render(rule: RuleView, facts: Facts, wording: Wording) -> tuple[str, str]:
    """The default wording, with the rule's own templates in its place where set. A template
    that fails at render time must not lose the alert: the default is kept and the error noted."""
    title, body = wording(facts)
    problems: list[str] = []
    if rule.title:
        try:
            title = _compiled(rule.title).render(facts).strip()
        except TemplateError as exc:
            problems.append(f"title template failed: {exc}")
    if rule.body:
        try:
            body = _compiled(rule.body).render(facts)
        except TemplateError as exc:
            problems.append(f"body template failed: {exc}")
    if problems:
        body = _lines(body, "", *(f"({problem})" for problem in problems))
    return title, body


def make_alert(
    rule: RuleView,
    *,
    subject: str,
    reason: Reason,
    dedup_key: str,
    facts: Facts,
    wording: Wording,
) -> AlertMessage:
    full_facts = {
        **facts,
        "rule": rule.name,
        "severity": rule.severity,
        "subject": subject,
        "reason": reason,
    }
    title, body = render(rule, full_facts, wording)
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
    )
