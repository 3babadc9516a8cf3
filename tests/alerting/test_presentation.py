"""How keys are shown in notifications: the address book (labels), explorer links, and the
length limits of the services a message goes to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from watcher.alerting.formatting import PLAIN, Presentation, shorten
from watcher.config.rule_models import RuleBase
from watcher.core.events import AlertMessage
from watcher.delivery.apprise_adapter import MAX_MESSAGE_CHARS, TRUNCATED
from watcher.delivery.channels import Channels
from watcher.delivery.outbox_sender import Sender
from watcher.kinds import KINDS, RULE_MODELS, SOURCES, word
from watcher.kinds.delinquent_validators import cluster_stake_text, validator_text
from watcher.kinds.holder_changes import HoldersObservation
from watcher.kinds.new_transactions import SignaturesObservation
from watcher.kinds.version_drift import ClusterObservation
from watcher.ledger.models import TokenAmount, VoteAccount, VoteAccounts
from watcher.state.interface import StepToCommit
from watcher.state.store import AsyncSqliteStore, SqliteStore
from watcher.testing.receivers import JsonReceiver

from support.values import entry, key

ADDRESS, MINT = key("p-address"), key("p-mint")
VOTE, NODE = key("p-vote"), key("p-node")
HOLDER = key("p-holder")
LINKS = "https://explorer.solana.com/{kind}/{id}"
SHOWN = Presentation({VOTE: "my validator", ADDRESS: "treasury"}, LINKS)


def rule(kind: str, watched: str, **fields: Any) -> RuleBase:
    key_of = {"new_transactions": "addresses", "holder_changes": "mints"}
    return RULE_MODELS[kind].model_validate(
        {"name": "r", "kind": kind, key_of.get(kind, "validators"): [watched], **fields}
    )


def votes(*, delinquent: bool) -> VoteAccounts:
    account = VoteAccount.model_validate(
        {"votePubkey": VOTE, "nodePubkey": NODE, "activatedStake": 10, "lastVote": 7}
    )
    return VoteAccounts(
        current=[] if delinquent else [account], delinquent=[account] if delinquent else []
    )


def one_alert_of_each_kind() -> list[tuple[RuleBase, AlertMessage]]:
    """What each source's step says on a change: facts, not worded yet."""
    cases: list[tuple[RuleBase, str, Sequence[Any]]] = [
        (
            rule("new_transactions", ADDRESS),
            ADDRESS,
            [
                SignaturesObservation(((entry("old", 10),),), baseline=True),
                SignaturesObservation(((entry("new", 11), entry("old", 10)),), baseline=False),
            ],
        ),
        (
            rule("holder_changes", MINT),
            MINT,
            [
                HoldersObservation((TokenAmount(address=HOLDER, amount=100, decimals=2),)),
                HoldersObservation((TokenAmount(address=HOLDER, amount=900, decimals=2),)),
            ],
        ),
        (rule("delinquent_validators", VOTE), "cluster", [votes(delinquent=True)]),
        (rule("version_drift", NODE), "cluster", [ClusterObservation((), votes(delinquent=False))]),
    ]
    alerts = []
    for watching, target, observations in cases:
        source = SOURCES[KINDS[watching.kind].source.name]
        state = None
        for now, observation in enumerate(observations):
            outcome = source.step([watching], target, state, observation, float(now))
            state = outcome.state
        [alert] = outcome.alerts
        alerts.append((watching, alert))
    return alerts


@pytest.mark.parametrize("case", one_alert_of_each_kind(), ids=lambda case: case[0].kind)
def test_a_step_says_facts_and_they_are_worded_once_by_the_kind(
    case: tuple[RuleBase, AlertMessage],
) -> None:
    """Steps word nothing; ``word`` words each alert once, from its facts, with its kind's
    default wording (PLAIN: no labels, no links)."""
    watching, alert = case
    assert (alert.title, alert.body) == ("", "")
    worded = word(alert, watching, PLAIN)
    assert (worded.title, worded.body) == KINDS[watching.kind].wording(alert.facts, PLAIN)
    assert worded.title.startswith("[WARNING] r: ")
    assert replace(worded, title="", body="") == alert


@pytest.mark.parametrize("case", one_alert_of_each_kind(), ids=lambda case: case[0].kind)
def test_every_kind_links_the_keys_it_names(case: tuple[RuleBase, AlertMessage]) -> None:
    watching, alert = case
    shown = word(alert, watching, SHOWN)
    assert shown.facts == alert.facts and shown.dedup_key == alert.dedup_key
    links = [line for line in shown.body.splitlines() if line.startswith("  https://")]
    assert links, shown.body
    for line in links:
        assert line.startswith(
            ("  https://explorer.solana.com/tx/", "  https://explorer.solana.com/address/")
        )


