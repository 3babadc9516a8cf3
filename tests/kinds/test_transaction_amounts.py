"""What moved, in ``new_transactions`` notifications: the balances read in the poll that found
new signatures against the read before (``watcher.kinds.toolkit.tx_amounts``), as the user reads
them, and the changes notified adding up to the balance's real change whatever lands between a
signature page and the balance read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watcher.alerting.formatting import Presentation
from watcher.config.rule_models import RuleBase
from watcher.core.errors import RpcTimeout
from watcher.core.events import (
    BELOW_THRESHOLD_FACT,
    WATCH_SINCE_KEY,
    AlertMessage,
    StepOutcome,
    TargetState,
    WatchSince,
)
from watcher.kinds import RULE_MODELS, SOURCES, word
from watcher.kinds.base import LedgerReader
from watcher.kinds.new_transactions import transactions_text
from watcher.kinds.toolkit.tx_amounts import (
    SOL,
    BalanceRead,
    Holding,
    ReadOutcome,
    Threshold,
    changes,
    movement,
)
from watcher.ledger.models import SignatureEntry

from support.balances import Balances
from support.values import entry, key, signatures_page

ADDRESS = key("treasury")
USDC = key("usdc")
SIGNATURES = SOURCES["signatures"]


def rule(**fields: Any) -> RuleBase:
    body = {"kind": "new_transactions", "name": "treasury", "addresses": [ADDRESS]}
    return RULE_MODELS["new_transactions"].model_validate({**body, "notify": ["ops"], **fields})


class Chain(Balances):
    """One address's history (newest first) and balances; ``land`` adds a transaction moving
    lamports (or a mint's amount) at the next slot. ``gap``: transactions that land after the
    next signature page and before the balance read."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[SignatureEntry] = []
        self.gap: list[tuple[int, str | None]] = []
        self.count = 0
        self.lamports[ADDRESS] = 1_200_500_000_000

    def land(self, change: int, mint: str | None = None, *, err: object = None) -> None:
        self.slot += 1
        self.count += 1
        self.entries.insert(0, entry(f"tx-{self.count}", self.slot, err=err))
        if mint is None:
            self.lamports[ADDRESS] += change
        else:
            held = self.tokens.setdefault(ADDRESS, {})
            held[mint] = held.get(mint, 0) + change

    async def get_signatures_for_address(
        self,
        address: str,
        *,
        before: str | None = None,
        until: str | None = None,
        limit: int = 1000,
    ) -> list[SignatureEntry]:
        return signatures_page(self.entries, before=before, until=until, limit=limit)

    async def get_multiple_accounts(self, keys: Sequence[str]) -> Any:
        self._land_gap()
        return await super().get_multiple_accounts(keys)

    async def get_token_accounts(
        self, *, mint: str | None, owner: str | None, limit: int, cursor: str | None
    ) -> Any:
        self._land_gap()  # the tokens are read first
        return await super().get_token_accounts(mint=mint, owner=owner, limit=limit, cursor=cursor)

    def _land_gap(self) -> None:
        for change, mint in self.gap:  # landed after the page, before this read
            self.land(change, mint)
        self.gap = []


async def poll(ledger: Chain, state: TargetState | None, rules: Sequence[RuleBase]) -> StepOutcome:
    observation = await SIGNATURES.observe(cast(LedgerReader, ledger), ADDRESS, state)
    outcome = SIGNATURES.step(rules, ADDRESS, state, observation, now=2_000_000_000.0)
    by_name = {each.name: each for each in rules}
    alerts = tuple(word(alert, by_name[alert.rule]) for alert in outcome.alerts)
    return StepOutcome(json.loads(json.dumps(outcome.state)), alerts)


def sol_change(alert: AlertMessage) -> int:
    assets = alert.facts["balances"]["assets"]
    return sum(int(a["change"] or 0) for a in assets if a["asset"] == SOL)


async def test_an_outflow_of_1000_sol_says_before_after_and_the_change() -> None:
    ledger, rules = Chain(), [rule()]
    state = (await poll(ledger, None, rules)).state  # the baseline, its balance read
    assert state["balance"]["lamports"] == "1200500000000"
    ledger.land(-600_000_000_000)
    ledger.land(-400_000_000_000)
    ledger.land(0)
    outcome = await poll(ledger, state, rules)
    (alert,) = outcome.alerts
    assert alert.title.endswith("3 new transactions on " + _short(ADDRESS) + ": SOL -1,000")
    assert "Balances read at slot 1003:" in alert.body
    assert "  SOL 1,200.5 -> 200.5 (-1,000) over 3 transactions" in alert.body
    assert alert.facts["balances"]["assets"] == [
        {
            "asset": SOL,
            "decimals": 9,
            "before": "1200500000000",
            "after": "200500000000",
            "change": "-1000000000000",
        }
    ]
    assert outcome.state["balance"] == {"slot": 1003, "lamports": "200500000000"}


async def test_tokens_true_reads_token_balances_and_notifies_an_inflow_of_usdc() -> None:
    ledger, rules = Chain(), [rule(tokens=True)]
    ledger.decimals[USDC] = 6
    ledger.tokens[ADDRESS] = {USDC: 5_000_000}
    state = (await poll(ledger, None, rules)).state
    assert state["tokens"] is True
    # The next poll reads the tokens' baseline once, with nothing new to notify.
    quiet = await poll(ledger, state, rules)
    assert quiet.alerts == ()
    assert quiet.state["balance"]["tokens"] == {USDC: ["5000000", 6]}
    ledger.land(25_000_000_000, USDC)
    (alert,) = (await poll(ledger, quiet.state, rules)).alerts
    assert alert.title.endswith(f": {_short(USDC)} +25,000")
    assert f"{USDC} 5 -> 25,005 (+25,000)" in alert.body
    assert "  SOL 1,200.5 -> 1,200.5 (no change) over 1 transaction" in alert.body


async def test_a_failed_balance_read_notifies_the_transactions_without_amounts() -> None:
    ledger, rules = Chain(), [rule()]
    state = (await poll(ledger, None, rules)).state
    ledger.land(-5_000)
    ledger.fail = RpcTimeout("read timeout", method="getMultipleAccounts")
    failed = await poll(ledger, state, rules)
    (alert,) = failed.alerts
    assert "Amounts unknown: the balance read failed (getMultipleAccounts: RpcTimeout)" in (
        alert.body
    )
    assert failed.state["balance"] == state["balance"]  # the last read taken stays
    # The next read's change covers those transactions too: nothing lost.
    ledger.fail = None
    ledger.land(-1)
    (after,) = (await poll(ledger, failed.state, rules)).alerts
    assert sol_change(after) == -5_001


async def test_a_transfer_landing_between_the_page_and_the_read_is_counted_once() -> None:
    ledger, rules = Chain(), [rule()]
    state = (await poll(ledger, None, rules)).state
    ledger.land(-10_000_000_000)
    ledger.gap = [(-7_000_000_000, None)]  # lands after the page is read
    first = await poll(ledger, state, rules)
    (alert,) = first.alerts
    assert alert.facts["count"] == 1
    assert sol_change(alert) == -17_000_000_000  # the read includes the one in the gap
    # The next poll lists it: its change was counted already.
    (listed,) = (await poll(ledger, first.state, rules)).alerts
    assert listed.facts["count"] == 1
    assert sol_change(listed) == 0
    assert listed.facts["balances"]["counted_before"] == 1
    assert "landed before the last balance read: counted in the previous notification" in (
        listed.body
    )


async def test_a_transfer_landing_while_the_baseline_is_read_is_notified_past_thresholds() -> None:
    """The first poll's read is a baseline, notified nowhere: a transfer landing between its
    page and its read is in that baseline, so the next poll, which lists it, notifies it
    whatever the thresholds and says where its amount went."""
    ledger, rules = Chain(), [rule(min_change_sol="1")]
    ledger.gap = [(-7_000_000_000, None)]  # lands after the first page, before the first read
    baseline = await poll(ledger, None, rules)
    assert baseline.alerts == ()
    assert baseline.state["balance"]["baseline_until"] == 1001
    after = await poll(ledger, baseline.state, rules)
    (listed,) = after.alerts
    assert BELOW_THRESHOLD_FACT not in listed.facts
    assert listed.facts["balances"]["in_baseline"] == 1
    assert listed.facts["balances"]["counted_before"] == 0
    assert sol_change(listed) == 0
    assert (
        "(1 transaction landed while the watch's baseline balances were read: in that baseline,"
        " not in the change above)"
    ) in listed.body
    # Measured from there on: dust below the threshold stays below it.
    assert "baseline_until" not in after.state["balance"]
    ledger.land(-1)
    (dust,) = (await poll(ledger, after.state, rules)).alerts
    assert dust.facts[BELOW_THRESHOLD_FACT]["reason"] == "below_threshold"


async def test_a_token_transfer_landing_while_the_tokens_baseline_is_read_is_notified() -> None:
    ledger, rules = Chain(), [rule(tokens=True, min_change={USDC: "500"})]
    ledger.decimals[USDC] = 6
    ledger.tokens[ADDRESS] = {USDC: 5_000_000}
    state = (await poll(ledger, None, rules)).state
    ledger.gap = [(100_000_000, USDC)]  # lands after the quiet page, before the tokens' read
    tokens_read = await poll(ledger, state, rules)
    assert tokens_read.alerts == ()
    assert tokens_read.state["balance"]["tokens"] == {USDC: ["105000000", 6]}
    after = await poll(ledger, tokens_read.state, rules)
    (listed,) = after.alerts
    assert BELOW_THRESHOLD_FACT not in listed.facts
    assert listed.facts["balances"]["in_baseline"] == 1
    # Measured from there on: a transfer below its min_change is kept below.
    ledger.land(1_000_000, USDC)
    (small,) = (await poll(ledger, after.state, rules)).alerts
    assert small.facts[BELOW_THRESHOLD_FACT]["reason"] == "below_threshold"


async def test_a_watch_with_tokens_takes_their_baseline_with_the_cursor_s() -> None:
    """The daemon's first poll of an address whose rule asks for tokens reads them with the
    cursor's baseline: a token change after it is notified with its amount, never taken as
    the tokens' baseline."""
    ledger, rules = Chain(), [rule(tokens=True)]
    ledger.decimals[USDC] = 6
    ledger.tokens[ADDRESS] = {USDC: 5_000_000}
    ledger.land(0)  # history, before the watch began (blockTime 1,750,001,001)
    since = WatchSince(1_750_001_500.0, slot=1001)
    waiting: TargetState = {"v": 1, WATCH_SINCE_KEY: since.to_json()}
    # The state did not say tokens yet: the poll is done again, reading them.
    again = await poll(ledger, waiting, rules)
    assert again.alerts == ()
    assert again.state == {"v": 1, WATCH_SINCE_KEY: since.to_json(), "tokens": True}
    baseline = await poll(ledger, again.state, rules)
    assert baseline.alerts == ()
    assert WATCH_SINCE_KEY not in baseline.state
    assert baseline.state["balance"]["tokens"] == {USDC: ["5000000", 6]}
    ledger.land(25_000_000_000, USDC)
    (alert,) = (await poll(ledger, baseline.state, rules)).alerts
    assert f"{USDC} 5 -> 25,005 (+25,000)" in alert.body


async def test_a_watch_with_tokens_notifies_what_came_after_it_began_on_the_second_read() -> None:
    ledger, rules = Chain(), [rule(tokens=True)]
    ledger.decimals[USDC] = 6
    since = WatchSince(1_750_000_000.0, slot=1000)
    waiting: TargetState = {"v": 1, WATCH_SINCE_KEY: since.to_json()}
    ledger.land(25_000_000_000, USDC)  # after the watch began, before the first poll
    again = await poll(ledger, waiting, rules)
    assert again.alerts == ()
    ledger.land(-3_000_000_000)  # between the two reads: still after the watch began
    (alert,) = (await poll(ledger, again.state, rules)).alerts
    assert alert.facts["count"] == 2
    assert "Since the watch began at" in alert.body


# -- the pure parts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        # SOL is always listed; a token only when it changed.
        (
            BalanceRead(1, 10, {USDC: Holding(5, 6)}),
            BalanceRead(2, 10, {USDC: Holding(5, 6)}),
            [(SOL, 10, 10)],
        ),
        (
            BalanceRead(1, 10, {USDC: Holding(5, 6)}),
            BalanceRead(2, 7, {}),
            [(SOL, 10, 7), (USDC, 5, 0)],  # the token account closed: gone to zero
        ),
        (
            BalanceRead(1, 10, {}),
            BalanceRead(2, 10, {USDC: Holding(9, 6)}),
            [(SOL, 10, 10), (USDC, 0, 9)],
        ),
        # No token read before: no before for tokens (never a change counted from nothing).
        (
            BalanceRead(1, 10),
            BalanceRead(2, 10, {USDC: Holding(9, 6)}),
            [(SOL, 10, 10), (USDC, None, 9)],
        ),
        (None, BalanceRead(2, 10), [(SOL, None, 10)]),
    ],
)
def test_changes_per_asset(
    before: BalanceRead | None, after: BalanceRead, expected: list[tuple[str, int | None, int]]
) -> None:
    assert [(c.asset, c.before, c.after) for c in changes(before, after)] == expected


