"""Scripted scenarios: timed changes applied to a ledger while the simulator serves it.

A scenario seeds a ledger (``setup``), then applies its steps at their offsets from the start
(``run_scenario``, in a background thread). Slots keep advancing meanwhile (one per 400 ms), so
voting validators' ``lastVote`` moves like on a live cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from watcher.simulator.das import das_of
from watcher.simulator.das_demo import das_demo_setup
from watcher.simulator.keys import derived_pubkey
from watcher.simulator.ledger import Ledger
from watcher.simulator.nonces import nonce_demo_setup, nonce_demo_stage
from watcher.simulator.recorded import SLOT_SECONDS, top_holders
from watcher.simulator.transfers import dust, token_account_address, transfer

Action = Callable[[Ledger], object]  # return values are ignored


@dataclass(frozen=True)
class Step:
    at_seconds: float
    description: str
    action: Action


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    steps: tuple[Step, ...]
    setup: Action = field(default=lambda ledger: None)
    duration: float = 0.0  # seconds the scenario lasts; at least its last step

    def length(self) -> float:
        return max([self.duration, *(step.at_seconds for step in self.steps)])

    def new_ledger(self, *, seed: int | None = None) -> Ledger:
        """The recorded mainnet cluster, seeded by this scenario's ``setup``."""
        ledger = Ledger.from_mainnet(seed=seed)
        self.setup(ledger)
        return ledger


@dataclass(frozen=True)
class DemoCast:
    """Who the demo scenario changes (the example rules watch exactly these)."""

    treasury: str
    hot_wallet: str
    vault: str  # what rules/treasury_moves.yaml watches: amounts, and dust kept out
    mint: str
    mint_decimals: int
    holders: tuple[tuple[str, int], ...]  # the 20 seeded token accounts, largest first
    newcomer: str  # token account that enters the top 20
    grower: str  # holder whose balance grows by 30 %
    delinquent_vote: str
    delinquent_node: str
    drift_vote: str
    drift_node: str
    drift_from: str  # version the drifting node normally reports
    drift_to: str  # the version it falls back to


def _demo_cast() -> DemoCast:
    holders, _ = top_holders()  # the recorded top 20 of a real mint, reused for USDC
    return DemoCast(
        treasury="9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin",
        hot_wallet=derived_pubkey("watcher demo hot wallet"),
        vault="CuieVDEDtLo7FypA9SbLM9saXFdb1dsshEkyErMqkRQq",
        mint="EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
        mint_decimals=6,
        holders=tuple(holders),
        newcomer=derived_pubkey("watcher demo newcomer"),
        grower=holders[3][0],
        # Two current mainnet validators whose nodes reported 2.3.6 (checked by the tests).
        delinquent_vote="Va1idkzkB6LEmVFmxWbWU8Ao9qehC62Tjmf68L3uYKj",
        delinquent_node="Va1idLRtYEtVFJFsvz8vtt1uCJgea4Q1zi2Rh3eraJh",
        drift_vote="Ste11vRHQJyQjcTKrDbTWAYsTXkX6PCnoEw3mSH3u2k",
        drift_node="Ste1115xFGdAYK5jaWA3dEFcUc1S5jEbVvD8e327zty",
        drift_from="2.3.6",
        drift_to="2.3.5",
    )


DEMO: Final = _demo_cast()


def _quiet_history_setup(ledger: Ledger) -> None:
    _demo_setup(ledger)
    ledger.old_transaction_everywhere = True


def _demo_setup(ledger: Ledger) -> None:
    # History before the daemon's first poll is its baseline: it must stay quiet.
    ledger.add_transactions(DEMO.treasury, 3, memo="opening balance")
    ledger.add_transactions(DEMO.hot_wallet, 2)
    ledger.set_holders(DEMO.mint, DEMO.holders, decimals=DEMO.mint_decimals)
    das_demo_setup(ledger)  # what the asset and program example rules watch
    nonce_demo_setup(ledger)  # rules/nonces.yaml: a signer's nonce account (its inventory)


