"""Transfers and dust on the simulated ledger, as an RPC client sees them over real HTTP: one
signature in both histories, balances before and after, the fee."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.simulator import DEMO, SCENARIOS, Ledger, SimulatorServer, Step, run_scenario
from watcher.simulator.authorities import set_mint
from watcher.simulator.das import das_of
from watcher.simulator.keys import pubkey_problem
from watcher.simulator.scenarios import TREASURY_SOL
from watcher.simulator.tokens import token_amount
from watcher.simulator.transfers import dust, lookalike, token_account_address, transfer

from support.values import key

TREASURY, PAYEE, MINT, OTHER_MINT = key("treasury"), key("payee"), key("usdc"), key("bonk")
TREASURY_USDC = key("treasury usdc account")
SOL = 1_000_000_000
FEE = 5000


class Client:
    """A JSON-RPC client of the served ledger."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=5)

    def result(self, method: str, params: list[Any]) -> Any:
        answer = self.http.post(
            self.url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        )
        assert answer.status_code == 200 and "error" not in answer.json(), answer.text
        return answer.json()["result"]

    def lamports(self, *addresses: str) -> list[int | None]:
        value = self.result("getMultipleAccounts", [list(addresses), {"encoding": "base64"}])
        return [None if account is None else account["lamports"] for account in value["value"]]

    def signatures(self, address: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.result("getSignaturesForAddress", [address])
        return found

    def tokens(self, owner: str) -> dict[str, tuple[str, int]]:
        """The owner's token accounts: address -> (mint, raw amount)."""
        answer = self.result("getTokenAccounts", [None, owner])
        return {a["address"]: (a["mint"], a["amount"]) for a in answer["token_accounts"]}


@pytest.fixture
def ledger() -> Ledger:
    ledger = Ledger(seed=11)
    ledger.accounts.set_account(TREASURY, lamports=1_200 * SOL)
    return ledger


@pytest.fixture
def client(ledger: Ledger) -> Iterator[Client]:
    with SimulatorServer(ledger) as server:
        client = Client(server.url)
        yield client
        client.http.close()


def test_a_sol_transfer_is_one_signature_on_both_sides_and_moves_the_balances(
    ledger: Ledger, client: Client
) -> None:
    assert client.lamports(TREASURY, PAYEE) == [1_200 * SOL, None]  # the payee has no account yet
    signature = transfer(ledger, TREASURY, PAYEE, 1_000 * SOL)

    sent, received = client.signatures(TREASURY), client.signatures(PAYEE)
    assert [e["signature"] for e in sent] == [e["signature"] for e in received] == [signature]
    assert sent[0]["slot"] == received[0]["slot"] and sent[0]["err"] is None
    # The source pays the amount and the fee; the payee gets the amount.
    assert client.lamports(TREASURY, PAYEE) == [200 * SOL - FEE, 1_000 * SOL]
    info = client.result("getAccountInfo", [PAYEE, {"encoding": "base64"}])
    assert info["value"]["lamports"] == 1_000 * SOL
    assert info["context"]["slot"] >= sent[0]["slot"]  # read at or after the transfer's slot


def test_transfers_land_in_increasing_slots_newest_first(ledger: Ledger, client: Client) -> None:
    first = transfer(ledger, TREASURY, PAYEE, SOL, fee_lamports=7000)
    second = transfer(ledger, PAYEE, TREASURY, SOL // 2)
    history = client.signatures(PAYEE)
    assert [e["signature"] for e in history] == [second, first]
    assert history[0]["slot"] > history[1]["slot"]
    assert client.lamports(TREASURY, PAYEE) == [
        1_200 * SOL - SOL - 7000 + SOL // 2,
        SOL - SOL // 2 - FEE,
    ]


def test_a_token_transfer_moves_the_token_accounts_and_charges_the_fee_in_sol(
    ledger: Ledger, client: Client
) -> None:
    ledger.set_holders(MINT, [(TREASURY_USDC, 30_000 * 10**6)], decimals=6)
    das_of(ledger).set_token_account(
        TREASURY_USDC, mint=MINT, owner=TREASURY, amount=30_000 * 10**6
    )
    signature = transfer(ledger, TREASURY, PAYEE, 25_000 * 10**6, MINT)

    assert [e["signature"] for e in client.signatures(PAYEE)] == [signature]
    assert [e["signature"] for e in client.signatures(TREASURY)] == [signature]
    payee_account = token_account_address(PAYEE, MINT)  # created for the payee
    assert client.tokens(PAYEE) == {payee_account: (MINT, 25_000 * 10**6)}
    assert client.tokens(TREASURY) == {TREASURY_USDC: (MINT, 5_000 * 10**6)}
    # SOL: the fee only; the payee still has no plain account.
    assert client.lamports(TREASURY, PAYEE) == [1_200 * SOL - FEE, None]
    # The mint's own answers agree: same supply, the payee among its holders.
    supply = client.result("getTokenSupply", [MINT])["value"]
    assert (supply["amount"], supply["decimals"]) == (str(30_000 * 10**6), 6)
    balance = client.result("getTokenAccountBalance", [payee_account])["value"]
    assert balance["uiAmountString"] == "25000"


def test_a_token_transfer_adds_to_the_destinations_existing_account(
    ledger: Ledger, client: Client
) -> None:
    set_mint(ledger, OTHER_MINT, mint_authority=None)  # a mint known by its account only
    held, payee_held = key("treasury bonk"), key("payee bonk")
    das = das_of(ledger)
    das.set_token_account(held, mint=OTHER_MINT, owner=TREASURY, amount=900)
    das.set_token_account(payee_held, mint=OTHER_MINT, owner=PAYEE, amount=100)
    transfer(ledger, TREASURY, PAYEE, 400, OTHER_MINT)
    assert client.tokens(PAYEE) == {payee_held: (OTHER_MINT, 500)}
    assert client.tokens(TREASURY) == {held: (OTHER_MINT, 500)}


@pytest.mark.parametrize(
    ("amount", "mint", "refusal"),
    [
        (1_200 * SOL, None, "short of 1200000000000 lamports and the fee"),  # the fee too
        (0, None, "must be positive"),
        (1, key("no such mint"), "unknown mint"),
        (10**9, MINT, "short of 1000000000"),
    ],
)
def test_what_the_source_does_not_hold_is_refused_and_nothing_changes(
    ledger: Ledger, client: Client, amount: int, mint: str | None, refusal: str
) -> None:
    ledger.set_holders(MINT, [(TREASURY_USDC, 10**6)], decimals=6)
    das_of(ledger).set_token_account(TREASURY_USDC, mint=MINT, owner=TREASURY, amount=10**6)
    with pytest.raises(ValueError, match=refusal):
        transfer(ledger, TREASURY, PAYEE, amount, mint)
    assert client.signatures(TREASURY) == client.signatures(PAYEE) == []
    assert client.lamports(TREASURY, PAYEE) == [1_200 * SOL, None]
    assert client.tokens(TREASURY) == {TREASURY_USDC: (MINT, 10**6)}
    assert client.tokens(PAYEE) == {}


def test_a_token_transfer_needs_sol_for_the_fee(ledger: Ledger, client: Client) -> None:
    poor = key("poor owner")
    ledger.set_holders(MINT, [(key("poor usdc"), 10**6)], decimals=6)
    das_of(ledger).set_token_account(key("poor usdc"), mint=MINT, owner=poor, amount=10**6)
    with pytest.raises(ValueError, match="short of the fee"):
        transfer(ledger, poor, PAYEE, 1, MINT)
    assert client.signatures(poor) == []


def test_dust_comes_from_funded_lookalikes_and_lands_on_the_target(
    ledger: Ledger, client: Client
) -> None:
    signatures = dust(ledger, TREASURY, 5)
    history = client.signatures(TREASURY)
    assert [e["signature"] for e in history] == signatures  # newest first
    assert len(set(signatures)) == 5
    assert client.lamports(TREASURY) == [1_200 * SOL + 5]  # one lamport each
    senders = [lookalike_of(ledger, signature) for signature in signatures]
    assert len(set(senders)) == 5
    for sender in senders:
        # Same first and last four characters: what a person glancing at it checks.
        assert sender != TREASURY
        assert (sender[:4], sender[-4:]) == (TREASURY[:4], TREASURY[-4:])
        # Funded with the amount and the fee first, empty after.
        assert client.lamports(sender) == [0]
        assert len(client.signatures(sender)) == 1


def lookalike_of(ledger: Ledger, signature: str) -> str:
    """The other address listing ``signature`` (the ledger's dust senders)."""
    found = [
        address
        for address in ledger.addresses()
        if address != TREASURY and signature in {e["signature"] for e in ledger.signatures(address)}
    ]
    assert len(found) == 1
    return found[0]


def test_a_lookalike_keeps_both_ends_and_is_a_valid_other_key() -> None:
    rng = random.Random(1)
    for address in (TREASURY, PAYEE, "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"):
        other = lookalike(address, rng)
        assert other != address and (other[:4], other[-4:]) == (address[:4], address[-4:])
        assert pubkey_problem(other) is None
    # 32 zero bytes: no other 32-byte key is written "1111...1111".
    with pytest.raises(ValueError, match="no look-alike"):
        lookalike("11111111111111111111111111111111", rng)


def test_a_transfer_lands_on_cue_between_the_signature_page_and_the_balance_read(
    ledger: Ledger, client: Client
) -> None:
    # The race a watcher must count once: the page misses the transfer, the balance has it.
    ledger.faults.before("getMultipleAccounts", lambda: transfer(ledger, TREASURY, PAYEE, SOL))
    assert client.signatures(TREASURY) == []
    assert client.lamports(TREASURY) == [1_199 * SOL - FEE]
    assert len(client.signatures(TREASURY)) == 1  # the next page shows it
    assert client.lamports(TREASURY) == [1_199 * SOL - FEE]  # and it ran once


PARTIES = (TREASURY, PAYEE, key("third party"))


@given(
    st.lists(
        st.tuples(
            st.sampled_from(PARTIES),
            st.sampled_from(PARTIES),
            st.integers(min_value=1, max_value=400 * SOL),
            st.booleans(),  # SOL or the token
        ),
        max_size=12,
    )
)
def test_transfers_move_value_and_fees_only(moves: list[tuple[str, str, int, bool]]) -> None:
    """Whatever is sent, refused or not: SOL is conserved but for the fees, tokens are
    conserved, and each landed transfer is listed once on each side."""
    ledger = Ledger(seed=5)
    das = das_of(ledger)
    for party in PARTIES:
        ledger.accounts.set_account(party, lamports=500 * SOL)
        das.set_token_account(token_account_address(party, MINT), mint=MINT, owner=party, amount=0)
    ledger.set_holders(MINT, [], decimals=6)
    das.set_token_account(token_account_address(TREASURY, MINT), amount=10**12)
    landed: list[tuple[str, str, str]] = []
    for source, destination, amount, sol in moves:
        try:
            signature = transfer(ledger, source, destination, amount, None if sol else MINT)
        except ValueError:
            continue
        landed.append((signature, source, destination))

    held = [ledger.accounts.account(party) for party in PARTIES]
    assert sum(account.lamports for account in held if account) == 3 * 500 * SOL - FEE * len(landed)
    assert sum(entry.amount for entry in das.token_accounts(MINT, None)) == 10**12
    # The seeded holders (none) are not where the tokens moved from: their supply stays.
    assert ledger.token_supply(MINT) == token_amount(0, 6)
    for signature, source, destination in landed:
        for side in {source, destination}:
            listed = [e["signature"] for e in ledger.signatures(side)]
            assert listed.count(signature) == 1


def test_the_treasury_scenario_moves_what_it_says() -> None:
    scenario = SCENARIOS["treasury"]
    ledger = scenario.new_ledger(seed=3)
    with SimulatorServer(ledger) as server:
        client = Client(server.url)
        before = len(client.signatures(DEMO.treasury))
        supply = client.result("getTokenSupply", [DEMO.mint])["value"]["amount"]
        seen: list[tuple[int, int | None, dict[str, tuple[str, int]]]] = []

        def state(step: Step) -> None:
            [lamports] = client.lamports(DEMO.treasury)
            count = len(client.signatures(DEMO.treasury)) - before
            seen.append((count, lamports, client.tokens(DEMO.treasury)))

        player = run_scenario(ledger, scenario, stop=threading.Event(), speed=40, on_step=state)
        player.join(timeout=10)
        assert not player.is_alive()
        usdc = {token_account_address(DEMO.treasury, DEMO.mint): (DEMO.mint, 25_000 * 10**6)}
        assert seen == [
            (1, TREASURY_SOL - 1_000 * SOL - FEE, {}),  # 200.5 SOL left, less the fee
            (2, TREASURY_SOL - 1_000 * SOL - FEE, usdc),  # the payer paid that fee
            (52, TREASURY_SOL - 1_000 * SOL - FEE + 50, usdc),  # 50 lamports of dust
        ]
        # Tokens moved, none minted.
        assert client.result("getTokenSupply", [DEMO.mint])["value"]["amount"] == supply
        client.http.close()