@pytest.mark.parametrize(
    ("threshold", "before", "after", "counts"),
    [
        (Threshold(min_sol=Decimal("0.001")), 10**9, 10**9 - 10_000, False),  # dust
        (Threshold(min_sol=Decimal("0.001")), 10**9, 10**9 - 10**6, True),  # exactly the minimum
        (Threshold(min_sol=Decimal("1"), direction="out"), 10 * 10**9, 20 * 10**9, False),
        (Threshold(min_sol=Decimal("1"), direction="out"), 20 * 10**9, 10 * 10**9, True),
        (Threshold(direction="in"), 5, 4, False),
        (Threshold(), 5, 5, False),  # no change
        (Threshold(), None, 5, False),  # nothing measured: never counted
    ],
)
def test_threshold_counts_a_measured_change(
    threshold: Threshold, before: int | None, after: int, counts: bool
) -> None:
    (change,) = changes(None if before is None else BalanceRead(1, before), BalanceRead(2, after))
    assert threshold.counts(change) is counts


@pytest.mark.parametrize(
    "read",
    [
        BalanceRead(7, 2**64 - 1, {USDC: Holding(2**63, 6)}),
        BalanceRead(7, 10, baseline_until=9),
    ],
)
def test_a_read_round_trips_through_json(read: BalanceRead) -> None:
    assert BalanceRead.from_json(json.loads(json.dumps(read.to_json()))) == read


