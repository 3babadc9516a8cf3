"""A bad or doubtful answer is never evidence, never wedges an address, never mutes alerts.

The daemon's own poll (``TargetPipeline.poll``) against the real simulator on loopback, whose
answers a ``rewrite`` fault spoils one call at a time; state is a real SQLite file. What the
user sees is asserted: the alerts recorded for delivery (titles, bodies), and that later good
answers are still noticed.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from watcher.checks import check_config
from watcher.core.events import DOUBT_KEY
from watcher.kinds import RULE_MODELS, SOURCES
from watcher.kinds.holder_changes import HoldersObservation
from watcher.ledger.models import UNKNOWN_FIELDS_LOG, TokenAmount
from watcher.ledger.plausibility import SLOT_MARGIN, Doubt, SlotTip, judge
from watcher.state.interface import StepToCommit
from watcher.state.store import SqliteStore
from watcher.testing.daemon import write_config

from support.seeded import (
    FEATURE_SET,
    HOLDERS,
    MINT,
    OUR_NODE,
    OUR_VOTE,
    START,
    TREASURY,
    World,
    base_rules,
    daemon_worlds,
)


@pytest.fixture
async def make_world(tmp_path: Path) -> AsyncIterator[Callable[..., World]]:
    UNKNOWN_FIELDS_LOG.clear()  # the simulator's seeded keys come back in each test
    async with daemon_worlds(tmp_path) as make:
        yield make


def top_entry(mutate: Callable[[dict[str, Any]], None]) -> Callable[[Any], Any]:
    """A rewrite that adds a copy of the newest signature entry, changed by ``mutate``, on top."""

    def rewrite(result: list[dict[str, Any]]) -> list[dict[str, Any]]:
        forged = dict(result[0]) if result else {"signature": "x", "slot": 1, "err": None}
        forged["signature"] = "4" * 87  # base58, 64 bytes: a signature nobody made
        mutate(forged)
        return [forged, *result]

    return rewrite


# -- one odd entry never mutes its address ------------------------------------------------------

DAY = 86_400


@pytest.mark.parametrize(
    ("odd", "why"),
    [
        ({"blockTime": 1_790_000_000_000}, "blockTime in milliseconds (a node bug seen)"),
        ({"blockTime": -5}, "negative blockTime"),
        ({"blockTime": 2**64}, "blockTime beyond u64"),
        ({"blockTime": "yesterday"}, "blockTime not a number"),
        ({"blockTime": int(START) + 3 * DAY}, "blockTime three days ahead of the clock"),
        ({"memo": 42, "confirmationStatus": "rooted", "transactionIndex": -1}, "other fields"),
    ],
)
async def test_an_entry_field_out_of_range_is_unknown_not_the_address_muted(
    make_world: Callable[..., World], odd: dict[str, Any], why: str
) -> None:
    """The node shows one entry's field out of its range every time it lists it: the entry is
    notified with that field unknown, and so is every later transaction of the address."""
    world = make_world()
    await world.poll("signatures", TREASURY)  # the quiet baseline
    logs: list[Any] = []
    for _ in range(3):  # the same odd entry, poll after poll
        [sig] = world.ledger.add_transactions(TREASURY, 1, memo="x", odd=odd)
        with structlog.testing.capture_logs() as said:
            await world.poll("signatures", TREASURY)
            await world.poll("signatures", TREASURY)
        logs += said
        assert (await world.cursor()).sig == sig, why
        last = (await world.titles())[-1]
        assert last == f"[WARNING] treasury: 1 new transaction on {_short(TREASURY)}"
        shown = (await world.alerts())[-1].body
        assert sig in shown, why
        if "blockTime" in odd:
            assert "time unknown" in shown, why
    assert len(await world.alerts()) == 3
    warned = [e for e in logs if e["event"] == "field out of its range taken as unknown"]
    assert {(e["target"], e["field"]) for e in warned} == {(TREASURY, name) for name in odd}, why
    assert len(warned) == 3 * len(odd)  # one per entry and field, not per poll

    new = world.ledger.add_transactions(TREASURY, 2)  # and the address goes on
    await world.poll("signatures", TREASURY)
    last = (await world.titles())[-1]
    assert last == f"[WARNING] treasury: 2 new transactions on {_short(TREASURY)}"
    body = (await world.alerts())[-1].body
    assert all(signature in body for signature in new)


@pytest.mark.parametrize(
    ("odd", "why"),
    [
        ({"slot": 2**64}, "slot beyond u64"),
        ({"slot": 2**64 - 1}, "slot at u64 max: no real cluster is there"),
        ({"slot": -1}, "negative slot"),
        ({"signature": "0OIl" * 22}, "signature not base58"),
        ({"signature": None}, "no signature"),
    ],
)
async def test_an_entry_with_an_unreadable_identity_is_left_out_not_the_address_muted(
    make_world: Callable[..., World], odd: dict[str, Any], why: str
) -> None:
    """An entry whose signature or slot is unreadable, every time it is listed, cannot be
    ordered or linked: it is left out (logged once), and the transactions around it notified."""
    world = make_world()
    await world.poll("signatures", TREASURY)
    older = world.ledger.add_transactions(TREASURY, 1)
    world.ledger.add_transactions(TREASURY, 1, odd=odd)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            await world.poll("signatures", TREASURY)
    assert await world.titles() == [
        f"[WARNING] treasury: 1 new transaction on {_short(TREASURY)}"
    ], why
    assert older[0] in (await world.alerts())[0].body
    left_out = [e for e in logs if e["event"] == "entry left out: its identity is unreadable"]
    assert [(e["target"], e["field"]) for e in left_out] == [(TREASURY, next(iter(odd)))], why

    new = world.ledger.add_transactions(TREASURY, 2)
    await world.poll("signatures", TREASURY)
    last = (await world.titles())[-1]
    assert last == f"[WARNING] treasury: 2 new transactions on {_short(TREASURY)}"
    body = (await world.alerts())[-1].body
    assert all(signature in body for signature in new)
    assert (await world.cursor()).sig == new[0]


async def test_a_first_poll_on_an_unreadable_newest_entry_starts_from_the_readable_one(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    world.ledger.add_transactions(TREASURY, 1, odd={"slot": 2**64})
    for _ in range(3):  # the same unreadable entry 3 polls in a row is the ledger's own
        await world.poll("signatures", TREASURY)
    # The baseline: the newest readable entry (the history before it is not new).
    assert (await world.cursor()).sig is not None and await world.titles() == []
    new = world.ledger.add_transactions(TREASURY, 1)
    await world.poll("signatures", TREASURY)
    assert await world.titles() == [f"[WARNING] treasury: 1 new transaction on {_short(TREASURY)}"]
    assert (await world.cursor()).sig == new[0]


def _short(key: str) -> str:
    return f"{key[:4]}…{key[-4:]}"


# -- a failure wording one alert never stops the cursor or the other alerts ----------------------


async def test_a_template_failing_at_render_time_keeps_the_alert_and_the_cursor(
    make_world: Callable[..., World],
) -> None:
    broken = {
        "name": "broken",
        "kind": "new_transactions",
        "addresses": [TREASURY],
        "every": "1s",
        "notify": ["hooks"],
        "title": "{{ count + 'x' }} new",
    }
    world = make_world([base_rules()[0]], unchecked=[broken])  # check refuses it: see below
    await world.poll("signatures", TREASURY)
    new = world.ledger.add_transactions(TREASURY, 1)

    with structlog.testing.capture_logs() as logs:
        await world.poll("signatures", TREASURY)

    by_rule = {alert.rule: alert for alert in await world.alerts()}
    on = f"1 new transaction on {_short(TREASURY)}"
    assert by_rule["treasury"].title == f"[WARNING] treasury: {on}"
    assert by_rule["broken"].title == f"[WARNING] broken: {on}"
    assert new[0] in by_rule["broken"].body
    assert "(title template failed: TypeError: unsupported operand" in by_rule["broken"].body
    assert (await world.cursor()).sig == new[0]
    warnings = [e for e in logs if e["event"] == "alert worded with the default wording"]
    assert [w["rule"] for w in warnings] == ["broken"]

    # ... and it goes on: the next transaction is one more alert per rule.
    world.ledger.add_transactions(TREASURY, 1)
    await world.poll("signatures", TREASURY)
    assert sorted(alert.rule for alert in await world.alerts()) == ["broken"] * 2 + ["treasury"] * 2


# -- a holder change back to an earlier state is notified ---------------------------------------


async def test_a_balance_going_back_and_forth_is_notified_at_every_move(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    whale = HOLDERS[5]
    one = world.ledger.holder_amount(MINT, whale)
    await world.poll("holders", MINT)  # the quiet baseline
    for amount in (2 * one, one, 2 * one, one):
        world.ledger.set_holder_amount(MINT, whale, amount)
        await world.poll("holders", MINT)
    titles = await world.titles()
    assert titles == [f"[WARNING] whales: 1 top-holder change on {_short(MINT)}"] * 4
    assert ["(+100.00%)" in a.body for a in await world.alerts()] == [True, False, True, False]
    assert ["(-50.00%)" in a.body for a in await world.alerts()] == [False, True, False, True]


# -- well-formed but doubtful answers are not evidence until confirmed ---------------------------


def emptied(key: str) -> Callable[[Any], Any]:
    def rewrite(result: dict[str, Any]) -> dict[str, Any]:
        result[key] = []
        return result

    return rewrite


async def test_an_empty_holder_list_is_doubtful_until_seen_three_polls_in_a_row(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    await world.poll("holders", MINT)
    baseline = await world.state("holders", MINT)

    world.rewrite("getTokenLargestAccounts", emptied("value"), count=2)
    with structlog.testing.capture_logs() as logs:
        await world.poll("holders", MINT)
        await world.poll("holders", MINT)
    assert await world.titles() == []
    assert (await world.state("holders", MINT))["top"] == baseline["top"]
    said = [e for e in logs if e["log_level"] == "warning"]
    assert len(said) == 1 and "no holder at all" in said[0]["detail"]  # once per stretch

    # A good answer ends the stretch; the same empty answer starts counting again.
    await world.poll("holders", MINT)
    world.rewrite("getTokenLargestAccounts", emptied("value"), count=3)
    await world.poll("holders", MINT)
    await world.poll("holders", MINT)
    assert await world.titles() == []
    # Three in a row: a real mass change gets through, as one notification.
    await world.poll("holders", MINT)
    assert await world.titles() == [f"[WARNING] whales: 20 top-holder changes on {_short(MINT)}"]


async def test_a_holder_answer_older_in_slots_is_never_taken(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    await world.poll("holders", MINT)
    accepted_slot = (await world.state("holders", MINT))["slot"]
    whale = HOLDERS[3]
    world.ledger.set_holder_amount(MINT, whale, 1)  # a real change, seen first by a stale node

    def stale(result: dict[str, Any]) -> dict[str, Any]:
        result["context"]["slot"] = accepted_slot - 5
        return result

    world.rewrite("getTokenLargestAccounts", stale, count=4)
    for _ in range(4):
        await world.poll("holders", MINT)
    assert await world.titles() == []
    assert (await world.state("holders", MINT))["slot"] == accepted_slot

    await world.poll("holders", MINT)  # a fresh node: the change is noticed
    assert await world.titles() == [f"[WARNING] whales: 1 top-holder change on {_short(MINT)}"]


async def test_an_empty_cluster_is_not_evidence_of_missing_validators_or_drift(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    await world.poll("votes", "cluster")
    await world.poll("nodes", "cluster")

    def no_votes(result: dict[str, Any]) -> dict[str, Any]:
        return {"current": [], "delinquent": []}

    world.rewrite("getVoteAccounts", no_votes, count=4)  # 2 polls of each source
    world.rewrite("getClusterNodes", lambda result: [], count=2)
    for _ in range(2):
        await world.poll("votes", "cluster")
        await world.poll("nodes", "cluster")
    assert await world.titles() == []

    world.rewrite("getClusterNodes", lambda result: [], count=2)
    for _ in range(2):
        await world.poll("nodes", "cluster")
    assert await world.titles() == []


async def test_a_stake_above_all_sol_is_a_bad_answer_not_a_delinquent_share(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    await world.poll("votes", "cluster")

    def huge(result: dict[str, Any]) -> dict[str, Any]:
        result["current"][0]["activatedStake"] = 10**30
        result["delinquent"] = [dict(result["current"][1], activatedStake=10**30)]
        return result

    world.rewrite("getVoteAccounts", huge, count=3)
    for _ in range(3):
        await world.poll("votes", "cluster")
    assert await world.titles() == []


async def test_a_slot_far_ahead_of_the_cursor_is_never_taken_and_wedges_nothing(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    await world.poll("signatures", TREASURY)
    before = await world.cursor()
    world.rewrite("getSignaturesForAddress", top_entry(lambda e: e.update(slot=2**39)), count=3)
    for _ in range(3):
        await world.poll("signatures", TREASURY)
    assert await world.titles() == [] and await world.cursor() == before

    new = world.ledger.add_transactions(TREASURY, 1)
    await world.poll("signatures", TREASURY)
    assert await world.titles() == [f"[WARNING] treasury: 1 new transaction on {_short(TREASURY)}"]
    assert (await world.cursor()).sig == new[0]


async def test_an_entry_far_ahead_in_every_answer_is_set_aside_not_the_address_muted(
    make_world: Callable[..., World],
) -> None:
    """An entry the node always lists at a slot no cluster is at: not taken while new, set
    aside once seen 3 polls in a row (never notified, the cursor never moved to it), and the
    transactions after it notified."""
    world = make_world()
    await world.poll("votes", "cluster")  # the daemon learns the cluster's tip
    await world.poll("signatures", TREASURY)
    [bogus] = world.ledger.add_transactions(TREASURY, 1, odd={"slot": 2**39})
    real = world.ledger.add_transactions(TREASURY, 1)
    for _ in range(2):
        await world.poll("signatures", TREASURY)
    assert await world.titles() == []
    await world.poll("signatures", TREASURY)  # the third in a row: the ledger's own
    assert await world.titles() == [f"[WARNING] treasury: 1 new transaction on {_short(TREASURY)}"]
    assert real[0] in (await world.alerts())[0].body and bogus not in (await world.alerts())[0].body
    assert (await world.cursor()).sig == real[0]

    for count in (1, 2):  # and every later transaction, at once
        new = world.ledger.add_transactions(TREASURY, count)
        await world.poll("signatures", TREASURY)
        body = (await world.alerts())[-1].body
        assert all(signature in body for signature in new)
        assert bogus not in (await world.alerts())[-1].body
    assert len(await world.alerts()) == 3


async def test_a_first_poll_on_an_entry_far_ahead_in_every_answer_starts_behind_it(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    await world.poll("votes", "cluster")
    world.ledger.add_transactions(TREASURY, 1, odd={"slot": 2**39})
    for _ in range(3):
        await world.poll("signatures", TREASURY)
    cursor = await world.cursor()
    assert cursor.slot is not None and cursor.slot < 2**39
    new = world.ledger.add_transactions(TREASURY, 1)
    await world.poll("signatures", TREASURY)
    assert await world.titles() == [f"[WARNING] treasury: 1 new transaction on {_short(TREASURY)}"]
    assert (await world.cursor()).sig == new[0]


# -- property: one notification per qualifying move, whatever the sequence ----------------------

WHALES_RULE = RULE_MODELS["holder_changes"].model_validate(
    {
        "kind": "holder_changes",
        "name": "whales",
        "mints": [MINT],
        "min_change_pct": 10,
        "notify": ["ops"],
    }
)


def no_urls(alert: Any) -> list[Any]:
    return []


def snapshot(whale_amount: int, slot: int) -> HoldersObservation:
    others = {holder: 10**6 * (50 + i) for i, holder in enumerate(HOLDERS[1:20])}
    amounts = {HOLDERS[0]: whale_amount, **others}
    ordered = sorted(amounts.items(), key=lambda item: -item[1])
    accounts = tuple(
        TokenAmount.model_validate({"address": a, "amount": str(n), "decimals": 6})
        for a, n in ordered
    )
    return HoldersObservation(accounts, slot)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([10**6, 2 * 10**6, 1_050_000, 3 * 10**6, 0, 10**12]), max_size=12))
def test_any_sequence_of_balances_gives_one_notification_per_qualifying_move(
    balances: list[int],
) -> None:
    source = SOURCES["holders"]
    expected, reference = 0, 10**6
    for amount in balances:  # a move of >= 10% from the amount last notified counts
        moved = amount > 0 if reference == 0 else abs(amount - reference) * 10 >= reference
        if moved and amount != reference:
            expected, reference = expected + 1, amount
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "watcher.db")
        try:
            for slot, amount in enumerate([10**6, *balances], start=100):
                state = store.load_state("holders", MINT)
                if (doubt := source.doubt(state, snapshot(amount, slot), float(slot))) is not None:
                    raise AssertionError(doubt)
                outcome = source.step([WHALES_RULE], MINT, state, snapshot(amount, slot), slot)
                store.commit_step(
                    StepToCommit.of("holders", MINT, outcome.state, outcome.alerts, no_urls, slot)
                )
            assert len(store.history(limit=100)) == expected
        finally:
            store.close()


# -- fuzz: seeded mutations of the simulator's answers ------------------------------------------

# The fields the daemon reads, per method; a garbage value in one makes the answer bad.
FUZZED_FIELDS = {
    "getSignaturesForAddress": {"signature", "slot", "blockTime", "confirmationStatus"},
    "getTokenLargestAccounts": {"address", "amount", "decimals", "slot"},
    "getVoteAccounts": {
        "votePubkey",
        "nodePubkey",
        "activatedStake",
        "lastVote",
        "commission",
        "rootSlot",
    },
    "getClusterNodes": {"pubkey", "featureSet"},
}
NULLABLE = {"blockTime", "confirmationStatus", "commission", "rootSlot", "featureSet"}
# Fields that only inform: garbage in one is that field unknown, the answer still taken.
UNKNOWABLE = NULLABLE
GARBAGE: list[Any] = [2**64, 2**64 - 1, -1, 10**30, 1.5, "x", "0OIl0OIl", {}, [], True]


LISTS = {"current", "delinquent", "value"}  # the lists the daemon reads, besides the result


def places(node: Any, fields: set[str]) -> list[tuple[Any, Any]]:
    """(container, key) of every fuzzed field, and of every list the daemon reads (to empty)."""
    found: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in fields:
                found.append((node, key))
            if key in LISTS and value:
                found.append((node, key))
            if key in LISTS or key == "context":
                found += places(value, fields)
    elif isinstance(node, list):
        for item in node:
            found += places(item, fields)
    return found


def mutation(rng: random.Random, method: str, said: list[str]) -> Callable[[Any], Any]:
    """One seeded way to spoil an answer: a garbage value, a required field dropped, or every
    list emptied (a doubtful picture, or for signatures a plain "nothing new")."""

    def rewrite(result: Any) -> Any:
        if isinstance(result, list) and method != "getSignaturesForAddress" and rng.random() < 0.1:
            said.append("emptied the answer")
            return []
        spots = places(result, FUZZED_FIELDS[method])
        container, key = rng.choice(spots)
        if key in LISTS:
            container[key] = []
        elif key not in NULLABLE and rng.random() < 0.2:
            del container[key]
        elif key == "blockTime":
            container[key] = rng.choice([*GARBAGE, 1_790_000_000_000])
        else:
            container[key] = rng.choice(GARBAGE)
        said.append(
            f"{key}: {container.get(key, 'dropped') if isinstance(container, dict) else []}"
        )
        if key in UNKNOWABLE:
            said.append("unknown")
        return result

    return rewrite


async def test_fuzzed_answers_are_never_evidence_and_never_wedge(
    make_world: Callable[..., World],
) -> None:
    """For each method: a real change, then a spoiled answer (nothing raised, nothing alerted,
    nothing advanced), then a good answer (the change is noticed: nothing is wedged). A spoiled
    field that only informs is that field unknown: the change is noticed at once."""
    world = make_world()
    rng = random.Random(20261123)
    whale = HOLDERS[5]
    one = world.ledger.holder_amount(MINT, whale)
    delinquent = False
    version = "2.3.6"

    def change(method: str) -> None:
        nonlocal delinquent, version
        if method == "getSignaturesForAddress":
            world.ledger.add_transactions(TREASURY, 1 + rng.randrange(3))
        elif method == "getTokenLargestAccounts":
            amount = world.ledger.holder_amount(MINT, whale)
            world.ledger.set_holder_amount(MINT, whale, 2 * one if amount == one else one)
        elif method == "getVoteAccounts":
            delinquent = not delinquent
            world.ledger.set_validator(
                OUR_VOTE, OUR_NODE, stake=50_000_000_000_000, delinquent=delinquent
            )
        else:
            version = "2.3.5" if version == "2.3.6" else "2.3.6"
            world.ledger.set_node(OUR_NODE, version=version, feature_set=FEATURE_SET)

    targets = {
        "getSignaturesForAddress": ("signatures", TREASURY, "cursor"),
        "getTokenLargestAccounts": ("holders", MINT, "top"),
        "getVoteAccounts": ("votes", "cluster", "episodes"),
        "getClusterNodes": ("nodes", "cluster", "episodes"),
    }
    for source, target, _ in targets.values():
        await world.poll(source, target)  # baselines
    assert await world.titles() == []

    for case in range(40):
        method = list(targets)[case % 4]
        source, target, kept = targets[method]
        change(method)
        before_state, before_alerts = (
            (await world.state(source, target)).get(kept),
            len(await world.alerts()),
        )
        said: list[str] = []
        world.rewrite(method, mutation(rng, method, said))
        await world.poll(source, target)  # nothing escapes
        assert world.ledger.faults.pending() == 0
        if said[-1] == "unknown":
            assert len(await world.alerts()) == before_alerts + 1, (case, method, said)
            continue
        assert len(await world.alerts()) == before_alerts, (case, method, said)
        assert (await world.state(source, target)).get(kept) == before_state, (case, method, said)

        await world.poll(source, target)  # a good answer: the change is noticed
        assert len(await world.alerts()) == before_alerts + 1, (case, method, said)


# -- watcher check renders each template once against sample alerts of its kind -----------------


def check_rules(tmp_path: Path, rules: list[dict[str, Any]]) -> list[str]:
    config = write_config(
        tmp_path,
        rpc_url="http://127.0.0.1:1/v3/key",
        channels={"hooks": ["json://127.0.0.1:9/"]},
        rules=rules,
    )
    return [str(problem) for problem in check_config(config, {})]


def test_check_reports_a_template_that_fails_at_render_time(tmp_path: Path) -> None:
    broken = dict(base_rules()[0], title="{{ count + 'x' }} new")
    resolved_only = dict(base_rules()[2], body="was {{ was.status }}")  # no `was` when firing
    said = check_rules(tmp_path, [broken, base_rules()[1], resolved_only])
    rules_file = tmp_path / "rules" / "rules.yaml"
    # FILE:LINE (the line of the rule's name), then what failed on which sample.
    assert [line.split(": ", 1)[1] for line in said] == [
        "rule 'treasury': title template failed: TypeError: unsupported operand "
        "type(s) for +: 'int' and 'str'",
        "rule 'my-validator': body template failed: 'was' is undefined",
    ]
    lines = rules_file.read_text().splitlines()
    for problem, name in zip(said, ["treasury", "my-validator"], strict=True):
        where = problem.split(": ", 1)[0]
        assert where.startswith(f"{rules_file}:")
        assert lines[int(where.rsplit(":", 1)[1]) - 1].endswith(f"name: {name}")


def test_check_accepts_templates_that_render_for_every_kind(tmp_path: Path) -> None:
    titles = {
        "treasury": "{{ count }} on {{ address | short }}: {{ newest_signature }} {{ more }}",
        "whales": "{% for c in changes %}{{ c.kind }} {{ c.account | named }} {{ c.new_ui }}"
        "{% endfor %} on {{ mint }}",
        "my-validator": "{{ status }} {{ vote_pubkey }}{% if reason == 'resolved' %} was "
        "{{ was.status }} for {{ duration }}{% endif %}",
        "drift": "{{ status }} {{ version }} < {{ reference_version }} {{ subject | explorer }}",
    }
    rules = [
        dict(rule, title=titles[rule["name"]], repeat="1h")
        if "validators" in rule
        else dict(rule, title=titles[rule["name"]])
        for rule in base_rules()
    ]
    assert check_rules(tmp_path, rules) == []


async def test_a_first_poll_far_ahead_of_the_cluster_tip_is_not_the_baseline(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    await world.poll("votes", "cluster")  # the daemon learns the cluster's tip

    def far_ahead(result: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [dict(result[0], slot=2**39)]

    world.rewrite("getSignaturesForAddress", far_ahead)
    await world.poll("signatures", TREASURY)
    assert "cursor" not in await world.state("signatures", TREASURY)

    await world.poll("signatures", TREASURY)  # the real baseline
    new = world.ledger.add_transactions(TREASURY, 1)
    await world.poll("signatures", TREASURY)
    assert await world.titles() == [f"[WARNING] treasury: 1 new transaction on {_short(TREASURY)}"]
    assert (await world.cursor()).sig == new[0]


def holder_twice(result: dict[str, Any]) -> dict[str, Any]:
    result["value"][1] = dict(result["value"][0], amount="1", uiAmountString="0.000001")
    return result


def node_twice_with_another_version(result: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*result, dict(result[0], version="1.0.0")]


def amount_as_a_bare_number(result: dict[str, Any]) -> dict[str, Any]:
    # The node sends amounts as strings of digits; a number in their place is not its answer.
    result["value"][0]["amount"] = 5
    return result


def vote_account_in_both_lists(result: dict[str, Any]) -> dict[str, Any]:
    result["delinquent"].append(dict(result["current"][0], lastVote=1))
    return result


@pytest.mark.parametrize(
    ("method", "source", "target", "rewrite"),
    [
        ("getTokenLargestAccounts", "holders", MINT, holder_twice),
        ("getVoteAccounts", "votes", "cluster", vote_account_in_both_lists),
        ("getClusterNodes", "nodes", "cluster", node_twice_with_another_version),
        ("getTokenLargestAccounts", "holders", MINT, amount_as_a_bare_number),
    ],
)
async def test_an_answer_contradicting_itself_is_a_bad_answer(
    make_world: Callable[..., World],
    method: str,
    source: str,
    target: str,
    rewrite: Callable[[Any], Any],
) -> None:
    world = make_world()
    await world.poll(source, target)
    before = await world.state(source, target)
    world.rewrite(method, rewrite, count=3)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            await world.poll(source, target)
    assert await world.titles() == []
    assert await world.state(source, target) == before
    assert [e["error"] for e in logs if e["event"].startswith("poll failed")] == ["BadResponse"] * 3


# -- the pure judgement, as a table ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("streak", "doubt", "accept", "seen", "new_stretch"),
    [
        (None, Doubt("empty", "p1"), False, 1, True),
        ({"picture": "p1", "seen": 1}, Doubt("empty", "p1"), False, 2, False),
        ({"picture": "p1", "seen": 2}, Doubt("empty", "p1"), True, 3, False),
        ({"picture": "p1", "seen": 2}, Doubt("other", "p2"), False, 1, True),
        ({"picture": "p1", "seen": 9}, Doubt("stale", "p1", confirmable=False), False, 10, False),
    ],
)
def test_judge_confirms_the_same_picture_three_polls_in_a_row(
    streak: dict[str, Any] | None, doubt: Doubt, accept: bool, seen: int, new_stretch: bool
) -> None:
    state = {"top": {"a": "1"}, **({DOUBT_KEY: streak} if streak else {})}
    verdict = judge(state, doubt)
    assert (verdict.accept, verdict.seen, verdict.new_stretch) == (accept, seen, new_stretch)
    assert verdict.state["top"] == {"a": "1"}  # nothing but the streak changes
    assert verdict.state[DOUBT_KEY] == {
        "picture": doubt.picture,
        "reason": doubt.reason,
        "seen": seen,
    }


def test_a_slot_bound_grows_with_time_so_a_real_slot_always_gets_in() -> None:
    tip = SlotTip(slot=400_000_000, at=START)
    assert tip.bound(START) == 400_000_000 + SLOT_MARGIN
    # A real cluster makes 2.5 slots a second; the bound grows four times as fast.
    for elapsed in (0.0, 60.0, 86_400.0, 365 * 86_400.0):
        assert 400_000_000 + 2.5 * elapsed < tip.bound(START + elapsed)
    assert tip.after(None, START + 5) == tip and tip.after(1, START + 5) == tip
    assert tip.after(400_000_100, START + 5) == SlotTip(400_000_100, START + 5)
