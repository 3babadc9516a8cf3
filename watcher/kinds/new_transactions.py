"""Kind ``new_transactions``: new transactions of watched addresses (source ``signatures``).

State per address: ``{"v": 1, "cursor": Cursor.to_json(), "slot_time": 1790000000,
"balance": BalanceRead.to_json(), "tokens": true}``; no ``cursor`` = never polled.
``slot_time``: the blockTime of the cursor's entry, when known. ``balance``: the last balance
read (``watcher.kinds.toolkit.tx_amounts``: what moved, and the counting rule); ``tokens``: a rule
watching the address asks for its token balances (the next polls read them);
``balance_error``: why the read of a quiet poll failed (not retried until a poll finds news).

Doubts (``watcher.ledger.plausibility``), never taken as they are: an entry whose slot is further
ahead than time allows since the cluster's highest slot seen (``SlotTip``) or since the cursor's
(``slot_time``); the cursor stays put and the next answer is judged afresh.

An entry's blockTime more than a day after the clock is that time unknown (logged once), not the
answer doubted: the entry stays in the address's history, and doubting it would mute every later
transaction of the address. The same for one out of its range (``watcher.ledger.models``); an
entry whose signature or slot is unreadable is left out of its page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Annotated, Any, Literal

import structlog
from pydantic import AfterValidator, Field

from watcher.alerting import formatting, messages
from watcher.config.address_files import Addresses
from watcher.config.rule_models import Backoff, EventRule, PositiveDuration, Pubkey
from watcher.core.clock import iso
from watcher.core.errors import BadResponse
from watcher.core.events import (
    BELOW_THRESHOLD_FACT,
    DOUBT_KEY,
    SET_ASIDE_KEY,
    WATCH_SINCE_KEY,
    AlertMessage,
    StepOutcome,
    TargetState,
    WatchSince,
)
from watcher.kinds import base
from watcher.kinds.toolkit import balance_reads, tx_amounts
from watcher.kinds.toolkit.alert_samples import SAMPLE_TIME, sample_key
from watcher.kinds.toolkit.signature_cursor import (
    Cursor,
    baseline_cursor,
    continues_from,
    cursor_after_first_poll,
    left_out,
    listed,
    new_signatures,
    page_is_last,
    predates_watch,
    split_at_watch,
)
from watcher.kinds.toolkit.tx_amounts import BalanceRead, ReadOutcome
from watcher.ledger.models import UNKNOWN_FIELDS_LOG, SignatureEntry, SignaturePage, UnknownField
from watcher.ledger.plausibility import (
    CONFIRM_POLLS,
    MAX_CLOCK_AHEAD,
    Doubt,
    SlotTip,
    picture_of,
    slot_allowance,
)
from watcher.ledger.rpc_methods import Call

log = structlog.get_logger(__name__)

STATE_VERSION = 1
PAGE_LIMIT = 1000  # the node's maximum
# Pages a first poll reads back at most looking for an entry dated before its watch began.
MAX_FIRST_PAGES = 100
LISTED = 10  # signatures listed one by one in a notification
METHOD = "getSignaturesForAddress"
BALANCE_ERROR = "balance_error"  # state: why the last read of a quiet poll failed
# SET_ASIDE_KEY (watcher.core.events): entries set aside as the ledger's own odd ones (seen 3
# polls in a row), not taken and not doubted again while listed: signatures (slot too far
# ahead), fingerprints (unreadable).


# An amount in UI units (1.5 SOL, 25000 USDC): exact, never a float.
Amount = Annotated[Decimal, Field(ge=0, allow_inf_nan=False)]


class _HashableAmounts(dict[str, Decimal]):
    """``min_change`` as validated: a mapping that hashes (rules are frozen and hashed)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


