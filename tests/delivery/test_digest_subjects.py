"""Every digest names its subjects (the accounts, mints, validators... its alerts are about),
the way a lone alert does: in full, or shortened with the explorer link carrying it in full,
with its address-book label; the first ``DIGEST_ITEMS`` of them, then "... and N more".

Alerts come from each event kind's own samples (its real step), worded as the daemon words
them, for rules watching made-up keys."""

from __future__ import annotations

import re
from typing import Any

import pytest

from watcher.alerting.formatting import Presentation
from watcher.config.rule_models import EventRule
from watcher.core.events import AlertMessage
from watcher.core.outbox_rows import DeliveryRow
from watcher.delivery.apprise_adapter import to_markdown
from watcher.delivery.digest import DIGEST_ITEMS, digest_text, words_of
from watcher.kinds import KINDS, RULE_MODELS, word
from watcher.kinds.toolkit.alert_samples import sample_key
from watcher.state.interface import StepToCommit
from watcher.state.store import SqliteStore
from watcher.testing.receivers import JsonReceiver, SmtpReceiver

from support.sending import make_sender
from support.values import FakeClock

# A rule of each event kind watching ``key`` (the subject of its alerts).
FIELDS: dict[str, Any] = {
    "new_transactions": lambda key: {"addresses": [key]},
    "holder_changes": lambda key: {"mints": [key]},
    "supply_changed": lambda key: {"mints": [key]},
    "token_accounts": lambda key: {"owners": [key]},
    "new_assets": lambda key: {"collection": key},
    "program_accounts": lambda key: {"program": key},
    "nonce_accounts": lambda key: {"authorities": [key]},
    "token_authorities": lambda key: {"mints": [key]},
    "upgrade_authority": lambda key: {"programs": [key]},
    "multisig_changed": lambda key: {"multisigs": [key]},
    "asset_changed": lambda key: {"assets": [key]},
    "stake_changed": lambda key: {"validators": [key]},
    "commission_changed": lambda key: {"validators": [key]},
    "account_changed": lambda key: {"accounts": [key]},
    "new_editions": lambda key: {"mints": [key]},
}
EVENT_KINDS = sorted(name for name, kind in KINDS.items() if issubclass(kind.model, EventRule))
KEYS = [sample_key(f"digest subject {n}") for n in range(DIGEST_ITEMS + 2)]
EXPLORER = "https://x.example/{kind}/{id}"


def test_every_event_kind_is_covered_here_and_has_digest_words() -> None:
    assert sorted(FIELDS) == EVENT_KINDS
    assert [name for name in EVENT_KINDS if KINDS[name].digest is None] == []


def event_of(kind: str, key: str, shown: Presentation) -> AlertMessage:
    rule = RULE_MODELS[kind].model_validate(
        {"name": "watch", "kind": kind, "notify": ["ops"], **FIELDS[kind](key)}
    )
    samples = KINDS[kind].samples
    assert samples is not None
    said = next(alert for alert in samples(rule) if alert.reason == "event")
    assert said.subject == key
    return word(said, rule, shown)


def digest_of(kind: str, keys: list[str], shown: Presentation) -> tuple[str, str]:
    rows = [
        DeliveryRow(
            id=n,
            alert_id=n,
            channel="ops",
            url_id="u",
            status="sending",
            attempts=0,
            next_attempt_at=0.0,
            created_at=float(n),
            alert=event_of(kind, key, shown),
            group_key="watch|k",
        )
        for n, key in enumerate(keys, start=1)
    ]
    return digest_text(rows, shown=shown)


def noun(kind: str) -> str:
    """What the digest calls a subject: the kind's word, or (a query) what it is."""
    if kind == "new_assets":
        return "Collection"
    said = words_of(kind).subject[0]
    return said[:1].upper() + said[1:]


@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_a_digest_names_each_subject_in_full(kind: str) -> None:
    title, body = digest_of(kind, KEYS[:2], Presentation())
    assert title.startswith("[WARNING] watch: ")
    assert title.endswith(f"(2 {words_of(kind).subject[1]})")
    for key in KEYS[:2]:
        assert f"  - {noun(kind)}: {key}" in body.splitlines()
    assert "... and" not in body


@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_a_digest_names_each_subject_with_its_label_and_explorer_link(kind: str) -> None:
    shown = Presentation(labels={KEYS[0]: "treasury"}, explorer_url=EXPLORER)
    _, body = digest_of(kind, KEYS[:2], shown)
    lines = body.splitlines()
    for key, label in ((KEYS[0], " (treasury)"), (KEYS[1], "")):
        listed = f"{key[:8]}…{key[-8:]}"
        at = lines.index(f"  - {noun(kind)}: {listed}{label}")
        assert lines[at + 1] == f"    https://x.example/address/{key}"
        # Channels that render Markdown (Slack, Telegram, Discord; email, as HTML) get the
        # listed key as the link.
        assert f"{noun(kind)}: [{listed}](https://x.example/address/{key}){label}" in to_markdown(
            body
        )