def _grow(ledger: Ledger) -> None:
    amount = ledger.holder_amount(DEMO.mint, DEMO.grower)
    ledger.set_holder_amount(DEMO.mint, DEMO.grower, amount * 13 // 10)


# Three seconds between steps so that each shows up on its own with 1 s polling.
_DEMO_STEPS = (
    Step(
        1,
        "one transaction to the treasury",
        lambda ledger: ledger.add_transactions(DEMO.treasury, 1, memo="invoice 1042"),
    ),
    Step(
        4,
        "a burst of 25 transactions from the hot wallet",
        lambda ledger: ledger.add_transactions(DEMO.hot_wallet, 25),
    ),
    Step(
        7,
        "a new token account enters the top 20 and pushes the smallest out",
        lambda ledger: ledger.set_holder_amount(DEMO.mint, DEMO.newcomer, DEMO.holders[0][1] // 2),
    ),
    Step(10, "a top holder's balance grows by 30 %", _grow),
    Step(
        13,
        "a validator stops voting (delinquent)",
        lambda ledger: ledger.mark_delinquent(DEMO.delinquent_vote),
    ),
    Step(
        16,
        f"a node falls back to {DEMO.drift_to}",
        lambda ledger: ledger.set_node(DEMO.drift_node, version=DEMO.drift_to),
    ),
    Step(19, "the validator votes again", lambda ledger: ledger.mark_current(DEMO.delinquent_vote)),
    Step(
        22,
        f"the node is back on {DEMO.drift_from}",
        lambda ledger: ledger.set_node(DEMO.drift_node, version=DEMO.drift_from),
    ),
    Step(
        25,
        "the validator raises its commission to 10 %",
        lambda ledger: ledger.update_validator(DEMO.delinquent_vote, commission=10),
    ),
    Step(28, "a durable nonce account appears on a council signer's key", nonce_demo_stage),
)

# The treasury scenario: what moves on a treasury, and the dust aimed at it.
TREASURY_SOL: Final = 1_200_500_000_000  # 1,200.5 SOL before the outflow
TREASURY_PAYEE: Final = derived_pubkey("watcher demo payee")
USDC_PAYER: Final = derived_pubkey("watcher demo usdc payer")
USDC_PAYER_AMOUNT: Final = 100_000 * 10**6  # raw, 6 decimals


def _moves_setup(ledger: Ledger, address: str, mint: str) -> None:
    """``address`` holds 1,200.5 SOL, and a payer holds 100,000 of ``mint`` to send it."""
    ledger.accounts.set_account(address, lamports=TREASURY_SOL)
    ledger.accounts.set_account(USDC_PAYER, lamports=10**9)  # its fees
    payer_account = token_account_address(USDC_PAYER, mint)
    das_of(ledger).set_token_account(
        payer_account, mint=mint, owner=USDC_PAYER, amount=USDC_PAYER_AMOUNT
    )
    ledger.set_holder_amount(mint, payer_account, USDC_PAYER_AMOUNT)


def _treasury_setup(ledger: Ledger) -> None:
    _demo_setup(ledger)
    _moves_setup(ledger, DEMO.treasury, DEMO.mint)


def _moves_steps(address: str, name: str, start: float, mint: str, token: str) -> tuple[Step, ...]:
    """What moves on ``address`` (called ``name``), from ``start``, three seconds apart: SOL
    out, 25,000 of ``mint`` (called ``token``) in, then dust."""
    return (
        Step(
            start,
            f"the {name} sends 1,000 SOL",
            lambda ledger: transfer(ledger, address, TREASURY_PAYEE, 1_000 * 10**9),
        ),
        Step(
            start + 3,
            f"the {name} receives 25,000 {token}",
            lambda ledger: transfer(ledger, USDC_PAYER, address, 25_000 * 10**6, mint),
        ),
        Step(
            start + 6,
            f"50 dust transfers to the {name} from look-alike addresses",
            lambda ledger: dust(ledger, address, 50),
        ),
    )


_TREASURY_STEPS = _moves_steps(DEMO.treasury, "treasury", 1, DEMO.mint, "USDC")
# The demo's vault receives USDT: the example whale rule watches USDC's top holders, whose story
# the transfer would change.
USDT: Final = "Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB"


def _demo_with_vault_setup(ledger: Ledger) -> None:
    _demo_setup(ledger)
    ledger.set_holders(USDT, [], decimals=6)  # the mint, known with its decimals
    _moves_setup(ledger, DEMO.vault, USDT)


SCENARIOS: Final[dict[str, Scenario]] = {
    "demo": Scenario(
        name="demo",
        summary=(
            "every rule kind fires once (and the state kinds resolve), a vault's outflow and "
            "inflow are notified with their amounts and 50 dust transfers are not, within 40 s"
        ),
        # Then rules/treasury_moves.yaml: the amounts notified, the dust kept below the
        # threshold.
        steps=(*_DEMO_STEPS, *_moves_steps(DEMO.vault, "vault", 31, USDT, "USDT")),
        setup=_demo_with_vault_setup,
        duration=37.0,
    ),
    "treasury": Scenario(
        name="treasury",
        summary="the treasury sends 1,000 SOL, receives 25,000 USDC, then 50 dust transfers",
        steps=_TREASURY_STEPS,
        setup=_treasury_setup,
        duration=7.0,
    ),
    "quiet": Scenario(
        name="quiet",
        summary="the demo's ledger, where nothing happens",
        steps=(),
        setup=_demo_setup,
    ),
    "quiet-history": Scenario(
        name="quiet-history",
        summary="the quiet ledger, where every address has one old transaction",
        steps=(),
        setup=_quiet_history_setup,
    ),
}


def run_scenario(
    ledger: Ledger,
    scenario: Scenario,
    *,
    stop: threading.Event,
    speed: float = 1.0,
    on_step: Callable[[Step], None] | None = None,
    slot_seconds: float | None = SLOT_SECONDS,
) -> threading.Thread:
    """Starts a daemon thread that applies the steps on time (offsets divided by ``speed``),
    advances a slot every ``slot_seconds`` (None: never), and ends after the scenario's length
    or as soon as ``stop`` is set. ``on_step`` is called after each applied step."""
    if speed <= 0:
        raise ValueError("speed must be positive")

    def play() -> None:
        started = time.monotonic()
        slots_done = 0
        pending = sorted(scenario.steps, key=lambda step: step.at_seconds)
        end = scenario.length() / speed
        while True:
            elapsed = time.monotonic() - started
            if slot_seconds is not None:
                due = int(elapsed * speed / slot_seconds)
                if due > slots_done:
                    ledger.tick(due - slots_done)
                    slots_done = due
            while pending and pending[0].at_seconds / speed <= elapsed:
                step = pending.pop(0)
                step.action(ledger)
                if on_step is not None:
                    on_step(step)
            if elapsed >= end and not pending:
                return
            wake = [end]
            if pending:
                wake.append(pending[0].at_seconds / speed)
            if slot_seconds is not None:
                wake.append((slots_done + 1) * slot_seconds / speed)
            if stop.wait(max(0.0, min(wake) - elapsed)):
                return

    thread = threading.Thread(target=play, name=f"scenario-{scenario.name}", daemon=True)
    thread.start()
    return thread