class NewTransactionsRule(EventRule, Backoff):
    kind: Literal["new_transactions"] = "new_transactions"
    addresses: (
        Addresses  # the listed ones and those of addresses_file (watcher.config.address_files)
    )
    addresses_file: str | None = None  # one address per line, relative to the rule file
    every: PositiveDuration = 30.0
    # Read the address's token balances too (getTokenAccounts by owner) when it moves.
    tokens: bool = False
    # A poll whose every measured change is below these (UI units) is kept in the history,
    # not notified (``tx_amounts.judge``).
    min_change_sol: Amount | None = None
    min_change: Annotated[dict[Pubkey, Amount], AfterValidator(_HashableAmounts)] = Field(
        default_factory=lambda: _HashableAmounts()
    )
    direction: Literal["in", "out", "any"] = "any"
    signed: Literal["notify", "ignore"] = "notify"
    failed: Literal["notify", "ignore"] = "notify"

    @property
    def threshold(self) -> tx_amounts.Threshold:
        return tx_amounts.Threshold(self.min_change_sol, self.min_change, self.direction)

    @property
    def watched(self) -> Sequence[str]:
        return self.addresses


@dataclass(frozen=True)
class SignaturesObservation:
    """The pages one poll fetched, newest first. ``baseline``: the first poll (``limit=1``),
    which only learns where history ends."""

    pages: tuple[tuple[SignatureEntry, ...], ...]
    baseline: bool
    target: str | None = None  # the address, to name it in a log line
    left_out: tuple[Any, ...] = ()  # entries listed with an unreadable signature or slot
    # The balances read in the same poll (``tx_amounts``); neither read nor error: not read.
    balances: ReadOutcome = tx_amounts.NOT_READ
    # The state ``observe`` was given, parsed (``StateReads``): ``doubt`` and ``step`` use it
    # while their state holds the same values. None (an observation built otherwise): parsed.
    reads: StateReads | None = field(default=None, compare=False, repr=False)


_UNREAD: Any = object()


class StateReads:
    """The cursor and the kept balance read of one state, each parsed when first asked for and
    then kept (one poll's observe, doubt and step all need them). Kept by hand, not with
    ``functools.cached_property``, which takes a lock on every read in Python 3.11."""

    __slots__ = ("_balance_json", "_cursor", "_cursor_json", "_kept")

    def __init__(self, state: TargetState | None) -> None:
        self._cursor_json = (state or {}).get("cursor")
        self._balance_json = (state or {}).get("balance")
        self._cursor: Cursor | None = _UNREAD
        self._kept: BalanceRead | None = _UNREAD

    @classmethod
    def of(cls, state: TargetState | None, observation: SignaturesObservation) -> StateReads:
        """The observation's reads when ``state`` holds the values they were parsed from, else
        ``state``'s own."""
        reads = observation.reads
        if reads is not None and reads.fits(state):
            return reads
        return cls(state)

    def fits(self, state: TargetState | None) -> bool:
        """Whether ``state`` holds the cursor and balance values these reads are of."""
        cursor, balance = (state or {}).get("cursor"), (state or {}).get("balance")
        return (cursor is self._cursor_json or cursor == self._cursor_json) and (
            balance is self._balance_json or balance == self._balance_json
        )

    @property
    def cursor(self) -> Cursor | None:
        """The state's cursor; None: never polled."""
        cursor = self._cursor
        if cursor is _UNREAD:
            raw = self._cursor_json
            cursor = self._cursor = None if raw is None else Cursor.from_json(raw)
        return cursor

    @property
    def kept(self) -> BalanceRead | None:
        """The state's kept balance read; None: none kept."""
        kept = self._kept
        if kept is _UNREAD:
            kept = self._kept = BalanceRead.from_json(self._balance_json)
        return kept


