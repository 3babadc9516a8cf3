"""The seam between the scheduler and what it polls, and what a watch kind is made of.

A *kind* (``Kind``) is what a rule's ``kind:`` names: its rule model, the source it rides on,
its default wording and, for event kinds, how a digest of its alerts counts. Each kind is one
module of ``watcher.kinds`` and one line of ``watcher.kinds.KINDS``.

A *source* is one kind of thing the daemon observes (signatures of an address, the top holders of
a mint, the vote-account set, the gossip node set). Each source module provides:

- ``rule_kinds``: the rule kinds it serves;
- ``facts`` (``SourceFacts``): what one poll of a target calls and how its targets are counted
  (``watcher check``'s cost lines, a sweep's rate estimate, the cadence's activity);
- ``observe(ledger, target, state)``: the I/O edge, a few RPC calls; raises ``RpcError`` on failure
  (a failed observation is never evidence: it is never stepped);
- ``doubt(state, observation, now, tip)``: pure; is an observation that fits its model stale or
  implausible against the previous state and the highest slot seen so far
  (``watcher.ledger.plausibility``)? ``None`` when it is fine; a doubtful observation is not stepped
  (unless confirmed by polls in a row);
- ``tip(observation)``: the highest slot the observation shows (None: it shows none);
- ``step(rules, target, state, observation, now)``: pure; previous state + observation ->
  ``StepOutcome`` (new state and the alerts to send, as facts: they are worded once, later,
  by ``watcher.kinds.word``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from watcher.alerting.messages import Wording
from watcher.config.rule_models import RuleBase
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.kinds.toolkit.metric_values import Sampler
from watcher.ledger.batching import SharedReads
from watcher.ledger.models import (
    ClusterNode,
    SignatureEntry,
    TokenAmount,
    TokenLargestAccounts,
    VoteAccounts,
)
from watcher.ledger.models_accounts import (
    FeeForMessage,
    MultipleAccounts,
    ParsedTokenAccounts,
    TokenAmountAnswer,
)
from watcher.ledger.models_das import (
    Asset,
    AssetPage,
    EditionList,
    ProgramAccount,
    ProgramAccountData,
    TokenAccountPage,
)
from watcher.ledger.plausibility import Doubt, SlotTip, older_slot
from watcher.ledger.rpc_methods import Call


class LedgerReader(Protocol):
    """What sources may ask of the RPC client (``watcher.ledger.rpc.RpcClient`` implements it)."""

    shared_reads: SharedReads  # the reads its concurrent polls share

    async def get_signatures_for_address(
        self,
        address: str,
        *,
        before: str | None = None,
        until: str | None = None,
        limit: int = 1000,
    ) -> list[SignatureEntry]: ...

    def signatures_call(
        self,
        address: str,
        *,
        before: str | None = None,
        until: str | None = None,
        limit: int = 1000,
    ) -> Call: ...

    async def get_token_largest_accounts(self, mint: str) -> list[TokenAmount]: ...

    async def get_token_largest_accounts_with_context(self, mint: str) -> TokenLargestAccounts: ...

    async def get_vote_accounts(self) -> VoteAccounts: ...

    async def get_cluster_nodes(self) -> list[ClusterNode]: ...

    async def get_multiple_accounts(self, keys: Sequence[str]) -> MultipleAccounts: ...

    async def get_token_account_balance(self, account: str) -> TokenAmountAnswer: ...

    async def get_token_supply(self, mint: str) -> TokenAmountAnswer: ...

    async def get_fee_for_message(self, message: str) -> FeeForMessage | None: ...

    async def get_token_accounts(  # a source names all four (the client's defaults are its own)
        self, *, mint: str | None, owner: str | None, limit: int, cursor: str | None
    ) -> TokenAccountPage: ...

    async def get_asset_page(self, method: str, params: list[Any]) -> AssetPage: ...

    async def get_program_accounts(
        self, program: str, filters: Sequence[Mapping[str, Any]] = ()
    ) -> list[ProgramAccount]: ...

    async def get_program_accounts_data(
        self, program: str, filters: Sequence[Mapping[str, Any]]
    ) -> list[ProgramAccountData]: ...

    async def get_assets(self, ids: Sequence[str]) -> list[Asset | None]: ...

    async def get_parsed_token_accounts(self, keys: Sequence[str]) -> ParsedTokenAccounts: ...
    async def get_nft_editions(
        self, mint: str, *, page: int = 1, limit: int = 1000
    ) -> EditionList: ...


@dataclass(frozen=True)
class SourceFacts:
    """What a source declares of itself, for the parts that count its calls and its targets:
    ``watcher check``'s cost lines (``watcher.budget.cost``), a sweep's rate estimate
    (``watcher.service.sweeps``) and the cadence of a quiet target
    (``watcher.budget.cadences``)."""

    # The RPC methods one poll of a target calls, once each (the quiet minimum).
    methods: tuple[str, ...]
    # The keys one call serves (getMultipleAccounts: up to 100).
    keys_per_call: int = 1
    # A target is a rule's keys, comma-separated (one inventory per rule): its polls ask for
    # each of them.
    joined: bool = False
    # What its targets are, in a sentence ("sweep of 300 addresses needs...").
    noun: str = "targets"
    # The method whose batch cap bounds the calls of one request (None: the batch size).
    batched: str | None = None
    # The keys of its state whose change is activity (a quiet target backs off:
    # ``watcher.budget.cadences``), e.g. the cursor of ``signatures``.
    activity_keys: tuple[str, ...] = ()
    # Of ``methods``, those one call of which serves every poll of the sweeps started together
    # and every source reading it (getVoteAccounts: ``watcher.kinds.sources.vote_accounts``).
    per_tick: tuple[str, ...] = ()
    # Its first poll reads a history (the signatures of an address), not a snapshot: what came
    # after the watch began is new (``watcher.service.watch_starts`` keeps that moment).
    reads_history: bool = False
    # Methods a poll calls only when it found something new (the balance reads of an address
    # that moved), once per moving target, batched ``keys_per_call``-fold across the round's
    # (getMultipleAccounts: 100); and, per rule field set, a method each moving target of the
    # rule calls (``tokens``: getTokenAccounts). ``watcher check`` counts them at an assumed
    # share of polls finding something (``watcher.budget.cost``).
    on_change: tuple[str, ...] = ()
    on_change_by_field: tuple[tuple[str, str], ...] = ()


# What a source's ``observe`` returns, and its ``doubt``, ``tip`` and ``step`` take.
Observation = TypeVar("Observation")


class Source(Protocol[Observation]):
    """One source, generic in its observation (``Source[VoteAccounts]``); the registry holds
    sources of every observation (``Source[Any]``), each consistent with itself."""

    name: str
    rule_kinds: tuple[str, ...]
    facts: SourceFacts

    async def observe(
        self, ledger: LedgerReader, target: str, state: TargetState | None
    ) -> Observation: ...

    def doubt(
        self,
        state: TargetState | None,
        observation: Observation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None: ...

    def tip(self, observation: Observation) -> int | None: ...

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: Observation,
        now: float,
    ) -> StepOutcome: ...


@runtime_checkable
class FirstCall(Protocol):
    """A source that can say, from a target's state alone, the call its next poll makes first:
    a sweep makes a batch of such calls in one request and hands each poll its answer
    (``watcher.ledger.rpc_methods.PrimedReader``); an answer that shows the poll quiet ends it
    there (``quiet``)."""

    def first_call(
        self, ledger: LedgerReader, target: str, state: TargetState | None
    ) -> Call | None:
        """That call (None: not known before the poll, e.g. a first poll)."""
        ...

    def quiet(
        self, rules: Sequence[Any], target: str, state: TargetState | None, answer: Any
    ) -> bool:
        """Whether a poll of ``target`` by ``rules`` from ``state`` whose first call answered
        ``answer`` (its value, or the ``RpcError`` it failed with) ends there having found
        nothing: no other call, no doubt, no alert, its state as it was, no value to show.
        Such a poll is counted as a success without being run (most polls of a large address
        list): the answer must say so for certain, else the poll runs. The same as
        ``quiet_at_rest`` of ``rest(state)`` (False when that is None)."""
        ...

    def rest(self, state: TargetState | None) -> str | None:
        """``state`` in short, when it is at rest (a quiet poll leaves it as it is): what its
        next first call and ``quiet_at_rest`` need of it, a few dozen ASCII characters. A sweep
        keeps it for each target its last poll found quiet and polls from it without reading
        the state again (``watcher.service.rests``). None: not at rest."""
        ...

    def call_at_rest(self, ledger: LedgerReader, target: str, rest: str) -> Call:
        """``first_call`` of the state ``rest`` was made of."""
        ...

    def quiet_at_rest(self, rules: Sequence[Any], target: str, rest: str, answer: Any) -> bool:
        """``quiet`` of the state ``rest`` was made of."""
        ...


# A kind's share of a shared source's step (pure): the rules of the target, the target, the
# state the source hands it, the answer and the time -> its state and its alerts. What state a
# part is handed, and where its result is kept, is the source's rule (``composed``).
Part = Callable[[Sequence[Any], str, TargetState | None, Observation, float], StepOutcome]


@runtime_checkable
class SharedSource(Protocol[Observation]):
    """A source several kinds ride (``votes``, ``accounts``), each handing it its *part* (its
    pure share of the step: ``Kind.part``). The registry composes it once, when it is built
    (``watcher.kinds.sources_of``): ``composed`` returns the source serving those parts, by
    kind name, in the registry's order; the source a kind module names holds none (importing
    a kind changes nothing)."""

    def composed(self, parts: Mapping[str, Part[Observation]]) -> Source[Observation]: ...


@runtime_checkable
class Graphed(Protocol):
    """A source whose accepted answers show values on ``/metrics``: ``metric_values`` maps one,
    with the rules watching its target, to samples (``watcher.kinds.toolkit.metric_values``)."""

    @property
    def metric_values(self) -> Sampler: ...


class Slotless:
    """For a source whose answers carry no slot (the DAS methods, a signature listing): it shows
    no tip (a subclass still says what it doubts)."""

    def tip(self, observation: object) -> int | None:
        return None


class HasSlot(Protocol):
    @property
    def slot(self) -> int | None: ...  # the answer's context slot


Slotted = TypeVar("Slotted", bound=HasSlot)


class ContextSlotted(Generic[Slotted]):
    """For a source whose answers (``Slotted``) carry their context slot: that slot is its tip,
    and an answer read at a slot older than the one stored with the state (``"slot"``) is
    stale."""

    def tip(self, observation: Slotted) -> int | None:
        return observation.slot

    def doubt(
        self,
        state: TargetState | None,
        observation: Slotted,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        return older_slot((state or {}).get("slot"), observation.slot)


Model = TypeVar("Model", bound=RuleBase)


def rules_of(rules: Iterable[Any], model: type[Model]) -> list[Model]:
    """The rules of one kind among those a step is handed (every rule of the target)."""
    return [rule for rule in rules if isinstance(rule, model)]


def watching(rules: Iterable[Any], model: type[Model], target: str) -> list[Model]:
    """The rules of one kind watching ``target`` (among their ``targets``)."""
    return [rule for rule in rules if isinstance(rule, model) and target in rule.target_set]


def baselines(state: TargetState | None) -> tuple[frozenset[str], int]:
    """A snapshot kind's bookkeeping, read from its state: the rules that have seen its baseline
    (``"rules"``: only they are told of changes) and the number of this snapshot (``"seq"``, one
    more than the last: it names the snapshot's alerts)."""
    return frozenset((state or {}).get("rules", ())), int((state or {}).get("seq", 0)) + 1


def baselines_state(seen: frozenset[str], watching: Iterable[str], seq: int) -> dict[str, Any]:
    """That bookkeeping for the next state: the rules ``seen`` and those ``watching`` now (they
    have seen this snapshot), and ``seq``."""
    return {"rules": sorted(seen | set(watching)), "seq": seq}


@dataclass(frozen=True)
class Named:
    """One thing a digest names (an alert's subject, a signature...): its key, shortened in the
    list with its explorer link (``link``: "tx" or "address"; "": none, the key in full)
    carrying the full value, with its label (the address book's, for the key or one of
    ``aliases``: a validator by vote or identity); ``detail``: what else its line says;
    ``noun``: what an alert's subject is (``Collection``; default: the kind's subject word)."""

    key: str
    link: str = "tx"
    detail: str = ""
    aliases: tuple[str, ...] = ()
    noun: str = ""


@dataclass(frozen=True)
class DigestWords:
    """How a digest of one kind counts: what its alerts add up to, and what a subject is."""

    item: tuple[str, str]  # singular, plural
    subject: tuple[str, str]
    count: Callable[[Mapping[str, Any]], int]
    # How one alert is listed; None: by its title.
    line: Callable[[Mapping[str, Any]], str] | None = None
    # What one alert names one by one (its signatures...); set: a digest lists each alert's
    # named items under its title (and its subject), up to a cap of items.
    names: Callable[[Mapping[str, Any]], Sequence[Named]] | None = None
    # How a digest names one alert's subject; None: the alert's ``subject`` as an address.
    # Returning None: the line already names it.
    subject_named: Callable[[Mapping[str, Any]], Named | None] | None = None


def count_listed(key: str) -> Callable[[Mapping[str, Any]], int]:
    """A ``DigestWords.count``: the items an alert lists under ``key`` (one at least)."""
    return lambda facts: len(facts.get(key) or ()) or 1


@dataclass(frozen=True)
class Kind(Generic[Observation]):
    """One watch kind, generic in its source's observation (``Kind[VoteAccounts]``): its rule
    model, the source it rides on, its default wording (facts -> title, body) and, for event
    kinds, the words of its digests."""

    model: type[RuleBase]
    source: Source[Observation]
    wording: Wording
    # Its share of a shared source's step (``SharedSource``), handed to the source when the
    # registry is built; None: it rides a source of its own.
    part: Part[Observation] | None = None
    digest: DigestWords | None = None
    # Alerts of every transition of the kind for a rule, as facts: ``watcher check`` renders
    # the rule's templates against them (``watcher.checks.templates``).
    samples: Callable[[Any], list[AlertMessage]] | None = None

    @property
    def name(self) -> str:
        return self.model.kind_name()
