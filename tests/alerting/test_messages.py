"""Wording: what each notification says, and per-rule Jinja2 templates in a sandbox."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from watcher.alerting.formatting import shorten, ui_amount
from watcher.alerting.messages import (
    episode_facts,
    framed,
    make_alert,
    minimal_text,
    render_checked,
    with_notes,
)
from watcher.alerting.templating import template_problem
from watcher.kinds import RULE_MODELS, word
from watcher.kinds.delinquent_validators import validator_text
from watcher.kinds.holder_changes import holders_text
from watcher.kinds.new_transactions import transactions_text
from watcher.kinds.version_drift import drift_text

from support.values import key

ADDRESS = key("messages-address")
NODE, VOTE = key("messages-node"), key("messages-vote")


@pytest.mark.parametrize(
    ("raw", "decimals", "text"),
    [
        (854699973338, 8, "8,546.99973338"),
        (51664977100, 8, "516.649771"),
        (0, 6, "0"),
        (1, 9, "0.000000001"),
        (10**19, 0, "10,000,000,000,000,000,000"),
        (18446744073709551615, 6, "18,446,744,073,709.551615"),  # u64 max: exact, no float
        (-150, 2, "-1.5"),
    ],
)
def test_ui_amount_is_exact(raw: int, decimals: int, text: str) -> None:
    assert ui_amount(raw, decimals) == text


def test_shorten_only_long_keys() -> None:
    assert shorten("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v") == "EPjF…Dt1v"
    assert shorten("cluster") == "cluster"


def base(reason: str, **facts: Any) -> dict[str, Any]:
    return {"rule": "r1", "severity": "critical", "subject": VOTE, "reason": reason, **facts}


def test_single_transaction_title_is_singular() -> None:
    facts = base(
        "event",
        address=ADDRESS,
        count=1,
        failed=0,
        newest_slot=7,
        signatures=[{"signature": "S1", "slot": 7, "failed": False, "memo": None}],
        more=0,
    )
    title, body = transactions_text(facts)
    assert title == f"[CRITICAL] r1: 1 new transaction on {shorten(ADDRESS)}"
    assert "- S1  slot 7" in body and "more" not in body


def test_holder_change_from_zero_says_new_balance() -> None:
    change = {
        "kind": "changed",
        "account": "ACC",
        "old_ui": "0",
        "new_ui": "5",
        "pct": None,
        "rank": 3,
    }
    title, body = holders_text(base("event", mint=ADDRESS, min_change_pct=5.0, changes=[change]))
    assert title == f"[CRITICAL] r1: 1 top-holder change on {shorten(ADDRESS)}"
    assert "- rank 3: ACC  0 -> 5 (new balance)" in body
    assert "5% move" in body


def validator_facts(reason: str, **extra: Any) -> dict[str, Any]:
    return base(
        reason,
        status="delinquent",
        vote_pubkey=VOTE,
        node_pubkey=NODE,
        activated_stake=2_000_000_000,
        last_vote=100,
        slots_behind=300,
        **extra,
    )


def test_validator_repeat_says_for_how_long() -> None:
    facts = validator_facts("repeat", duration="4h", firing_since="2026-01-01T00:00:00Z")
    title, body = validator_text(facts)
    assert title == f"[CRITICAL] r1: validator {shorten(VOTE)} still delinquent (4h)"
    assert "Still delinquent: for 4h, since 2026-01-01T00:00:00Z." in body
    assert f"Vote account: {VOTE}" in body and f"Identity: {NODE}" in body
    assert "Activated stake: 2 SOL" in body and "(300 slots behind the newest vote)" in body


def test_missing_validator_has_unknown_accounts() -> None:
    facts = base("firing", status="missing", vote_pubkey=None, node_pubkey=None)
    title, body = validator_text(facts)
    assert title == f"[CRITICAL] r1: validator {shorten(VOTE)} missing"
    assert "Vote account: unknown" in body and "Last vote" not in body


def drift_facts(reason: str, **extra: Any) -> dict[str, Any]:
    facts = base(
        reason,
        node_pubkey=NODE,
        vote_pubkeys=[VOTE],
        version="0.703.20300",
        client="frankendancer",
        reference_version="0.703.20300",
        reference_stake_pct=45.0,
        feature_set=1,
        reference_feature_set=3640012085,
        reference_feature_set_stake_pct=99.2,
        stake=10**15,
        status="feature_set",
    )
    return {**facts, **extra}


def test_drift_by_feature_set_names_both_feature_sets() -> None:
    title, body = drift_text(drift_facts("firing"))
    assert title == (
        f"[CRITICAL] r1: node {shorten(VOTE)} on feature set 1, majority on 3640012085"
    )
    assert "Feature set 1 differs from 3640012085, the one holding the most stake." in body
    assert f"Node: {NODE}" in body and f"Vote account: {VOTE}" in body
    assert "Version: 0.703.20300 (client frankendancer)" in body


def test_drift_repeat_and_resolution_after_missing() -> None:
    title, body = drift_text(drift_facts("repeat", status="missing", duration="2h"))
    assert title == f"[CRITICAL] r1: node {shorten(VOTE)} still missing from gossip (2h)"
    assert "Still drifting, for 2h. Missing from gossip" in body
    resolved = drift_facts("resolved", status="ok", duration="3m", was={"status": "missing"})
    title, body = drift_text(resolved)
    assert title == f"[RESOLVED] r1: node {shorten(VOTE)} back in line (frankendancer 0.703.20300)"
    assert "Resolved after 3m. Was: Missing from gossip" in body


def test_episode_facts_carry_duration_and_what_it_was() -> None:
    episode = {"number": 2, "firing_since": 1000.0}
    facts = episode_facts(
        {"status": "current"}, {"status": "delinquent"}, episode, "resolved", 1330
    )
    assert facts["duration"] == "5m 30s" and facts["episode"] == 2
    assert facts["firing_since"] == "1970-01-01T00:16:40Z"
    assert facts["was"] == {"status": "delinquent"}
    assert "was" not in episode_facts({}, {"status": "x"}, episode, "repeat", 1330)


def test_episode_facts_count_from_the_onset_pending_time_included() -> None:
    episode = {"number": 1, "onset": 1000.0, "firing_since": 1010.0}
    facts = episode_facts({}, {}, episode, "repeat", 1065)
    assert facts["duration"] == "1m 5s" and facts["duration_seconds"] == 65
    assert facts["since"] == "1970-01-01T00:16:40Z"
    assert facts["firing_since"] == "1970-01-01T00:16:50Z"


# -- templates -------------------------------------------------------------------------------


def templated(**templates: str) -> Any:
    return RULE_MODELS["new_transactions"].model_validate(
        {"name": "tpl", "kind": "new_transactions", "addresses": [ADDRESS], **templates}
    )


TX_FACTS = {
    "address": ADDRESS,
    "count": 2,
    "failed": 0,
    "newest_slot": 9,
    "signatures": [
        {"signature": "S2", "slot": 9, "failed": False, "memo": None},
        {"signature": "S1", "slot": 8, "failed": False, "memo": None},
    ],
    "more": 0,
}


def alert_for(rule: Any) -> Any:
    said = make_alert(rule, subject=ADDRESS, reason="event", dedup_key="k", facts=TX_FACTS)
    return word(said, rule)


def test_a_step_says_facts_and_word_words_them_once() -> None:
    rule = templated()
    said = make_alert(rule, subject=ADDRESS, reason="event", dedup_key="k", facts=TX_FACTS)
    assert (said.title, said.body) == ("", "")  # a step words nothing
    worded = word(said, rule)
    assert (worded.title, worded.body) == transactions_text(said.facts)
    assert worded.facts == said.facts and worded.dedup_key == said.dedup_key
    # Without its rule (no kind, no templates): the wording of last resort.
    assert (word(said, None).title, word(said, None).body) == minimal_text(said.facts)


def test_rule_templates_replace_the_default_wording() -> None:
    rule = templated(
        title="{{ severity | upper }} {{ rule }}: {{ count }} on {{ address | short }}",
        body="{% for s in signatures %}{{ s.signature }}@{{ s.slot }} {% endfor %}",
    )
    alert = alert_for(rule)
    assert alert.title == f"WARNING tpl: 2 on {shorten(ADDRESS)}"
    assert alert.body == "S2@9 S1@8 "
    assert alert.facts["rule"] == "tpl" and alert.facts["count"] == 2
    assert alert.channels == ()  # routing fills it in later


def test_only_the_title_can_be_overridden() -> None:
    alert = alert_for(templated(title="{{ count }} new"))
    assert alert.title == "2 new"
    assert alert.body == transactions_text({**alert.facts})[1]


def test_a_template_failing_at_render_keeps_the_default_and_says_why() -> None:
    alert = alert_for(templated(title="{{ no_such_fact }}", body="{{ ''.__class__.__mro__ }}"))
    default_title, default_body = transactions_text(alert.facts)
    assert alert.title == default_title
    assert alert.body.startswith(default_body)
    assert "(title template failed: 'no_such_fact' is undefined)" in alert.body
    # The sandbox refuses to walk Python internals.
    assert "(body template failed: access to attribute '__class__'" in alert.body
    assert "<class" not in alert.body


def test_template_problem() -> None:
    assert template_problem("{{ count }} new") is None
    assert template_problem("{% if %}") is not None


def test_a_default_wording_that_fails_falls_back_to_the_minimal_wording() -> None:
    def failing(facts: Any, shown: Any) -> tuple[str, str]:
        raise ValueError("year 57000 is out of range")

    rule = SimpleNamespace(
        name="treasury", severity="warning", notify=["ops"], title=None, body=None
    )
    address = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
    facts = {"rule": "treasury", "severity": "warning", "subject": address, "reason": "event"}
    title, body, problems = render_checked(rule, facts, failing)
    assert title == "[WARNING] treasury: event on 9xQe…VFin"
    assert f"Subject: {address}" in body
    assert "(default wording failed: ValueError: year 57000 is out of range)" in body
    assert problems == ("default wording failed: ValueError: year 57000 is out of range",)


# -- summary and runbook ---------------------------------------------------------------------


def test_summary_and_runbook_frame_every_message_of_their_rule() -> None:
    rule = RULE_MODELS["delinquent_validators"].model_validate(
        {
            "name": "r1",
            "kind": "delinquent_validators",
            "validators": [VOTE],
            "severity": "critical",
            "summary": "Our mainnet validator stopped voting",
            "runbook": "https://wiki.example/runbooks/delinquent",
        }
    )
    episode = {"since": "2026-01-01T00:00:00Z", "firing_since": "2026-01-01T00:00:00Z"}
    extra: dict[str, Any] = {
        "firing": {},
        "repeat": {"duration": "1h", **episode},
        "resolved": {"duration": "1h", "was": {"status": "delinquent"}, **episode},
    }
    for reason, facts in extra.items():
        said = make_alert(
            rule,
            subject=VOTE,
            reason=reason,  # type: ignore[arg-type]
            dedup_key=reason,
            facts=validator_facts(reason, **facts),
        )
        worded = word(said, rule)
        _, default_body = validator_text(said.facts)
        assert worded.body == (
            "Our mainnet validator stopped voting\n\n"
            f"{default_body}\n\n"
            "Runbook: https://wiki.example/runbooks/delinquent"
        ), reason
    # A rule's own body template is framed too, and the facts name both for templates.
    templated_rule = rule.model_copy(update={"body": "{{ summary }} / {{ runbook }}"})
    said = make_alert(
        rule, subject=VOTE, reason="firing", dedup_key="k", facts=validator_facts("firing")
    )
    assert word(said, templated_rule).body.splitlines() == [
        "Our mainnet validator stopped voting",
        "",
        "Our mainnet validator stopped voting / https://wiki.example/runbooks/delinquent",
        "",
        "Runbook: https://wiki.example/runbooks/delinquent",
    ]


def test_pacing_notes_go_before_the_runbook() -> None:
    facts = {"runbook": "see wiki"}
    body = framed("text", facts)
    assert with_notes(body, facts, ["note"]) == "text\n\nnote\n\nRunbook: see wiki"
    assert with_notes("text", {}, ["note"]) == "text\n\nnote"