def needs_read(
    state: TargetState | None,
    pages: Sequence[Sequence[SignatureEntry]],
    reads: StateReads | None = None,
) -> bool:
    """Whether a poll reads the balances: its first (the baseline), one that found a new
    signature, and one of an address whose rule asks for tokens not read yet (their baseline),
    unless such a read failed already (``BALANCE_ERROR``: a provider without getTokenAccounts
    would otherwise cost two calls at every quiet poll; the next poll that finds a signature
    reads them). ``reads``: ``state``'s, parsed already."""
    if (state or {}).get("cursor") is None:
        return True  # the first poll: the baseline's read
    # A quiet page: nothing parsed.
    if any(pages) and new_signatures((reads or StateReads(state)).cursor, pages)[0]:
        return True
    if (state or {}).get(BALANCE_ERROR) or not (state or {}).get("tokens"):
        return False  # the kept read is not needed to tell (most quiet polls)
    kept = (reads or StateReads(state)).kept
    return kept is None or kept.tokens is None


def known_decimals(state: TargetState | None, reads: StateReads | None = None) -> dict[str, int]:
    kept = (reads or StateReads(state)).kept
    return {mint: held.decimals for mint, held in ((kept and kept.tokens) or {}).items()}


async def _read_balances(
    ledger: base.LedgerReader, target: str, state: TargetState | None, reads: StateReads
) -> ReadOutcome:
    """The poll's balance read: tokens when a rule asked for them (``"tokens"``), the mints'
    decimals already kept not read again."""
    wanted = bool((state or {}).get("tokens"))
    decimals = known_decimals(state, reads)
    return await balance_reads.read_balances(ledger, target, wanted, decimals)


async def _next_page(
    ledger: base.LedgerReader,
    target: str,
    before: str | None,
    until: str | None,
    fetched: set[str],
) -> list[SignatureEntry]:
    """The next page back (``PAGE_LIMIT``), its signatures added to ``fetched``. A page of
    only signatures fetched already fails the poll: a node ignoring ``before`` would page
    forever, and committing what was fetched would skip the entries between."""
    answer = await ledger.get_signatures_for_address(
        target, before=before, until=until, limit=PAGE_LIMIT
    )
    if answer and all(entry.signature in fetched for entry in answer):
        raise BadResponse(f"{METHOD} paging made no progress", method=METHOD)
    fetched.update(entry.signature for entry in answer)
    return answer