def test_a_label_shows_next_to_the_key_in_titles_and_bodies() -> None:
    [(watching, alert)] = [c for c in one_alert_of_each_kind() if c[0].kind == "new_transactions"]
    shown = word(alert, watching, SHOWN)
    assert shown.title == f"[WARNING] r: 1 new transaction on {shorten(ADDRESS)} (treasury)"
    lines = shown.body.splitlines()
    assert lines[1:3] == [
        f"Address: {ADDRESS} (treasury)",
        f"  https://explorer.solana.com/address/{ADDRESS}",
    ]
    signature = entry("new", 11).signature
    # Listed shortened (first and last 8), its link right under it carrying it in full.
    at = next(i for i, line in enumerate(lines) if line.startswith("- "))
    assert lines[at].startswith(f"- {signature[:8]}…{signature[-8:]}  slot 11")
    assert lines[at + 1] == f"  https://explorer.solana.com/tx/{signature}"


def test_a_validator_is_named_by_the_label_of_its_vote_account_or_its_identity() -> None:
    facts = {
        "rule": "r",
        "severity": "critical",
        "subject": NODE,
        "reason": "firing",
        "status": "delinquent",
        "vote_pubkey": VOTE,
        "node_pubkey": NODE,
    }
    title, body = validator_text(facts, SHOWN)
    assert title == f"[CRITICAL] r: validator {shorten(NODE)} (my validator) delinquent"
    assert f"Validator: {NODE} (my validator)" in body
    assert f"Vote account: {VOTE} (my validator)" in body
    assert f"Identity: {NODE}\n" in body  # the identity itself has no label


def test_no_explorer_url_means_no_links() -> None:
    [(watching, alert)] = [c for c in one_alert_of_each_kind() if c[0].kind == "holder_changes"]
    shown = word(alert, watching, Presentation({HOLDER: "exchange"}, None))
    assert "https://" not in shown.body
    assert f"{HOLDER} (exchange)" in shown.body


def test_templates_can_name_and_link_keys() -> None:
    templated = rule(
        "new_transactions",
        ADDRESS,
        title="{{ address | named }}",
        body="{{ address | explorer }} {{ signatures[0].signature | explorer('tx') }}",
    )
    [(_, alert)] = [c for c in one_alert_of_each_kind() if c[0].kind == "new_transactions"]
    shown = word(alert, templated, SHOWN)
    signature = entry("new", 11).signature
    assert shown.title == f"{ADDRESS} (treasury)"
    assert shown.body == (
        f"https://explorer.solana.com/address/{ADDRESS} https://explorer.solana.com/tx/{signature}"
    )
    plain = word(alert, templated, PLAIN)
    assert plain.title == ADDRESS and plain.body == " "


def test_the_cluster_alert_names_the_largest_delinquents_with_their_labels() -> None:
    facts = {
        "rule": "cluster_delinquent_stake",
        "severity": "critical",
        "subject": "cluster",
        "reason": "firing",
        "built_in": True,
        "delinquent_pct": 23.456,
        "threshold_pct": 10.0,
        "delinquent_stake": 3 * 10**15,
        "total_stake": 13 * 10**15,
        "delinquent_count": 4,
        "total_count": 40,
        "largest": [{"vote_pubkey": VOTE, "node_pubkey": NODE, "activated_stake": 10**15}],
    }
    title, body = cluster_stake_text(facts, SHOWN)
    assert (
        title == "[CRITICAL] cluster_delinquent_stake: 23.5% of the activated stake is delinquent"
    )
    assert "Rule: cluster_delinquent_stake (built in, severity critical)" in body
    assert "Delinquent: 3,000,000 SOL of 13,000,000 SOL; 4 of 40 vote accounts" in body
    assert f"- {VOTE} (my validator)  1,000,000 SOL, identity {NODE}" in body
    assert f"  https://explorer.solana.com/address/{VOTE}" in body


async def test_the_sender_fits_a_message_to_the_service_limit(
    tmp_store: SqliteStore, json_receiver: JsonReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(MAX_MESSAGE_CHARS, "json", 300)  # as Telegram's 4096, smaller
    sender = Sender(
        AsyncSqliteStore(tmp_store), Channels.of({"ops": [json_receiver.url]}), clock=lambda: 1000.0
    )
    long = AlertMessage(
        rule="r",
        severity="info",
        subject="s",
        reason="event",
        dedup_key="k",
        title="a long one",
        body="line\n" * 500,
        channels=("ops",),
    )
    tmp_store.commit_step(
        StepToCommit.of("signatures", "s", {}, [long], sender.destinations, 1000.0)
    )
    assert await sender.send_due() == 1
    [post] = json_receiver.received
    assert post["title"] == "a long one"
    assert post["message"].endswith(TRUNCATED.strip())
    assert len(post["title"]) + 1 + len(post["message"]) <= 300
