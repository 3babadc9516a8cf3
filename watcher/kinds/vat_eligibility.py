"""Kind ``vat_eligibility``: would a watched validator fail the validator admission ticket (VAT,
SIMD-0357) at the next epoch boundary? (source ``vat``, one target per watched validator).

At an epoch boundary the cluster picks the vote accounts that take part in the epoch after the
next one: a vote account with activated stake above zero, at least the rent-exempt minimum of a
vote account plus 1.6 SOL in its balance (agave: ``minimum_vote_account_balance_for_vat``), and a
place among the 2,000 such accounts with the most stake, where stake tied with the first one
left out is left out too (agave: ``clone_and_filter_for_vat``). Its rank here counts the vote
accounts whose stake is at least its own (ties against it): it passes the cut exactly when that
rank is at most ``max_rank`` (``standing``). Ranked among every staked vote account of
getVoteAccounts: the balances and BLS keys of the others cannot be seen, so the rank shown is
the worst it can be (docs/rules.md says what else cannot be seen).

Observation (``VatObservation``): the getVoteAccounts answer (one call shared by the polls of a
tick and the other sources reading it, ``watcher.kinds.sources.vote_accounts``) and the watched vote
account itself, read with getMultipleAccounts through the reader's account batcher (the
calls of ``balance_below``); its context slot says where the epoch stands. State: ``{"v": 1,
"slot": ..., "accounts": ..., "current": ..., "episodes": ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field

from watcher.alerting import messages
from watcher.alerting.lifecycle import Assessment, step_episodes
from watcher.config import rule_models
from watcher.config.rule_models import PositiveDuration, Pubkeys
from watcher.core.events import AlertMessage, StepOutcome, TargetState
from watcher.core.lamports import LAMPORTS_PER_SOL
from watcher.kinds import base
from watcher.kinds.delinquent_validators import classify_validators
from watcher.kinds.sources import vote_accounts
from watcher.kinds.toolkit.alert_samples import episode_samples, sample_account, sample_key
from watcher.kinds.toolkit.cluster import vote_account_counts, vote_accounts_doubt
from watcher.kinds.toolkit.metric_values import Sample, sol
from watcher.kinds.toolkit.vat_ticket import (
    MAINNET_SLOT_SECONDS,
    MAINNET_SLOTS_PER_EPOCH,
    MAX_RANK,
    VAT_SOL,
    VOTE_RENT_EXEMPT_LAMPORTS,
    Standing,
    next_boundary,
    standing,
)
from watcher.kinds.toolkit.vat_words import vat_text
from watcher.ledger.models import VoteAccount, VoteAccounts
from watcher.ledger.models_accounts import Account
from watcher.ledger.plausibility import Doubt, SlotTip, older_slot

KIND_NAME = "vat_eligibility"
STATE_VERSION = 1
VOTE_PROGRAM = "Vote111111111111111111111111111111111111111"

Condition = Literal["no_stake", "balance", "rank"]


class VatEligibilityRule(rule_models.StateRule):
    kind: Literal["vat_eligibility"] = "vat_eligibility"
    validators: Pubkeys  # vote account or identity pubkeys
    min_vote_balance_sol: Annotated[float, Field(ge=0, allow_inf_nan=False)] = VAT_SOL
    max_rank: Annotated[int, Field(strict=True, ge=1)] = MAX_RANK
    # Warn while the rank is within this many places of the cut (0: only when past it).
    warn_rank_margin: Annotated[int, Field(strict=True, ge=0)] = 0
    # The cluster's epoch schedule (mainnet's by default); first_normal_slot: where the
    # schedule's full-length epochs start (524,256 on a cluster with warm-up epochs).
    slots_per_epoch: Annotated[int, Field(strict=True, ge=1)] = MAINNET_SLOTS_PER_EPOCH
    first_normal_slot: Annotated[int, Field(strict=True, ge=0)] = 0
    slot_time: PositiveDuration = MAINNET_SLOT_SECONDS
    every: PositiveDuration = 60.0

    @property
    def watched(self) -> tuple[str, ...]:
        return self.validators

    @property
    def targets(self) -> tuple[str, ...]:
        return self.validators

    @property
    def min_balance(self) -> int:
        """Lamports the vote account needs: the rent-exempt minimum plus the minimum above it."""
        above = int(Decimal(str(self.min_vote_balance_sol)) * LAMPORTS_PER_SOL)
        return VOTE_RENT_EXEMPT_LAMPORTS + above


# -- the source ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VatObservation:
    """getVoteAccounts, and the watched validator's vote account (``vote_pubkey``; ``account``
    None: no such account) read at ``slot``; ``vote_pubkey`` None: no vote account to read."""

    votes: VoteAccounts
    vote_pubkey: str | None
    account: Account | None
    slot: int | None


def vote_pubkey_of(watched: str, votes: VoteAccounts) -> str | None:
    """The vote account of a watched vote or identity pubkey (an identity's most staked one);
    None: in neither list."""
    return classify_validators([watched], votes)[watched].vote_pubkey


def vat_samples(
    rules: Sequence[Any], target: str, observation: VatObservation
) -> tuple[Sample, ...]:
    """Source ``vat`` (one watched validator): its rank by activated stake, the stake it lacks
    to reach the cut (of the strictest ``max_rank`` watching it), its vote account's balance
    against the strictest minimum, and the time to the next boundary. No stake: no rank nor
    gap; no vote account to read: no balance; no slot read: no time to the boundary."""
    mine = [rule for rule in rules if isinstance(rule, VatEligibilityRule)]
    if not mine:
        return ()
    max_rank = min(rule.max_rank for rule in mine)
    ticket = ticket_of(target, observation, max_rank)
    vote = ticket.vote.vote_pubkey if ticket.vote is not None else observation.vote_pubkey
    keys = (vote or target, ticket.vote.node_pubkey if ticket.vote is not None else "")
    samples: list[Sample] = []
    if ticket.standing is not None:
        samples.append(Sample("solana_validator_vat_rank", keys, ticket.standing.rank, target))
        if ticket.standing.cut_stake is not None:
            gap = sol(ticket.standing.gap)
            samples.append(Sample("solana_validator_vat_stake_gap", keys, gap, target))
    if ticket.balance is not None:
        balance = sol(ticket.balance)
        samples.append(Sample("solana_validator_vote_account_balance", keys, balance, target))
        minimum = sol(max(rule.min_balance for rule in mine))
        samples.append(Sample("solana_validator_vat_min_vote_balance", keys, minimum, target))
    schedule = mine[0]  # the cluster's epoch schedule: the same in every rule of one cluster
    if observation.slot is not None:
        boundary = next_boundary(
            observation.slot, schedule.slots_per_epoch, schedule.first_normal_slot
        )
        if boundary is not None:
            seconds = boundary.slots_left * schedule.slot_time
            samples.append(Sample("solana_validator_vat_boundary_seconds", keys, seconds, target))
    return tuple(samples)


class VatSource:
    metric_values = staticmethod(vat_samples)  # what /metrics shows of an answer
    name = "vat"
    # Its vote account through the reader's account batcher (up to 100 keys a call); the
    # getVoteAccounts of a tick, shared.
    facts = base.SourceFacts(
        ("getVoteAccounts", "getMultipleAccounts"), keys_per_call=100, per_tick=("getVoteAccounts",)
    )
    rule_kinds: tuple[str, ...] = (KIND_NAME,)

    async def observe(
        self, ledger: base.LedgerReader, target: str, state: TargetState | None
    ) -> VatObservation:
        votes = await vote_accounts.read(ledger)
        # Not in getVoteAccounts: the watched key may still be an unstaked vote account.
        vote = vote_pubkey_of(target, votes) or target
        read = await ledger.shared_reads.accounts.read(vote)
        account = read.account
        if account is not None and account.owner != VOTE_PROGRAM:
            return VatObservation(votes, None, None, read.slot)
        return VatObservation(votes, vote, account, read.slot)

    def tip(self, observation: VatObservation) -> int | None:
        return observation.slot

    def doubt(
        self,
        state: TargetState | None,
        observation: VatObservation,
        now: float,
        tip: SlotTip | None = None,
    ) -> Doubt | None:
        return vote_accounts_doubt(state, observation.votes) or older_slot(
            (state or {}).get("slot"), observation.slot
        )

    def step(
        self,
        rules: Sequence[Any],
        target: str,
        state: TargetState | None,
        observation: VatObservation,
        now: float,
    ) -> StepOutcome:
        mine = base.watching(rules, VatEligibilityRule, target)

        def assess(rule: VatEligibilityRule) -> Mapping[str, Assessment]:
            return {target: vat_assessment(rule, target, observation)}

        outcome = step_episodes(mine, state, now, assess)
        new_state = {**(state or {}), **outcome.state, "v": STATE_VERSION}
        new_state.update(vote_account_counts(observation.votes))
        if observation.slot is not None:
            new_state["slot"] = observation.slot
        escalations = escalate(mine, target, state, outcome, now)
        if escalations:
            told = dict(new_state.get("escalated", {}))
            told.update({alert.rule: alert.facts["episode"] for alert in escalations})
            new_state["escalated"] = told
        return StepOutcome(new_state, outcome.alerts + escalations)


def escalate(
    rules: Sequence[VatEligibilityRule],
    target: str,
    state: TargetState | None,
    outcome: StepOutcome,
    now: float,
) -> tuple[AlertMessage, ...]:
    """A validator that fired near the cut (``warn_rank_margin``) and now would fail the
    ticket, while the same episode fires: said once per episode (a reminder, ``escalated``),
    not left to the next ``repeat``. Pure."""
    before = (state or {}).get("episodes", {})
    told = (state or {}).get("escalated", {})
    said = {(alert.rule, alert.subject) for alert in outcome.alerts}
    out: list[AlertMessage] = []
    for rule in rules:
        was = before.get(rule.name, {}).get(target) or {}
        now_ep = outcome.state["episodes"].get(rule.name, {}).get(target) or {}
        details: dict[str, Any] = now_ep.get("details") or {}
        if (
            was.get("status") == now_ep.get("status") == "firing"
            and (rule.name, target) not in said
            and not (was.get("details") or {}).get("failing")
            and details.get("failing")
            and told.get(rule.name) != now_ep.get("number")
        ):
            facts = messages.episode_facts(details, {}, now_ep, "repeat", now) | {"escalated": True}
            key = f"{rule.name}|{target}|{now_ep.get('number')}|escalated"
            out.append(
                messages.make_alert(
                    rule, subject=target, reason="repeat", dedup_key=key, facts=facts
                )
            )
    return tuple(out)


SOURCE = VatSource()


@dataclass(frozen=True)
class Ticket:
    """A validator against the ticket: what each condition shows (pure values)."""

    vote: VoteAccount | None  # its entry in getVoteAccounts; None: in neither list
    balance: int | None  # its vote account's lamports; None: not seen
    standing: Standing | None  # None: no stake to rank
    staked: int  # vote accounts with stake


def ticket_of(watched: str, observation: VatObservation, max_rank: int) -> Ticket:
    accounts = (*observation.votes.current, *observation.votes.delinquent)
    vote = next((a for a in accounts if a.vote_pubkey == observation.vote_pubkey), None)
    if vote is None and observation.vote_pubkey is None:
        found = [a for a in accounts if watched in (a.vote_pubkey, a.node_pubkey)]
        vote = max(found, key=lambda a: a.activated_stake, default=None)
    balance: int | None = None
    if observation.vote_pubkey is not None:
        balance = observation.account.lamports if observation.account is not None else 0
    staked = [a.activated_stake for a in accounts if a.activated_stake > 0]
    place = None
    if vote is not None and vote.activated_stake > 0:
        others = [a.activated_stake for a in accounts if a is not vote]
        place = standing(vote.activated_stake, others, max_rank)
    return Ticket(vote, balance, place, len(staked))


def vat_assessment(rule: VatEligibilityRule, watched: str, obs: VatObservation) -> Assessment:
    """Would the validator fail the ticket at the next boundary (or, with ``warn_rank_margin``,
    is it that close to the cut), and the facts that tell each condition."""
    ticket = ticket_of(watched, obs, rule.max_rank)
    failing: list[Condition] = []
    stake = ticket.vote.activated_stake if ticket.vote is not None else 0
    if stake == 0:
        failing.append("no_stake")
    minimum = rule.min_balance
    if ticket.balance is not None and ticket.balance < minimum:
        failing.append("balance")
    place = ticket.standing
    if place is not None and not place.passes(rule.max_rank):
        failing.append("rank")
    near = (
        not failing
        and place is not None
        and rule.warn_rank_margin > 0
        and place.rank > rule.max_rank - rule.warn_rank_margin
    )
    boundary = (
        None
        if obs.slot is None
        else next_boundary(obs.slot, rule.slots_per_epoch, rule.first_normal_slot)
    )
    facts: dict[str, Any] = {
        "vote_pubkey": obs.vote_pubkey or (ticket.vote.vote_pubkey if ticket.vote else None),
        "node_pubkey": ticket.vote.node_pubkey if ticket.vote is not None else None,
        "activated_stake": stake,
        "failing": failing,
        "near_cut": near,
        "balance": ticket.balance,
        "min_balance": minimum,
        "rent_exempt": VOTE_RENT_EXEMPT_LAMPORTS,
        "balance_short": None if ticket.balance is None else max(0, minimum - ticket.balance),
        "rank": place.rank if place is not None else None,
        "max_rank": rule.max_rank,
        "warn_rank_margin": rule.warn_rank_margin,
        "staked_accounts": ticket.staked,
        "cut_stake": place.cut_stake if place is not None else None,
        "stake_gap": place.gap if place is not None else None,
        "slot": obs.slot,
        "epoch": boundary.epoch if boundary is not None else None,
        "boundary_slot": boundary.next_slot if boundary is not None else None,
        "slots_left": boundary.slots_left if boundary is not None else None,
        "seconds_left": (
            None if boundary is None else round(boundary.slots_left * rule.slot_time, 1)
        ),
    }
    return bool(failing) or near, facts


def samples(rule: VatEligibilityRule) -> list[AlertMessage]:
    """The rule's first validator's vote account drained under the minimum, then topped up."""
    watched = rule.validators[0]
    others = [
        VoteAccount(
            vote_pubkey=sample_key(f"vote {n}"),
            node_pubkey=sample_key(f"node {n}"),
            activated_stake=10**15,
            last_vote=5000,
        )
        for n in range(3)
    ]
    mine = VoteAccount(
        vote_pubkey=watched, node_pubkey=sample_key("node"), activated_stake=10**14, last_vote=5000
    )
    votes = VoteAccounts(current=[*others, mine], delinquent=[])

    def answer(bad: bool) -> VatObservation:
        lamports = rule.min_balance - (10**8 if bad else -(10**9))
        account = sample_account(lamports, owner=VOTE_PROGRAM)
        return VatObservation(votes, watched, account, 300_000_123)

    return episode_samples(
        rule, lambda state, bad, now: SOURCE.step([rule], watched, state, answer(bad), now)
    )


KIND = base.Kind(model=VatEligibilityRule, source=SOURCE, wording=vat_text, samples=samples)