class SignaturesSource(base.Slotless):
    name = "signatures"
    # Activity (a quiet target backs off): the cursor moved (a new signature).
    facts = base.SourceFacts(
        ("getSignaturesForAddress",),
        noun="addresses",
        batched="getSignaturesForAddress",
        activity_keys=("cursor",),
        reads_history=True,
        on_change=("getMultipleAccounts",),
        on_change_by_field=(("tokens", "getTokenAccounts"),),
    )
    rule_kinds: tuple[str, ...] = ("new_transactions",)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> SignaturesObservation:
        reads = StateReads(state)
        cursor = reads.cursor
        if cursor is None:
            return await self._first(ledger, target, state, reads)
        pages: list[tuple[SignatureEntry, ...]] = []
        unreadable: list[Any] = []
        fetched: set[str] = set()
        before: str | None = None
        while True:
            # Any failure propagates: nothing is committed and the cursor stays put.
            answer = await _next_page(ledger, target, before, cursor.sig, fetched)
            page = tuple(answer)
            pages.append(page)
            unreadable += left_out(answer)
            if page_is_last(cursor, answer, PAGE_LIMIT):
                balances = tx_amounts.NOT_READ
                if needs_read(state, pages, reads):
                    balances = await _read_balances(ledger, target, state, reads)
                return SignaturesObservation(
                    pages=tuple(pages),
                    baseline=False,
                    target=target,
                    left_out=tuple(unreadable),
                    balances=balances,
                    reads=reads,
                )
            if not page:
                raise BadResponse(f"{METHOD}: a full page of unreadable entries", method=METHOD)
            before = page[-1].signature  # the last readable one: the node lists the rest again

    def first_call(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> Call | None:
        """A later poll's first page: the signatures since the cursor (a first poll's pages
        depend on its first answer)."""
        raw = (state or {}).get("cursor")
        if raw is None:
            return None
        return ledger.signatures_call(target, until=continues_from(raw), limit=PAGE_LIMIT)

    def quiet(
        self, rules: Sequence[Any], target: str, state: TargetState | None, answer: Any
    ) -> bool:
        """An empty first page, nothing left out: nothing since the cursor, so ``observe``
        would end there (unless the balances are to be read) and ``step`` keep the state."""
        rest = self.rest(state) if isinstance(answer, SignaturePage) else None
        return rest is not None and self.quiet_at_rest(rules, target, rest, answer)

    def rest(self, state: TargetState | None) -> str | None:
        """A polled state with nothing doubted or set aside, whose balances an empty page does
        not read (``needs_read``): whether it holds the tokens' read (``T``) or not (``S``),
        then the signature its cursor continues from (none: an address with no history)."""
        if not state or state.get("cursor") is None:
            return None
        if DOUBT_KEY in state or SET_ASIDE_KEY in state or needs_read(state, ((),)):
            return None
        return ("T" if state.get("tokens") else "S") + (continues_from(state["cursor"]) or "")

    def call_at_rest(self, ledger: base.LedgerReader, target: str, rest: str) -> Call:
        return ledger.signatures_call(target, until=rest[1:] or None, limit=PAGE_LIMIT)

    def quiet_at_rest(self, rules: Sequence[Any], target: str, rest: str, answer: Any) -> bool:
        """An empty page, nothing left out, and the tokens read exactly when a rule asks for
        them (a reload may have added or dropped that)."""
        if not isinstance(answer, SignaturePage) or answer or answer.left_out:
            return False
        return (rest[0] == "T") == _wants_tokens(rules, target)

    async def _first(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None, reads: StateReads
    ) -> SignaturesObservation:
        """The first poll. One entry is enough to learn where history ends, unless the newest
        is odd (set aside, or being doubted): then a page, to start from the newest that is
        not. When the watch began before this poll (``WatchSince``, as it does in the
        daemon), it pages back with ``before`` until an entry predates that moment (or history
        ends), so that everything after it is there to notify."""
        odd = bool(state and (state.get(SET_ASIDE_KEY) or state.get(DOUBT_KEY)))
        limit = PAGE_LIMIT if odd else 1
        newest = await ledger.get_signatures_for_address(target, limit=limit)
        if not newest and listed(newest) and not odd:
            # The newest entry is unreadable: where history ends is the newest readable one.
            limit = PAGE_LIMIT
            newest = await ledger.get_signatures_for_address(target, limit=limit)
            if not newest:
                raise BadResponse(f"{METHOD}: no readable entry to start from", method=METHOD)
        pages, unreadable = [tuple(newest)], list(left_out(newest))
        since = WatchSince.of(state)
        answer = newest
        fetched = {entry.signature for entry in newest}
        while (
            since is not None
            and pages[-1]
            and listed(answer) >= limit
            and not predates_watch(pages[-1], since)
        ):
            if len(pages) > MAX_FIRST_PAGES:
                # Only entries of unknown time, page after page: the rest is taken as history.
                log.warning(
                    "first poll: no entry dated before the watch began within the pages read;"
                    " older entries are taken as history",
                    target=target,
                    entries=len(fetched),
                )
                break
            limit = PAGE_LIMIT
            answer = await _next_page(ledger, target, pages[-1][-1].signature, None, fetched)
            page = tuple(answer)
            if not page and listed(answer):
                raise BadResponse(f"{METHOD}: a full page of unreadable entries", method=METHOD)
            pages.append(page)
            unreadable += left_out(answer)
        # The baseline read; the tokens when the state says a rule asks for them (when it does
        # not say so yet, the step has the poll done again: ``_tokens_unread``).
        balances = await _read_balances(ledger, target, state, reads)
        return SignaturesObservation(
            pages=tuple(pages),
            baseline=True,
            target=target,
            left_out=tuple(unreadable),
            balances=balances,
            reads=reads,
        )

    def doubt(
        self,
        state: TargetState | None,
        observation: SignaturesObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        entries = [entry for page in observation.pages for entry in page]
        if not entries and not observation.left_out:
            return None  # nothing to doubt (most polls of a quiet address): kept cheap
        # A time in the future is that time unknown (``step``), not the answer doubted.
        UNKNOWN_FIELDS_LOG.report(
            METHOD,
            observation.target,
            [
                UnknownField("blockTime", entry.block_time, entry.signature)
                for entry in entries
                if not _time_known(entry, now)
            ],
        )
        # Entries that cannot be taken: unreadable (left out of their page), or further ahead
        # than time allows. Most likely a garbled answer, gone on the next poll: taking the rest
        # now would let the cursor pass them for good. The same ones 3 polls in a row are the
        # ledger's own (they stay in the history): then they are set aside, remembered as such,
        # and the rest taken, so one odd entry never mutes its address.
        known = set((state or {}).get(SET_ASIDE_KEY) or ())
        unreadable = sorted(_left_out_keys(observation) - known)
        bound = _slot_bound(state, now, tip, StateReads.of(state, observation))
        ahead = [
            e for e in entries if bound is not None and e.slot > bound and e.signature not in known
        ]
        if not unreadable and not ahead:
            return None
        reasons = [f"{e.signature} is at slot {e.slot}, beyond {bound}" for e in ahead[:1]]
        if unreadable:
            count = len(unreadable)
            reasons.append(
                f"{count} entr{'ies' if count > 1 else 'y'} with an unreadable signature or slot"
            )
        odd = tuple(sorted({*unreadable, *(e.signature for e in ahead)}))
        return Doubt("; ".join(reasons), picture_of("set aside", *odd), entries=odd)

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: SignaturesObservation,
        now: float,
    ) -> StepOutcome:
        wanted = _wants_tokens(rules, target)
        if (
            state
            and not observation.baseline
            and not any(observation.pages)
            and not observation.left_out
            and observation.balances == tx_amounts.NOT_READ
            and _settled(state, wanted)
        ):
            return StepOutcome(state=state)  # nothing new (most polls): the state as it is
        outcome = self._step(rules, target, state, observation, now)
        new_state = _with_balances(outcome.state, outcome, wanted)
        if observation.balances.error is not None and not outcome.alerts:
            new_state[BALANCE_ERROR] = observation.balances.error  # a quiet read that failed
        return StepOutcome(new_state, outcome.alerts)

    def _step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: SignaturesObservation,
        now: float,
    ) -> _Stepped:
        reads = StateReads.of(state, observation)
        aside = _set_aside(state)
        listed_now = _left_out_keys(observation) | {
            entry.signature for page in observation.pages for entry in page
        }
        aside &= listed_now  # remembered while the node lists them
        observation = replace(
            observation,
            pages=tuple(
                tuple(entry for entry in page if entry.signature not in aside)
                for page in _known_times(observation.pages, now)
            ),
        )
        kept = reads.kept
        if state and not observation.baseline and not any(observation.pages):
            quiet = tx_amounts.quiet_read(kept, observation.balances)
            return _Stepped(state=_kept(state, aside), balance=quiet)  # nothing new
        cursor = reads.cursor
        if observation.baseline or cursor is None:
            return self._first_step(rules, target, state, observation, aside, kept)
        fresh, new_cursor = new_signatures(cursor, observation.pages)
        if not fresh:
            slot_time = (state or {}).get("slot_time")
            quiet = tx_amounts.quiet_read(kept, observation.balances)
            return _Stepped(state=_state(new_cursor, slot_time, aside), balance=quiet)
        moved, balance = tx_amounts.movement(
            kept, observation.balances, [entry.slot for entry in fresh]
        )
        alerts = tuple(
            _alert(rule, target, fresh, moved)
            for rule in base.watching(rules, NewTransactionsRule, target)
        )
        return _Stepped(
            state=_state(new_cursor, fresh[0].block_time, aside), alerts=alerts, balance=balance
        )

    def _first_step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: SignaturesObservation,
        aside: set[str],
        kept: BalanceRead | None,
    ) -> _Stepped:
        """The first poll: what came after the watch began is new, the rest is the baseline.
        Without a kept start (a rule test's first step), the whole history is the baseline.
        ``kept``: the state's kept balance read."""
        since = WatchSince.of(state)
        entries = [entry for page in observation.pages for entry in page]
        waiting: TargetState = {"v": STATE_VERSION}
        if since is not None:
            waiting[WATCH_SINCE_KEY] = since.to_json()
        if not entries and aside:
            # Only odd entries listed: where history ends is not known yet.
            return _Stepped(state=_kept(waiting, aside), balance=kept)
        if since is not None and _tokens_unread(rules, target, state):
            # A rule asks for the tokens, which this poll did not read (the state did not say
            # so yet): the poll is done again, reading them, from the same moment. A token
            # baseline read a poll after the cursor's would take what moved in between as
            # history.
            return _Stepped(state=_kept({**waiting, "tokens": True}, aside))
        # The baseline's read: what the first change is counted from. A transaction landing
        # between this poll's pages and its read is in it, listed by the next poll.
        baseline = tx_amounts.quiet_read(None, observation.balances) or kept
        if since is None:
            first_page = observation.pages[0] if observation.pages else ()
            newest = max(first_page, key=lambda entry: entry.slot, default=None)
            slot_time = None if newest is None else newest.block_time
            state_now = _state(baseline_cursor(first_page), slot_time, aside)
            return _Stepped(state=state_now, balance=baseline)
        fresh, _history = split_at_watch(entries, since)
        cursor = cursor_after_first_poll(entries, fresh)
        newest = max(entries, key=lambda entry: entry.slot, default=None)
        slot_time = None if newest is None else newest.block_time
        if not fresh:
            return _Stepped(state=_state(cursor, slot_time, aside), balance=baseline)
        # No read before the watch began: the balances now, with no change (the first read).
        moved, balance = tx_amounts.movement(kept, observation.balances, ())
        alerts = tuple(
            _alert(rule, target, fresh, moved, since)
            for rule in base.watching(rules, NewTransactionsRule, target)
        )
        return _Stepped(state=_state(cursor, slot_time, aside), alerts=alerts, balance=balance)


