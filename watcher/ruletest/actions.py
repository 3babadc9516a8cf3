"""What a rule test's actions (and ``watcher simulate``'s control endpoint) do to the simulated
ledger: one ``Action`` (``watcher.ruletest.format``) applied, or refused with the line it was
written on."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from watcher.config.yamlpos import Loc, YamlDocument, format_loc
from watcher.core.errors import ConfigError
from watcher.ruletest.authority_format import (
    authority_change,
    seed_mint,
    seed_multisig,
    seed_nonce_account,
    seed_program,
)
from watcher.ruletest.das_format import (
    das_change,
    seed_asset,
    seed_editions,
    seed_program_account,
    seed_token_account,
)
from watcher.ruletest.fields import given
from watcher.ruletest.format import Action, LedgerSetup
from watcher.ruletest.transfer_format import transfer_change
from watcher.simulator import Ledger

T = TypeVar("T")

# What a failed transaction reports as its error (a custom program error, as on mainnet).
FAILED_TRANSACTION_ERROR = {"InstructionError": [0, {"Custom": 1}]}


def apply_action(ledger: Ledger, action: Action, document: YamlDocument, loc: Loc) -> None:
    """Applies one action; ``ConfigError`` at the action's line when the ledger refuses it
    (a mint, validator or node it does not have)."""
    _apply(ledger, action, document, loc)


def seed_ledger(setup: LedgerSetup, ledger: Ledger, document: YamlDocument) -> None:
    """Seeds the ledger as a test file's (or the control endpoint's) ``ledger:`` section says."""
    for address, count in setup.transactions.items():
        ledger.add_transactions(address, count)
    for index, holders in enumerate(setup.holders):
        loc = ("ledger", "holders", index)
        apply_action(ledger, Action(set_holders=holders), document, loc)
    for index, validator in enumerate(setup.validators):
        loc = ("ledger", "validators", index)
        apply_action(ledger, Action(set_validator=validator), document, loc)
    for index, node in enumerate(setup.nodes):
        apply_action(ledger, Action(set_node=node), document, ("ledger", "nodes", index))
    for index, account in enumerate(setup.accounts):
        loc = ("ledger", "accounts", index)
        apply_action(ledger, Action(set_account=account), document, loc)
    if setup.fee is not None:
        apply_action(ledger, Action(set_fee=setup.fee), document, ("ledger", "fee"))
    _seed_each(ledger, setup.token_accounts, seed_token_account)
    _seed_each(ledger, setup.assets, seed_asset)
    _seed_each(ledger, setup.program_accounts, seed_program_account)
    _seed_each(ledger, setup.editions, seed_editions)
    _seed_each(ledger, setup.nonce_accounts, seed_nonce_account)
    _seed_each(ledger, setup.mints, seed_mint)
    _seed_each(ledger, setup.programs, seed_program)
    _seed_each(ledger, setup.multisigs, seed_multisig)


def _seed_each(ledger: Ledger, seeds: Iterable[T], seed: Callable[[Ledger, T], None]) -> None:
    """Seeds the ledger with each of one section's ``seeds``, by ``seed``."""
    for one in seeds:
        seed(ledger, one)


def apply_to(ledger: Ledger, action: Action) -> list[str]:
    """Applies one action outside a test file (``watcher simulate``'s control endpoint);
    returns the signatures it landed that the action cannot name itself (a transfer's),
    newest first; ``LookupError``/``ValueError`` when the ledger refuses it."""
    _change(ledger, action)
    das_change(ledger, action)
    authority_change(ledger, action)
    return transfer_change(ledger, action)


def _apply(ledger: Ledger, action: Action, document: YamlDocument, loc: Loc) -> None:
    try:
        apply_to(ledger, action)
    except (LookupError, ValueError) as exc:
        reason = exc.args[0] if exc.args else type(exc).__name__
        message = f"{format_loc(loc)}: the ledger refused this: {reason}"
        raise ConfigError([document.problem(loc, message)]) from None


def _change(ledger: Ledger, action: Action) -> None:
    if action.add_transactions is not None:
        add = action.add_transactions
        error = FAILED_TRANSACTION_ERROR if add.failed else None
        ledger.add_transactions(add.address, add.count, err=error, memo=add.memo)
    elif action.set_holders is not None:
        holders = action.set_holders
        ledger.set_holders(holders.mint, holders.accounts.items(), decimals=holders.decimals)
    elif action.set_holder_amount is not None:
        amount = action.set_holder_amount
        ledger.set_holder_amount(amount.mint, amount.account, amount.amount)
    elif action.remove_holder is not None:
        ledger.remove_holder(action.remove_holder.mint, action.remove_holder.account)
    elif action.set_validator is not None:
        validator = action.set_validator
        ledger.set_validator(
            validator.vote,
            validator.identity,
            stake=validator.stake,
            delinquent=validator.delinquent,
            commission=validator.commission,
        )
    elif action.set_node is not None:
        node = action.set_node  # what is left out is kept
        ledger.set_node(node.identity, **given(node, "identity"))
    elif action.remove_node is not None:
        if ledger.node(action.remove_node) is None:
            raise KeyError(f"no gossip node {action.remove_node}")
        ledger.remove_node(action.remove_node)
    elif action.mark_delinquent is not None:
        ledger.mark_delinquent(action.mark_delinquent)
    elif action.mark_current is not None:
        ledger.mark_current(action.mark_current)
    elif action.remove_validator is not None:
        ledger.remove_validator(action.remove_validator)
    elif action.update_validator is not None:
        update = action.update_validator
        ledger.update_validator(update.validator, **given(update, "validator"))
    elif action.halt_cluster is not None:
        ledger.halt(action.halt_cluster)
    elif action.set_supply is not None:
        ledger.set_supply(action.set_supply.mint, action.set_supply.amount)
    else:
        _change_accounts(ledger, action)


def _change_accounts(ledger: Ledger, action: Action) -> None:
    if action.set_account is not None:
        account = action.set_account
        data = None if account.data is None else account.data.encode()
        ledger.accounts.set_account(
            account.address,
            lamports=account.lamports,
            owner=account.owner,
            data=data,
            executable=account.executable,
        )
    elif action.remove_account is not None:
        ledger.accounts.remove_account(action.remove_account)
    elif action.set_fee is not None:
        ledger.accounts.set_fee(action.set_fee.per_signature, expired=action.set_fee.expired)
