"""Digests: event alerts of one rule gathered per destination, at the pace their rule allows.

Alerts are made the way the sources make them (``make_alert`` from a real rule), queued in the
real SQLite outbox and sent by the real Sender to a real local JSON receiver; only the clock is
injected. The last test runs the real daemon against the simulator.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watcher.alerting.formatting import Presentation
from watcher.alerting.messages import make_alert, word_alert
from watcher.core.events import AlertMessage, Grouping
from watcher.core.outbox_rows import DeliveryRow, url_id
from watcher.delivery.digest import (
    DEAD_LETTER_GROUPING,
    batches,
    digest_text,
    pacing_notes,
    release_at,
)
from watcher.delivery.outbox_sender import Sender
from watcher.kinds import word
from watcher.kinds.delinquent_validators import DelinquentValidatorsRule
from watcher.kinds.new_transactions import NewTransactionsRule
from watcher.simulator.keys import derived_pubkey
from watcher.state.database import MIGRATIONS, migrate, open_database
from watcher.state.interface import StepToCommit
from watcher.state.store import SqliteStore
from watcher.testing.receivers import JsonReceiver, wait_until

from support.sending import alert_history as history
from support.sending import make_sender, titles
from support.values import FakeClock
from support.world import World, make_world, small_cluster

ADDRESSES = [derived_pubkey(f"digest address {i}") for i in range(50)]
VOTE = derived_pubkey("digest vote")


def tx_rule(name: str = "treasury", **keys: Any) -> NewTransactionsRule:
    return NewTransactionsRule.model_validate(
        {"name": name, "addresses": ADDRESSES, "notify": ["ops"], **keys}
    )


def tx_alert(
    rule: NewTransactionsRule, address: str, first_sig: int, count: int = 1
) -> AlertMessage:
    """What the signatures source says about ``count`` new transactions on ``address``."""
    signatures = [
        {
            "signature": f"sig{first_sig + i}",
            "slot": 100 + first_sig + i,
            "failed": False,
            "err": None,
            "memo": None,
            "block_time": None,
        }
        for i in range(count)
    ]
    facts = {
        "address": address,
        "count": count,
        "failed": 0,
        "newest_slot": 100 + first_sig,
        "newest_signature": f"sig{first_sig}",
        "signatures": signatures,
        "more": 0,
    }
    said = make_alert(
        rule,
        subject=address,
        reason="event",
        dedup_key=f"{rule.name}|{address}|sig{first_sig}|event",
        facts=facts,
    )
    return word(said, rule)


def firing_alert(key: str) -> AlertMessage:
    rule = DelinquentValidatorsRule(
        name="my-validator", validators=(VOTE,), notify=("ops",), severity="critical"
    )
    said = make_alert(
        rule,
        subject=VOTE,
        reason="firing",
        dedup_key=f"my-validator|{VOTE}|{key}|firing",
        facts={"key": key},
    )
    return word_alert(
        said,
        rule,
        lambda facts, shown: (f"[CRITICAL] my-validator: delinquent {facts['key']}", "b"),
    )


class Outbox:
    """A store, a sender with a fake clock, and a real receiver behind channel ``ops``."""

    def __init__(self, path: Path, receiver: JsonReceiver, **sender: Any) -> None:
        self.path = path
        self.receiver = receiver
        self.clock = FakeClock()
        self.sender_options = sender
        self.store = SqliteStore(path)
        self.sender = self._sender()

    def _sender(self) -> Sender:
        return make_sender(
            self.store, {"ops": [self.receiver.url]}, self.clock, **self.sender_options
        )

    def restart(self) -> None:
        self.store.close()
        self.store = SqliteStore(self.path)
        self.sender = self._sender()

    def queue(self, *alerts: AlertMessage) -> None:
        destinations = self.sender.destinations
        self.store.commit_step(
            StepToCommit.of("signatures", "t", {}, alerts, destinations, self.clock())
        )

    async def at(self, seconds: float) -> list[str]:
        """Advance to ``seconds`` after the start, run one pass; the titles received so far."""
        self.clock.now = 1_000_000.0 + seconds
        await self.sender.send_due()
        return titles(self.receiver.received)


@pytest.fixture
def outbox(tmp_path: Path, json_receiver: JsonReceiver) -> Iterator[Outbox]:
    box = Outbox(tmp_path / "state" / "watcher.db", json_receiver)
    yield box
    box.store.close()


def counted(title: str) -> int:
    """The number of transactions a title announces (a digest's or a lone alert's)."""
    match = re.search(r"(\d+) new transactions?", title)
    assert match, title
    return int(match.group(1))


def statuses(store: SqliteStore) -> dict[str, int]:
    found: dict[str, int] = {}
    for record in history(store):
        for delivery in record.deliveries:
            found[delivery.status] = found.get(delivery.status, 0) + 1
    return found


# -- grouping through the real sender ---------------------------------------------------------


async def test_200_events_on_50_addresses_within_group_wait_are_one_digest(outbox: Outbox) -> None:
    rule = tx_rule(group_wait="2s")
    for round_no in range(4):  # four polls, 0.5 s apart, each finding 50 addresses busy
        outbox.clock.now = 1_000_000.0 + round_no * 0.5
        outbox.queue(*(tx_alert(rule, a, 1000 * round_no + i) for i, a in enumerate(ADDRESSES)))
        assert await outbox.at(round_no * 0.5) == []  # still within group_wait

    assert await outbox.at(1.9) == []
    [title] = await outbox.at(2.0)
    assert title == "[WARNING] treasury: 200 new transactions (50 addresses)"
    [post] = outbox.receiver.received
    body = post["message"]
    assert "200 new transactions in 200 notifications on 50 addresses" in body
    listed = [line for line in body.splitlines() if line.startswith("- ")]
    # Each alert by its title, its address and its signatures under it, for the first 10
    # alerts; then how many transactions more.
    lines = body.splitlines()
    at = lines.index(f"- 1 new transaction on {ADDRESSES[0][:4]}…{ADDRESSES[0][-4:]}")
    assert lines[at + 1 : at + 3] == [f"  - Address: {ADDRESSES[0]}", "  - sig0, slot 100"]
    assert len(listed) == 10 and body.endswith("  - sig9, slot 109\n... and 190 more")
    assert statuses(outbox.store) == {"sent": 200}

    assert await outbox.at(3600) == [title]  # nothing is sent twice


async def test_a_lone_event_goes_out_as_it_is_after_group_wait(outbox: Outbox) -> None:
    alert = tx_alert(tx_rule(group_wait="2s"), ADDRESSES[0], 1, count=3)
    outbox.queue(alert)
    assert await outbox.at(1.5) == []
    assert await outbox.at(2.0) == [alert.title]
    [post] = outbox.receiver.received
    assert post["message"] == alert.body  # no digest wrapper
    assert "3 new transactions" in alert.title


async def test_a_busy_rule_sends_at_most_once_per_group_interval(outbox: Outbox) -> None:
    rule = tx_rule(group_wait="2s", group_interval="1m")
    outbox.queue(tx_alert(rule, ADDRESSES[0], 1), tx_alert(rule, ADDRESSES[1], 2))
    assert await outbox.at(2) == ["[WARNING] treasury: 2 new transactions (2 addresses)"]
    for second, address in ((10, 2), (30, 3), (50, 2)):
        outbox.clock.now = 1_000_000.0 + second
        outbox.queue(tx_alert(rule, ADDRESSES[address], second))
        assert len(await outbox.at(second + 5)) == 1  # held: 1 min after the last message
    assert await outbox.at(61.9) == titles(outbox.receiver.received[:1])
    sent = await outbox.at(62)
    assert sent[1] == "[WARNING] treasury: 3 new transactions (2 addresses)"

    outbox.clock.now = 1_000_000.0 + 500  # quiet for long: the next event waits group_wait only
    outbox.queue(tx_alert(rule, ADDRESSES[4], 500))
    assert len(await outbox.at(501)) == 2
    assert counted((await outbox.at(502))[-1]) == 1
    assert sum(counted(t) for t in titles(outbox.receiver.received)) == 6


async def test_events_of_two_rules_are_never_mixed(outbox: Outbox) -> None:
    treasury, hot = tx_rule(group_wait="2s"), tx_rule("hot-wallets", group_wait="2s")
    outbox.queue(
        *(tx_alert(treasury, a, i) for i, a in enumerate(ADDRESSES[:5])),
        *(tx_alert(hot, a, 100 + i, count=2) for i, a in enumerate(ADDRESSES[5:8])),
    )
    assert sorted(await outbox.at(2)) == [
        "[WARNING] hot-wallets: 6 new transactions (3 addresses)",
        "[WARNING] treasury: 5 new transactions (5 addresses)",
    ]


async def test_state_alerts_are_never_delayed_nor_held(outbox: Outbox) -> None:
    rule = tx_rule(group_wait="30s", group_interval="1h", max_per_hour=1)
    events = [tx_alert(rule, ADDRESSES[0], 1), tx_alert(rule, ADDRESSES[1], 2)]
    outbox.queue(events[0], firing_alert("1"), events[1])
    assert await outbox.at(0) == ["[CRITICAL] my-validator: delinquent 1"]
    outbox.queue(firing_alert("2"))
    assert await outbox.at(1) == [
        "[CRITICAL] my-validator: delinquent 1",
        "[CRITICAL] my-validator: delinquent 2",
    ]
    assert counted((await outbox.at(30))[-1]) == 2


async def test_max_per_hour_holds_the_rest_and_says_so(outbox: Outbox) -> None:
    rule = tx_rule(group_wait="0s", max_per_hour=2)
    for second in (0, 10):
        outbox.clock.now = 1_000_000.0 + second
        outbox.queue(tx_alert(rule, ADDRESSES[second // 10], second))
        await outbox.at(second)
    first, last_slot = outbox.receiver.received
    assert "max_per_hour" not in first["message"]
    assert "max_per_hour reached (2 messages in the last hour)" in last_slot["message"]
    assert "not before 1970-01-12T14:46:40Z" in last_slot["message"]  # an hour after the first

    for second in (20, 30, 40, 1800):
        outbox.clock.now = 1_000_000.0 + second
        outbox.queue(tx_alert(rule, ADDRESSES[second % 7], second, count=2))
        assert len(await outbox.at(second)) == 2  # held
    assert len(await outbox.at(3599)) == 2
    held = (await outbox.at(3600))[2]
    assert held == "[WARNING] treasury: 8 new transactions (4 addresses)"
    body = outbox.receiver.received[2]["message"]
    assert "Held back by max_per_hour (2)" in body
    assert "max_per_hour reached" in body  # the second hour's first slot is the 10 s one's
    assert statuses(outbox.store) == {"sent": 6}


async def test_a_refused_digest_is_retried_as_one_and_arrives_once(outbox: Outbox) -> None:
    rule = tx_rule(group_wait="2s")
    outbox.queue(*(tx_alert(rule, a, i) for i, a in enumerate(ADDRESSES[:5])))
    outbox.receiver.refuse(1)
    assert await outbox.at(2) == []
    [refused] = outbox.receiver.refused
    assert refused["title"] == "[WARNING] treasury: 5 new transactions (5 addresses)"
    assert statuses(outbox.store) == {"pending": 5}

    outbox.clock.now = 1_000_000.0 + 3
    outbox.queue(tx_alert(rule, ADDRESSES[9], 99))  # joins the retry rather than overtaking it
    assert await outbox.at(3.9) == [] and len(outbox.receiver.refused) == 1
    assert await outbox.at(4.0) == ["[WARNING] treasury: 6 new transactions (6 addresses)"]
    assert [(d.status, d.attempts) for r in history(outbox.store) for d in r.deliveries] == [
        ("sent", 2)
    ] * 5 + [("sent", 1)]
    assert len(await outbox.at(3600)) == 1


async def test_a_restarted_sender_keeps_the_groups_and_resends_nothing(outbox: Outbox) -> None:
    rule = tx_rule(group_wait="2s", group_interval="1m")
    outbox.queue(*(tx_alert(rule, a, i) for i, a in enumerate(ADDRESSES[:3])))
    assert await outbox.at(1) == []
    outbox.restart()  # held rows wait in the database
    assert await outbox.at(2) == ["[WARNING] treasury: 3 new transactions (3 addresses)"]

    outbox.clock.now = 1_000_000.0 + 10
    outbox.queue(tx_alert(rule, ADDRESSES[5], 10), tx_alert(rule, ADDRESSES[6], 11))
    assert len(await outbox.at(12)) == 1  # held by group_interval...
    outbox.restart()  # ...which the new sender still knows
    assert len(await outbox.at(61)) == 1
    assert (await outbox.at(62))[1] == "[WARNING] treasury: 2 new transactions (2 addresses)"
    outbox.restart()
    assert len(await outbox.at(3600)) == 2
    assert statuses(outbox.store) == {"sent": 5}


async def test_rows_queued_before_the_upgrade_still_go_out_alone(
    tmp_path: Path, json_receiver: JsonReceiver
) -> None:
    path = tmp_path / "state" / "watcher.db"
    old = open_database(path)
    migrate(old, MIGRATIONS[:-1])  # as the previous release left it, with a row waiting
    old.execute(
        """INSERT INTO alerts (id, created_at, rule, severity, subject, reason, dedup_key,
        title, body, facts, status) VALUES (1, 5.0, 'treasury', 'warning', 'a', 'event', 'k1',
        'old title', 'old body', '{}', 'queued')"""
    )
    old.execute(
        """INSERT INTO deliveries (alert_id, channel, url_id, status, attempts,
        next_attempt_at, created_at) VALUES (1, 'ops', ?, 'pending', 0, 5.0, 5.0)""",
        [url_id(json_receiver.url)],
    )
    old.close()
    box = Outbox(path, json_receiver)
    try:
        assert await box.at(0) == ["old title"]
        assert json_receiver.received[0]["message"] == "old body"
    finally:
        box.store.close()


# -- the pure parts -----------------------------------------------------------------------------


def test_release_at_combines_wait_interval_and_the_hourly_cap() -> None:
    grouping = Grouping("new_transactions", wait=5, interval=60, max_per_hour=3)
    assert release_at(grouping, first_queued=100, sent=()) == 105
    assert release_at(grouping, first_queued=100, sent=(90,)) == 150
    assert release_at(grouping, first_queued=500, sent=(90,)) == 505
    assert release_at(grouping, first_queued=500, sent=(10, 200, 300)) == 3610
    assert release_at(grouping, first_queued=5000, sent=(10, 200, 300)) == 5005


def test_pacing_notes_only_with_a_cap() -> None:
    assert pacing_notes(Grouping("x", wait=2), 0, (1, 2, 3), now=10) == []
    capped = Grouping("x", max_per_hour=2)
    assert pacing_notes(capped, first_queued=5, sent=(), now=5) == []
    [reached] = pacing_notes(capped, first_queued=5, sent=(1,), now=5)
    assert reached.startswith("max_per_hour reached (2 messages in the last hour)")
    held, _ = pacing_notes(capped, first_queued=5, sent=(1, 2), now=3601)
    assert held.startswith("Held back by max_per_hour (2): gathered since")


def row(id_: int, url_id: str = "u1", group: str | None = "r|k", **changes: Any) -> DeliveryRow:
    alert: dict[str, Any] = {
        "rule": "r",
        "severity": "warning",
        "reason": "event",
        "title": f"[WARNING] r: item {id_}",
        "body": "b",
        "subject": f"s{id_ % 3}",
        "dedup_key": "",
        "channels": (),
        "grouping": Grouping("x") if group else None,
    }
    alert.update((key, value) for key, value in changes.items() if key in alert or key == "facts")
    values: dict[str, Any] = {
        "id": id_,
        "alert_id": id_,
        "channel": "ops",
        "url_id": url_id,
        "status": "sending",
        "attempts": 0,
        "next_attempt_at": 0.0,
        "created_at": float(id_),
        "group_key": group,
    }
    values.update((key, value) for key, value in changes.items() if key in values)
    return DeliveryRow(**values, alert=AlertMessage(**alert))


def test_batches_keep_each_group_together_in_order_of_its_first_row() -> None:
    rows = [row(1), row(2, group=None), row(3, url_id="u2"), row(4), row(5, group="other|k")]
    assert [[r.id for r in message] for message in batches(rows)] == [[1, 4], [2], [3], [5]]


def test_a_digest_of_an_unknown_kind_counts_events_and_lists_ten() -> None:
    rows = [row(i) for i in range(1, 13)]
    rows[6] = row(7, severity="critical", title="[CRITICAL] r: item 7")  # the rule was edited
    title, body = digest_text(rows)
    assert title == "[CRITICAL] r: 12 events (3 subjects)"
    assert "Rule: r (severity critical)\n12 events in 12 notifications on 3 subjects" in body
    assert "\n- item 1\n  - Subject: s1\n" in body and "\n- item 7\n" in body
    assert body.endswith("- item 10\n  - Subject: s1\n... and 2 more")


def signature(n: int) -> str:
    return derived_pubkey(f"digest signature {n}") * 2  # 88 characters, like a signature


def tx_row(
    id_: int, rule: NewTransactionsRule, address: str, sigs: list[str], more: int = 0
) -> DeliveryRow:
    said = make_alert(
        rule,
        subject=address,
        reason="event",
        dedup_key=f"k{id_}",
        facts={
            "address": address,
            "count": len(sigs) + more,
            "failed": 0,
            "newest_slot": 7,
            "more": more,
            "signatures": [
                {"signature": sig, "slot": 7, "failed": False, "memo": None, "block_time": None}
                for sig in sigs
            ],
        },
    )
    title = word(said, rule).title
    return row(
        id_, rule=rule.name, facts=said.facts, grouping=said.grouping, subject=address, title=title
    )


EXPLORER = Presentation(
    labels={ADDRESSES[1]: "hot wallet"}, explorer_url="https://x.example/{kind}/{id}"
)


def test_a_digest_names_every_address_and_signature_shortened_with_its_full_link() -> None:
    rule = tx_rule()
    rows = [
        tx_row(1, rule, ADDRESSES[0], [signature(1)]),
        tx_row(2, rule, ADDRESSES[1], [signature(2), signature(3)]),
    ]
    title, body = digest_text(rows, shown=EXPLORER)
    assert title == "[WARNING] treasury: 3 new transactions (2 addresses)"
    short0, short1 = (f"{a[:4]}…{a[-4:]}" for a in ADDRESSES[:2])
    listed0, listed1 = (f"{a[:8]}…{a[-8:]}" for a in ADDRESSES[:2])
    assert body.splitlines()[3:] == [
        f"- 1 new transaction on {short0}",
        f"  - Address: {listed0}",
        f"    https://x.example/address/{ADDRESSES[0]}",
        f"  - {signature(1)[:8]}…{signature(1)[-8:]}, slot 7",
        f"    https://x.example/tx/{signature(1)}",
        f"- 2 new transactions on {short1}",
        f"  - Address: {listed1} (hot wallet)",
        f"    https://x.example/address/{ADDRESSES[1]}",
        f"  - {signature(2)[:8]}…{signature(2)[-8:]}, slot 7",
        f"    https://x.example/tx/{signature(2)}",
        f"  - {signature(3)[:8]}…{signature(3)[-8:]}, slot 7",
        f"    https://x.example/tx/{signature(3)}",
    ]
    # Without explorer links a key is named in full: nothing else would carry it.
    _, plain = digest_text(rows)
    assert f"  - {signature(1)}, slot 7" in plain.splitlines()
    assert f"  - Address: {ADDRESSES[0]}" in plain.splitlines()


def test_a_digest_names_up_to_20_signatures_then_counts_the_rest() -> None:
    rule = tx_rule()
    rows = [
        tx_row(1, rule, ADDRESSES[0], [signature(i) for i in range(10)], more=15),
        tx_row(2, rule, ADDRESSES[1], [signature(i) for i in range(10, 20)]),
        tx_row(3, rule, ADDRESSES[2], [signature(20), signature(21)]),
    ]
    title, body = digest_text(rows, shown=EXPLORER)
    assert title == "[WARNING] treasury: 37 new transactions (3 addresses)"
    named = [line for line in body.splitlines() if line.startswith("  - ") and ": " not in line]
    assert [line[4:21] for line in named] == [
        f"{signature(i)[:8]}…{signature(i)[-8:]}" for i in range(20)
    ]
    assert f"on {ADDRESSES[2][:4]}" not in body  # past the cap: counted, not listed
    assert body.endswith(f"    https://x.example/tx/{signature(19)}\n... and 17 more")


def test_summary_and_runbook_frame_a_digest() -> None:
    rule = tx_rule(summary="Deposits to the hot wallets", runbook="https://wiki.example/deposits")
    rows = [tx_row(1, rule, ADDRESSES[0], ["s1"]), tx_row(2, rule, ADDRESSES[1], ["s2"])]
    _, body = digest_text(rows, ["Held back by max_per_hour (2): gathered since x."])
    assert body.splitlines() == [
        "Deposits to the hot wallets",
        "",
        "Rule: treasury (severity warning)",
        "2 new transactions in 2 notifications on 2 addresses, queued from "
        "1970-01-01T00:00:01Z to 1970-01-01T00:00:02Z.",
        "Held back by max_per_hour (2): gathered since x.",
        "",
        f"- 1 new transaction on {ADDRESSES[0][:4]}…{ADDRESSES[0][-4:]}",
        f"  - Address: {ADDRESSES[0]}",
        "  - s1, slot 7",
        f"- 1 new transaction on {ADDRESSES[1][:4]}…{ADDRESSES[1][-4:]}",
        f"  - Address: {ADDRESSES[1]}",
        "  - s2, slot 7",
        "",
        "Runbook: https://wiki.example/deposits",
    ]


def test_dead_letters_have_a_grouping_of_their_own() -> None:
    assert DEAD_LETTER_GROUPING.kind == "dead_letter" and DEAD_LETTER_GROUPING.wait > 0


# -- end to end -------------------------------------------------------------------------------


@pytest.fixture
def busy_world(tmp_path: Path) -> Iterator[World]:
    """The e2e world with one rule watching 50 addresses (default grouping)."""
    rule = {
        "name": "treasury",
        "kind": "new_transactions",
        "addresses": ADDRESSES,
        "every": "200ms",
        "notify": ["hooks"],
    }
    yield from make_world(tmp_path, small_cluster(), rules=[rule])


@pytest.mark.e2e  # starts `watcher run`
def test_200_transactions_on_50_addresses_are_a_handful_of_digests_each_one_counted(
    busy_world: World,
) -> None:
    world = busy_world
    world.daemon.start()
    world.wait_polls("getSignaturesForAddress", 2 * len(ADDRESSES))
    assert world.notes() == []
    added = [
        sig
        for _ in range(4)
        for address in ADDRESSES
        for sig in world.ledger.add_transactions(address, 1)
    ]

    def announced() -> int:
        return sum(counted(title) for title in world.titles())

    wait_until(lambda: announced() >= len(added), 20, f"200 announced: {world.titles()}")
    world.wait_polls("getSignaturesForAddress", 3 * len(ADDRESSES))
    assert announced() == len(added) == 200
    assert 1 <= len(world.notes()) <= 3, world.titles()
    digest = world.notes()[0]
    assert digest["title"].startswith("[WARNING] treasury: ")
    assert "... and " in digest["message"]
    assert world.daemon.stop() == 0