@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_a_digest_names_its_first_subjects_then_counts_the_rest(kind: str) -> None:
    _, body = digest_of(kind, KEYS, Presentation())
    subjects = [line for line in body.splitlines() if line.startswith(f"  - {noun(kind)}: ")]
    assert subjects == [f"  - {noun(kind)}: {key}" for key in KEYS[:DIGEST_ITEMS]]
    assert all(key not in body for key in KEYS[DIGEST_ITEMS:])
    more = re.fullmatch(r"\.\.\. and (\d+) more", body.splitlines()[-1])
    assert more is not None, body
    if words_of(kind).names is None:  # the alerts past the cap
        assert int(more.group(1)) == len(KEYS) - DIGEST_ITEMS


def test_a_validator_is_labelled_by_its_identity_as_in_its_lone_alert() -> None:
    node = event_of("stake_changed", KEYS[0], Presentation()).facts["node_pubkey"]
    shown = Presentation(labels={node: "my validator"})
    alert = event_of("stake_changed", KEYS[0], shown)
    assert "(my validator)" in alert.title
    _, body = digest_of("stake_changed", KEYS[:2], shown)
    assert f"  - Validator: {KEYS[0]} (my validator)" in body.splitlines()


async def test_a_digest_names_its_accounts_in_every_channel_format(
    tmp_store: SqliteStore, json_receiver: JsonReceiver, smtp_receiver: SmtpReceiver
) -> None:
    """Through the real sender: a webhook gets the plain text, email the HTML Apprise makes of
    its Markdown, each account linked in full and labelled."""
    clock = FakeClock()
    shown = Presentation(labels={KEYS[0]: "treasury"}, explorer_url=EXPLORER)
    urls = [json_receiver.url, smtp_receiver.url()]
    sender = make_sender(tmp_store, {"ops": urls}, clock, presentation=shown)
    alerts = [event_of("account_changed", key, shown) for key in KEYS[:2]]
    tmp_store.commit_step(
        StepToCommit.of("accounts", "t", {}, alerts, sender.destinations, clock())
    )
    clock.advance(2)  # group_wait
    assert await sender.send_due() == 4  # two alerts, two URLs: one message each

    [post] = json_receiver.received
    assert post["title"] == "[WARNING] watch: 2 account changes (2 accounts)"
    plain = post["message"].splitlines()
    for key, label in ((KEYS[0], " (treasury)"), (KEYS[1], "")):
        at = plain.index(f"  - Account: {key[:8]}…{key[-8:]}{label}")
        assert plain[at + 1] == f"    https://x.example/address/{key}"

    [email] = smtp_receiver.messages
    assert email["Subject"] == post["title"]
    html = email.get_body(("html",))
    assert html is not None
    text = html.get_content()
    for key, label in ((KEYS[0], " (treasury)"), (KEYS[1], "")):
        link = f'<a href="https://x.example/address/{key}">{key[:8]}…{key[-8:]}</a>{label}'
        assert f"Account: {link}" in text


@pytest.mark.parametrize(
    ("query", "said", "link"),
    [
        ({"creator": KEYS[0]}, f"  - Creator: {KEYS[0][:8]}…{KEYS[0][-8:]}", True),
        # Search criteria are no address: in full, without a link.
        (
            {"search": {"ownerAddress": KEYS[0]}},
            f'  - Search: {{"ownerAddress":"{KEYS[0]}"}}',
            False,
        ),
    ],
)
def test_a_digest_of_new_assets_names_its_creator_or_search(
    query: dict[str, Any], said: str, link: bool
) -> None:
    rule = RULE_MODELS["new_assets"].model_validate(
        {"name": "watch", "kind": "new_assets", "notify": ["ops"], **query}
    )
    samples = KINDS["new_assets"].samples
    assert samples is not None
    rows = [
        DeliveryRow(
            id=n,
            alert_id=n,
            channel="ops",
            url_id="u",
            status="sending",
            attempts=0,
            next_attempt_at=0.0,
            created_at=float(n),
            alert=word(samples(rule)[0], rule),
            group_key="watch|k",
        )
        for n in (1, 2)
    ]
    _, body = digest_text(rows, shown=Presentation(explorer_url=EXPLORER))
    lines = body.splitlines()
    assert lines.count(said) == 2
    assert (f"    https://x.example/address/{KEYS[0]}" in lines) is link