def _wants_tokens(rules: Sequence[Any], target: str) -> bool:
    """Whether a rule watching ``target`` asks for its token balances."""
    # ``base.watching`` with the cheap test first: most rules do not ask for tokens, and the
    # membership of a packed address list costs a lookup.
    for rule in rules:
        if isinstance(rule, NewTransactionsRule) and rule.tokens and target in rule.target_set:
            return True
    return False


def _settled(state: TargetState, wants_tokens: bool) -> bool:
    """Whether ``state`` holds nothing a poll that finds nothing would change: no entry doubted
    or set aside, and the tokens read exactly when a rule asks for them."""
    return (
        DOUBT_KEY not in state
        and SET_ASIDE_KEY not in state
        and bool(state.get("tokens")) == wants_tokens
    )


def _tokens_unread(rules: Sequence[Any], target: str, state: TargetState | None) -> bool:
    """Whether a rule on ``target`` asks for its tokens while a first poll did not read them."""
    if (state or {}).get("tokens"):
        return False
    return any(rule.tokens for rule in base.watching(rules, NewTransactionsRule, target))


@dataclass(frozen=True)
class _Stepped(StepOutcome):
    """A step's outcome with the balance read to keep (``tx_amounts``)."""

    balance: BalanceRead | None = None


def _with_balances(state: TargetState | None, outcome: StepOutcome, wanted: bool) -> TargetState:
    kept: dict[str, Any] = {
        key: value
        for key, value in (state or {}).items()
        if key not in ("balance", "tokens", BALANCE_ERROR)
    }
    balance = outcome.balance if isinstance(outcome, _Stepped) else None
    if balance is not None:
        kept["balance"] = balance.to_json()
    if wanted:
        kept["tokens"] = True
    return kept