@pytest.mark.parametrize(
    ("kept", "fresh_slots", "counted_before", "in_baseline"),
    [
        (None, [5, 9], 0, 0),
        (BalanceRead(10, 1), [9, 10, 11], 2, 0),  # at or below the notified read's slot
        (BalanceRead(10, 1).as_baseline(), [9, 10, 11], 0, 2),  # in a baseline read
        # Tokens first read at slot 14 over SOL notified at slot 10: above 10, in the tokens'.
        (BalanceRead(10, 1).as_baseline(14), [9, 12, 15], 0, 2),
    ],
)
def test_a_signature_below_the_kept_read_is_counted_once_or_said_in_a_baseline(
    kept: BalanceRead | None, fresh_slots: list[int], counted_before: int, in_baseline: int
) -> None:
    moved, _kept = movement(kept, ReadOutcome(BalanceRead(20, 1)), fresh_slots)
    assert (moved.counted_before, moved.in_baseline) == (counted_before, in_baseline)
    failed, still = movement(kept, ReadOutcome(error="timeout"), fresh_slots)
    assert (failed.counted_before, failed.in_baseline, still) == (counted_before, in_baseline, kept)


# -- the property: what is notified adds up -------------------------------------------------

STEP = st.one_of(
    st.tuples(st.just("land"), st.integers(-(10**12), 10**12)),
    st.tuples(st.just("gap"), st.integers(-(10**12), 10**12)),
    st.tuples(st.just("poll"), st.just(0)),
    st.tuples(st.just("fail"), st.just(0)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(STEP, max_size=25))
async def test_the_notified_changes_add_up_to_the_balance_s_change(
    steps: list[tuple[str, int]],
) -> None:
    ledger, rules = Chain(), [rule()]
    ledger.lamports[ADDRESS] = 10**15  # never below zero
    start = ledger.lamports[ADDRESS]
    state = (await poll(ledger, None, rules)).state
    notified = 0
    for action, amount in steps:
        if action == "land":
            ledger.land(amount)
        elif action == "gap":
            ledger.gap.append((amount, None))
        else:
            ledger.fail = (
                RpcTimeout("read timeout", method="getMultipleAccounts")
                if action == "fail"
                else None
            )
            outcome = await poll(ledger, state, rules)
            state = outcome.state
            notified += sum(sol_change(alert) for alert in outcome.alerts[:1])
    # A last transaction and a poll that reads: every change is notified, once.
    ledger.fail, ledger.gap = None, []
    ledger.land(1)
    outcome = await poll(ledger, state, rules)
    notified += sol_change(outcome.alerts[0])
    assert notified == ledger.lamports[ADDRESS] - start


def asset_change(alert: AlertMessage, asset: str) -> int:
    assets = alert.facts["balances"]["assets"]
    return sum(int(a["change"] or 0) for a in assets if a["asset"] == asset)


MOVE = st.tuples(
    st.sampled_from(["land", "gap"]), st.integers(-(10**9), 10**9), st.sampled_from([SOL, USDC])
)
POLL = st.tuples(st.sampled_from(["poll", "fail"]), st.just(0), st.just(SOL))
Step = tuple[str, int, str]


async def play(
    ledger: Chain, state: TargetState | None, rules: Sequence[RuleBase], steps: Sequence[Step]
) -> list[AlertMessage]:
    """The alerts of ``steps`` from ``state`` (moves landing, polls, polls whose token read
    fails), then of a last transaction and a poll that reads."""
    alerts: list[AlertMessage] = []
    for action, amount, asset in steps:
        mint = None if asset == SOL else asset
        if action == "land":
            ledger.land(amount, mint)
        elif action == "gap":
            ledger.gap.append((amount, mint))
        else:
            failing = RpcTimeout("read timeout", method="getTokenAccounts")
            ledger.fail = failing if action == "fail" else None
            outcome = await poll(ledger, state, rules)
            state = outcome.state
            alerts += outcome.alerts
    ledger.fail, ledger.gap = None, []
    ledger.land(1)
    alerts += (await poll(ledger, state, rules)).alerts
    return alerts


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(MOVE, POLL), max_size=25))
async def test_with_tokens_and_thresholds_every_change_is_recorded_once(
    steps: list[Step],
) -> None:
    """SOL and a token, rules with thresholds: notified or kept below, the changes recorded add
    up per asset to the ledger's, whatever lands between the pages and the reads."""
    ledger = Chain()
    rules = [rule(tokens=True, min_change_sol="1", min_change={USDC: "500"})]
    ledger.decimals[USDC] = 6
    ledger.tokens[ADDRESS] = {USDC: 10**15}
    ledger.lamports[ADDRESS] = 10**15
    state = (await poll(ledger, None, rules)).state
    state = (await poll(ledger, state, rules)).state  # the tokens' baseline
    start = {SOL: ledger.lamports[ADDRESS], USDC: ledger.tokens[ADDRESS][USDC]}
    recorded = {SOL: 0, USDC: 0}
    alerts = await play(ledger, state, rules, steps)
    for asset in recorded:
        recorded[asset] = sum(asset_change(alert, asset) for alert in alerts)
    assert recorded[SOL] == ledger.lamports[ADDRESS] - start[SOL]
    assert recorded[USDC] == ledger.tokens[ADDRESS][USDC] - start[USDC]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-(10**9), 10**9), st.sampled_from([SOL, USDC])), max_size=3),
    st.lists(st.tuples(st.integers(-(10**9), 10**9), st.sampled_from([SOL, USDC])), max_size=3),
    st.lists(st.one_of(MOVE, POLL), max_size=15),
)
async def test_what_lands_while_a_baseline_is_read_is_notified_never_kept_below(
    first: list[tuple[int, str]],
    tokens_first: list[tuple[int, str]],
    steps: list[Step],
) -> None:
    """Transfers landing while the watch's first read and the tokens' first read are taken
    are in those baselines: the poll that lists them notifies them, whatever the thresholds,
    and what is recorded after adds up with them to the ledger's change."""
    ledger = Chain()
    rules = [rule(tokens=True, min_change_sol="1000", min_change={USDC: "1000000"})]
    ledger.decimals[USDC] = 6
    ledger.tokens[ADDRESS] = {USDC: 10**15}
    ledger.lamports[ADDRESS] = 10**15
    start = {SOL: ledger.lamports[ADDRESS], USDC: ledger.tokens[ADDRESS][USDC]}
    # The first poll reads the lamports (its baseline); the next, the tokens (theirs): a
    # transfer landing before either read is in it, never a change notified.
    in_baselines = {
        SOL: sum(amount for amount, asset in first if asset == SOL),
        USDC: sum(amount for amount, asset in [*first, *tokens_first] if asset == USDC),
    }
    alerts: list[AlertMessage] = []
    state: TargetState | None = None
    for landing in (first, tokens_first):
        ledger.gap = [(amount, None if asset == SOL else asset) for amount, asset in landing]
        outcome = await poll(ledger, state, rules)
        state, alerts = outcome.state, alerts + list(outcome.alerts)
    alerts += await play(ledger, state, rules, steps)
    landed_in_baselines = len(first) + len(tokens_first)
    said = sum(int(alert.facts["balances"].get("in_baseline") or 0) for alert in alerts)
    assert said == landed_in_baselines
    for alert in alerts:
        if alert.facts["balances"].get("in_baseline"):
            assert BELOW_THRESHOLD_FACT not in alert.facts
    for asset in (SOL, USDC):
        recorded = sum(asset_change(alert, asset) for alert in alerts)
        now = ledger.lamports[ADDRESS] if asset == SOL else ledger.tokens[ADDRESS][USDC]
        assert recorded + in_baselines[asset] == now - start[asset]


def _short(address: str) -> str:
    return f"{address[:4]}…{address[-4:]}"


# -- thresholds ------------------------------------------------------------------------------


async def test_dust_below_min_change_sol_is_kept_below_the_threshold_not_notified() -> None:
    ledger, rules = Chain(), [rule(min_change_sol="0.001")]
    state = (await poll(ledger, None, rules)).state
    for _ in range(50):
        ledger.land(1)  # 1 lamport each, from look-alike addresses
    (alert,) = (await poll(ledger, state, rules)).alerts
    assert alert.facts["count"] == 50
    assert alert.facts[BELOW_THRESHOLD_FACT] == {
        "reason": "below_threshold",
        "detail": "every change below min_change_sol 0.001",
    }
    assert "SOL 1,200.5 -> 1,200.50000005 (+0.00000005) over 50 transactions" in alert.body


@pytest.mark.parametrize(
    ("fields", "change", "err", "below"),
    [
        ({"min_change_sol": "1000"}, -(10**12), None, None),  # exactly 1,000 SOL out
        ({"min_change_sol": "1000"}, 999 * 10**9, None, "below_threshold"),
        # The address signed (SOL fell by at least a fee): notified, unless signed: ignore.
        ({"min_change_sol": "1000"}, -5_000, None, None),
        ({"min_change_sol": "1000", "signed": "ignore"}, -5_000, None, "below_threshold"),
        ({"direction": "out"}, 10**12, None, "below_threshold"),
        ({"direction": "in"}, 10**12, None, None),
        # A failed transaction is notified when the rule asks (the default)...
        ({"min_change_sol": "1"}, 0, {"InstructionError": [0, "Custom"]}, None),
        ({"min_change_sol": "1", "failed": "ignore"}, 0, {"e": 1}, "below_threshold"),
        # ... and without thresholds, failed: ignore keeps only-failed polls out.
        ({"failed": "ignore"}, 0, {"e": 1}, "failed"),
        ({}, 0, None, None),  # no thresholds: every transaction, as before
    ],
)
async def test_thresholds_per_rule(
    fields: dict[str, Any], change: int, err: object, below: str | None
) -> None:
    ledger, rules = Chain(), [rule(**fields)]
    state = (await poll(ledger, None, rules)).state
    ledger.land(change, err=err)
    (alert,) = (await poll(ledger, state, rules)).alerts
    assert (alert.facts.get(BELOW_THRESHOLD_FACT) or {}).get("reason") == below