def _left_out_keys(observation: SignaturesObservation) -> set[str]:
    return {picture_of(entry) for entry in observation.left_out}


def _slot_bound(
    state: TargetState | None, now: float, tip: SlotTip | None, reads: StateReads
) -> int | None:
    """The highest slot a real entry can have: from the cluster's tip, and from the cursor's own
    slot and time (a first poll has only the tip); None when neither is known."""
    bounds = [tip.bound(now)] if tip is not None else []
    cursor = reads.cursor
    slot_time = (state or {}).get("slot_time")
    if cursor is not None and cursor.slot is not None and slot_time is not None:
        bounds.append(cursor.slot + slot_allowance(now - float(slot_time)))
    return min(bounds) if bounds else None


def _set_aside(state: TargetState | None) -> set[str]:
    """The entries not to take: those set aside before, and those of a doubt this step is
    taking as confirmed (seen ``CONFIRM_POLLS`` polls in a row, this one included)."""
    aside = set((state or {}).get(SET_ASIDE_KEY) or ())
    record = (state or {}).get(DOUBT_KEY) or {}
    if int(record.get("seen", 0)) >= CONFIRM_POLLS - 1:
        aside |= set(record.get("entries") or ())
    return aside


def _kept(state: TargetState, aside: set[str]) -> TargetState:
    """``state`` with ``aside`` remembered and no doubt streak (an accepted step ends it)."""
    kept = {key: value for key, value in state.items() if key not in (DOUBT_KEY, SET_ASIDE_KEY)}
    return {**kept, SET_ASIDE_KEY: sorted(aside)} if aside else kept