async def test_a_token_change_below_its_min_change_is_below_and_above_is_notified() -> None:
    ledger, rules = Chain(), [rule(tokens=True, min_change_sol="1", min_change={USDC: "100"})]
    ledger.decimals[USDC] = 6
    state = (await poll(ledger, None, rules)).state
    state = (await poll(ledger, state, rules)).state  # the tokens' baseline
    ledger.land(99_999_999, USDC)
    small = await poll(ledger, state, rules)
    assert small.alerts[0].facts[BELOW_THRESHOLD_FACT]["reason"] == "below_threshold"
    ledger.land(100_000_000, USDC)
    (large,) = (await poll(ledger, small.state, rules)).alerts
    assert BELOW_THRESHOLD_FACT not in large.facts


async def test_a_threshold_never_hides_transactions_whose_amounts_are_unknown() -> None:
    ledger, rules = Chain(), [rule(min_change_sol="1000", failed="ignore", signed="ignore")]
    state = (await poll(ledger, None, rules)).state
    ledger.land(1)
    ledger.fail = RpcTimeout("read timeout", method="getMultipleAccounts")
    (alert,) = (await poll(ledger, state, rules)).alerts
    assert BELOW_THRESHOLD_FACT not in alert.facts
    assert "Amounts unknown" in alert.body


async def test_a_token_read_is_one_call_with_its_new_mints_and_kept_decimals_not_read() -> None:
    ledger, rules = Chain(), [rule(tokens=True)]
    ledger.decimals[USDC] = 6
    ledger.tokens[ADDRESS] = {USDC: 1}
    state = (await poll(ledger, None, rules)).state
    state = (await poll(ledger, state, rules)).state  # the tokens' baseline
    assert ledger.balance_calls[-2:] == [
        ("getTokenAccounts", ADDRESS),
        ("getMultipleAccounts", [ADDRESS, USDC]),  # the address and the new mint together
    ]
    ledger.land(5, USDC)
    await poll(ledger, state, rules)
    assert ledger.balance_calls[-1] == ("getMultipleAccounts", [ADDRESS])  # decimals kept


async def test_a_mint_whose_decimals_cannot_be_read_notifies_without_amounts() -> None:
    ledger, rules = Chain(), [rule(tokens=True, min_change_sol="1000")]
    state = (await poll(ledger, None, rules)).state
    ledger.tokens[ADDRESS] = {USDC: 1}  # a mint the ledger has no account of
    ledger.land(0)
    (alert,) = (await poll(ledger, state, rules)).alerts
    assert BELOW_THRESHOLD_FACT not in alert.facts
    assert (
        f"Amounts unknown: the balance read failed (mint {USDC} not found: its decimals are"
        " unknown)" in alert.body
    )