def _time_known(entry: SignatureEntry, now: float) -> bool:
    return entry.block_time is None or entry.block_time <= now + MAX_CLOCK_AHEAD


def _known_times(
    pages: tuple[tuple[SignatureEntry, ...], ...], now: float
) -> tuple[tuple[SignatureEntry, ...], ...]:
    """The pages with each blockTime more than a day after ``now`` taken as unknown."""
    return tuple(
        tuple(
            entry if _time_known(entry, now) else entry.model_copy(update={"block_time": None})
            for entry in page
        )
        for page in pages
    )


def _state(cursor: Cursor, slot_time: int | None, aside: Set[str] = frozenset()) -> TargetState:
    state: TargetState = {"v": STATE_VERSION, "cursor": cursor.to_json(), "slot_time": slot_time}
    return _kept(state, set(aside))


def _alert(
    rule: NewTransactionsRule,
    address: str,
    fresh: Sequence[SignatureEntry],
    moved: tx_amounts.Movement | None = None,
    since: WatchSince | None = None,
) -> AlertMessage:
    """``since``: the first poll's, which notifies what came after the watch began."""
    newest = fresh[0]
    facts: dict[str, Any] = {
        "address": address,
        "count": len(fresh),
        "failed": sum(1 for entry in fresh if entry.err is not None),
        "newest_slot": newest.slot,
        "newest_signature": newest.signature,
        "signatures": [_entry_facts(entry) for entry in fresh[:LISTED]],
        "more": max(0, len(fresh) - LISTED),
    }
    if moved is not None and not rule.tokens:
        # Another rule on the address asked for its tokens: this one says only SOL.
        moved = replace(moved, changes=tuple(c for c in moved.changes if c.asset == tx_amounts.SOL))
    if moved is not None:
        facts["balances"] = moved.facts()
    below = tx_amounts.judge(
        rule.threshold,
        moved,
        failed=[entry.err is not None for entry in fresh],
        signed=rule.signed == "notify",
        failed_notify=rule.failed == "notify",
    )
    if below is not None:
        facts[BELOW_THRESHOLD_FACT] = below
    if since is not None:
        facts["watch_began"] = iso(since.at)
    key = f"{rule.name}|{address}|{newest.signature}|event"
    return messages.make_alert(rule, subject=address, reason="event", dedup_key=key, facts=facts)


def _entry_facts(entry: SignatureEntry) -> dict[str, Any]:
    return {
        "signature": entry.signature,
        "slot": entry.slot,
        "failed": entry.err is not None,
        "err": entry.err,
        "memo": entry.memo,
        "block_time": entry.block_time,
    }


SOURCE = SignaturesSource()


# -- wording ---------------------------------------------------------------------------------


def transactions_text(
    facts: messages.Facts, shown: formatting.Presentation = formatting.PLAIN
) -> tuple[str, str]:
    count = int(facts["count"])
    failed = int(facts.get("failed", 0))
    failed_note = f" ({failed} failed)" if failed else ""
    noun = formatting.plural(count, "new transaction")
    address = facts["address"]
    moved = tx_amounts.amounts_lines(facts, shown)
    title = f"{messages.rule_head(facts)} {noun} on {shown.short(address)}{failed_note}"
    if moved.headline:
        title += f": {moved.headline}"
    listed: list[str | None] = []
    for entry in facts["signatures"]:
        listed += [_signature_line(entry, shown), shown.link("tx", entry["signature"])]
    more = int(facts.get("more", 0))
    body = formatting.lines(
        messages.rule_line(facts),
        f"Address: {shown.name(address)}",
        shown.link("address", address),
        f"{noun}{failed_note}, newest in slot {facts['newest_slot']}",
        f"Since the watch began at {facts['watch_began']} (its first poll)"
        if facts.get("watch_began")
        else None,
        *moved.lines,
        "",
        *listed,
        f"... and {more} more" if more else None,
    )
    return title, body


def _signature_line(entry: Mapping[str, Any], shown: formatting.Presentation) -> str:
    """Shortened when its link (the next line) carries it in full."""
    known = "" if entry.get("block_time") is not None else ", time unknown"
    return f"- {shown.listed('tx', entry['signature'])}  " + _signature_details(entry) + known


def _signature_details(entry: Mapping[str, Any]) -> str:
    details = [f"slot {entry['slot']}"]
    if entry.get("block_time") is not None:
        details.append(iso(float(entry["block_time"])))
    if entry.get("failed"):
        details.append("(failed)")
    if entry.get("memo"):
        details.append(f"memo: {entry['memo']}")
    return ", ".join(details)


def _count(facts: Mapping[str, Any]) -> int:
    return int(facts.get("count", 1))


def _named(facts: Mapping[str, Any]) -> list[base.Named]:
    """A digest names each listed signature (the alert counts the rest)."""
    return [
        base.Named(entry["signature"], "tx", _signature_details(entry))
        for entry in facts.get("signatures") or ()
    ]


def samples(rule: NewTransactionsRule) -> list[AlertMessage]:
    """Two new transactions after the known one, one of them failed, and 1,000 SOL out."""
    address = rule.addresses[0]
    cursor = Cursor(sample_key("old", 64), 100).to_json()
    before = BalanceRead(100, 1_200_500_000_000)
    state = {"v": 1, "cursor": cursor, "slot_time": None, "balance": before.to_json()}
    entries = (
        SignatureEntry(
            signature=sample_key("new", 64), slot=102, block_time=int(SAMPLE_TIME), memo="m"
        ),
        SignatureEntry(signature=sample_key("failed", 64), slot=101, err={"e": 1}),
    )
    read = ReadOutcome(BalanceRead(102, 200_500_000_000))
    observation = SignaturesObservation(pages=(entries,), baseline=False, balances=read)
    return list(SOURCE.step([rule], address, state, observation, SAMPLE_TIME).alerts)


KIND = base.Kind(
    model=NewTransactionsRule,
    source=SOURCE,
    wording=transactions_text,
    samples=samples,
    digest=base.DigestWords(
        ("new transaction", "new transactions"),
        ("address", "addresses"),
        _count,
        names=_named,
    ),
)