async def test_a_provider_refusing_the_token_read_costs_no_call_at_quiet_polls() -> None:
    ledger, rules = Chain(), [rule(tokens=True)]
    state = (await poll(ledger, None, rules)).state
    ledger.fail = RpcTimeout("method not found", method="getTokenAccounts")
    state = (await poll(ledger, state, rules)).state  # the tokens' baseline: refused
    calls = len(ledger.balance_calls)
    for _ in range(3):
        state = (await poll(ledger, state, rules)).state
    assert len(ledger.balance_calls) == calls  # not asked again while nothing moves
    ledger.fail = None
    ledger.land(-(10**9))
    (alert,) = (await poll(ledger, state, rules)).alerts
    assert "SOL 1,200.5 -> 1,199.5 (-1) over 1 transaction" in alert.body
    assert "balance_error" not in (await poll(ledger, state, rules)).state


async def test_a_rule_without_tokens_says_only_sol_when_another_rule_reads_the_tokens() -> None:
    ledger = Chain()
    rules = [rule(tokens=True), rule(name="sol-only", min_change_sol="1")]
    ledger.decimals[USDC] = 6
    state = (await poll(ledger, None, rules)).state
    state = (await poll(ledger, state, rules)).state  # the tokens' baseline
    ledger.land(25_000_000_000, USDC)
    alerts = {alert.rule: alert for alert in (await poll(ledger, state, rules)).alerts}
    assert f"{USDC} 0 -> 25,000 (+25,000)" in alerts["treasury"].body
    assert USDC not in alerts["sol-only"].body
    assert alerts["sol-only"].facts[BELOW_THRESHOLD_FACT]["reason"] == "below_threshold"


async def test_a_mint_with_a_label_is_named_by_it() -> None:
    ledger, rules = Chain(), [rule(tokens=True)]
    ledger.decimals[USDC] = 6
    state = (await poll(ledger, None, rules)).state
    state = (await poll(ledger, state, rules)).state  # the tokens' baseline
    ledger.land(25_000_000_000, USDC)
    (alert,) = (await poll(ledger, state, rules)).alerts
    title, body = transactions_text(alert.facts, Presentation(labels={USDC: "USDC"}))
    assert title.endswith(": USDC +25,000")
    assert "  USDC 0 -> 25,000 (+25,000)" in body
