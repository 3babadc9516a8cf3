"""The rule test file format (``watcher test``; docs/rules.md, "Rule tests").

```yaml
rule_files: [../treasury.yaml]          # relative to this file
ledger:                                 # the ledger before step 1 (all keys optional)
  from: empty                           # or mainnet: the recorded mainnet cluster
  transactions: {ADDRESS: 3}            # addresses with existing history
  holders: [{mint: MINT, decimals: 6, accounts: {TOKEN_ACCOUNT: 1000000}}]
  validators: [{vote: VOTE, identity: IDENTITY, stake: 1000000000, delinquent: false}]
  nodes: [{identity: IDENTITY, version: 2.3.6, feature_set: 3640012085}]
  accounts: [{address: ADDRESS, lamports: 5000000000, owner: PROGRAM, data: v1, executable: no}]
  fee: {per_signature: 5000, expired: false}   # getFeeForMessage; expired: blockhashes expired
  token_accounts: [{address: ACCOUNT, mint: MINT, owner: OWNER, frozen: false, delegate: null}]
steps:
  - name: baseline
    expect: []                          # nothing may be notified
  - wait: 2m                            # time passes first, then the actions, then one poll
    actions:
      - add_transactions: {address: ADDRESS, count: 2}
      # validators: update_validator: {validator: VOTE, behind: 60, credits: 5000,
      #   commission: 10, stake: 10}; halt_cluster: true (no slot passes) / false
    expect:
      - {rule: treasury, reason: event, subject: ADDRESS, title_contains: 2 new}
```

Actions: one key each, named after the simulator's Ledger method (``add_transactions``,
``set_holders``, ``set_holder_amount``, ``remove_holder``, ``set_validator``, ``mark_delinquent``,
``mark_current``, ``remove_validator``, ``set_node``, ``remove_node``) or account book's
(``set_account``: an account's keys given change, the rest stay; ``data`` is text, stored as
its UTF-8 bytes; ``remove_account``; ``set_fee``).

Every mapping refuses unknown keys; problems are reported as ``FILE:LINE: message``.
Token-account and asset seeds and actions (``set_token_account``, ``close_token_account``,
``set_asset``, ``set_program_account``, ``close_program_account``, ``print_edition``):
``watcher.ruletest.das_format``; nonce accounts (``set_nonce_account``,
``close_nonce_account``): ``watcher.ruletest.authority_format``; transfers (``transfer``,
``dust``): ``watcher.ruletest.transfer_format``. Every mapping refuses
unknown keys; problems are reported as ``FILE:LINE: message``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from watcher.config.rule_models import Duration, Pubkey
from watcher.config.yamlpos import (
    YamlDocument,
    describe_value,
    error_loc,
    error_message,
    format_loc,
    keys_at,
    load_yaml,
    unknown_key_message,
    user_errors,
)
from watcher.core.errors import ConfigError, Problem
from watcher.core.events import BELOW_THRESHOLD_FACT, Reason
from watcher.core.outbox_rows import AlertRecord
from watcher.ruletest.authority_format import (
    MintChange,
    MultisigChange,
    NonceAccountChange,
    ProgramChange,
)
from watcher.ruletest.das_format import (
    AssetSeed,
    EditionsSeed,
    PrintEdition,
    ProgramAccountKey,
    ProgramAccountSeed,
    TokenAccountChange,
    TokenAccountSeed,
)
from watcher.ruletest.transfer_format import Dust, Transfer


def _as_list(value: object) -> object:
    # One text or a list of texts; a scalar is checked (and reported) as the list's one item.
    return value if isinstance(value, list | tuple) else [value]


Texts = Annotated[tuple[str, ...], BeforeValidator(_as_list)]
Amount = Annotated[int, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# -- the ledger and what steps do to it ------------------------------------------------------


class Holders(_Strict):
    """Every token account of a mint (raw amounts: the amount times 10^decimals)."""

    mint: Pubkey
    decimals: Annotated[int, Field(ge=0, le=18)] = 6
    accounts: dict[Pubkey, Amount]


class Validator(_Strict):
    vote: Pubkey
    identity: Pubkey
    stake: Amount  # lamports
    delinquent: bool = False
    commission: Annotated[int, Field(ge=0, le=100)] = 0


class Node(_Strict):
    """A gossip node; a key left out keeps the node's value (null is a real value)."""

    identity: Pubkey
    version: str | None = None
    feature_set: Annotated[int, Field(ge=0)] | None = None


class AddTransactions(_Strict):
    address: Pubkey
    count: Annotated[int, Field(ge=1)] = 1
    memo: str | None = None
    failed: bool = False


class HolderAmount(_Strict):
    mint: Pubkey
    account: Pubkey
    amount: Amount


class Holder(_Strict):
    mint: Pubkey
    account: Pubkey


class ValidatorUpdate(_Strict):
    """A watched validator's vote account changing; a key left out keeps its value."""

    validator: Pubkey  # vote or identity pubkey
    behind: Amount | None = None  # votes this many slots behind the tip (128 or more: delinquent)
    credits: Amount | None = None  # credits earned so far in the current epoch
    commission: Annotated[int, Field(ge=0, le=100)] | None = None
    stake: Amount | None = None  # activated stake, lamports
    balance: Amount | None = None  # its vote account's lamports


class PlainAccount(_Strict):
    """A plain account (getMultipleAccounts); a key left out keeps the account's value."""

    address: Pubkey
    lamports: Amount | None = None
    owner: Pubkey | None = None
    data: str | None = None  # text: the account's data is its UTF-8 bytes
    executable: bool | None = None


class Fee(_Strict):
    per_signature: Amount = 5000  # lamports per required signature
    expired: bool = False  # every message's blockhash has expired: the fee is null


class HolderSupply(_Strict):
    """A mint's supply: the difference is minted to (or burnt from) its largest account."""

    mint: Pubkey
    amount: Amount  # raw


class Action(_Strict):
    """One change to the ledger: exactly one key, named after the simulator's Ledger method."""

    add_transactions: AddTransactions | None = None
    set_holders: Holders | None = None
    set_holder_amount: HolderAmount | None = None
    remove_holder: Holder | None = None
    set_validator: Validator | None = None
    mark_delinquent: Pubkey | None = None  # vote or identity pubkey
    mark_current: Pubkey | None = None
    remove_validator: Pubkey | None = None
    set_node: Node | None = None
    remove_node: Pubkey | None = None
    update_validator: ValidatorUpdate | None = None
    halt_cluster: bool | None = None  # true: no slot passes (every vote stands still); false: runs
    set_account: PlainAccount | None = None
    remove_account: Pubkey | None = None
    set_fee: Fee | None = None
    set_token_account: TokenAccountChange | None = None
    close_token_account: Pubkey | None = None
    set_asset: AssetSeed | None = None
    set_program_account: ProgramAccountSeed | None = None
    close_program_account: ProgramAccountKey | None = None
    set_nonce_account: NonceAccountChange | None = None  # watcher.ruletest.authority_format
    close_nonce_account: Pubkey | None = None
    set_mint: MintChange | None = None
    set_upgradeable_program: ProgramChange | None = None
    set_multisig: MultisigChange | None = None
    print_edition: PrintEdition | None = None
    set_supply: HolderSupply | None = None
    transfer: Transfer | None = None  # watcher.ruletest.transfer_format
    dust: Dust | None = None

    @model_validator(mode="before")
    @classmethod
    def _exactly_one(cls, data: Any) -> Any:
        if isinstance(data, dict) and len(data) != 1:
            names = ", ".join(cls.model_fields)
            raise ValueError(f"write exactly one action per item (one of: {names})")
        return data


class LedgerSetup(_Strict):
    from_: Literal["empty", "mainnet"] = Field(default="empty", alias="from")
    transactions: dict[Pubkey, Annotated[int, Field(ge=1)]] = {}  # address -> how many
    holders: list[Holders] = []
    validators: list[Validator] = []
    nodes: list[Node] = []
    accounts: list[PlainAccount] = []
    fee: Fee | None = None
    token_accounts: list[TokenAccountSeed] = []  # watcher.ruletest.das_format
    assets: list[AssetSeed] = []
    program_accounts: list[ProgramAccountSeed] = []
    nonce_accounts: list[NonceAccountChange] = []  # watcher.ruletest.authority_format
    mints: list[MintChange] = []
    programs: list[ProgramChange] = []
    multisigs: list[MultisigChange] = []
    editions: list[EditionsSeed] = []


# -- expectations ----------------------------------------------------------------------------


class Expected(_Strict):
    """One notification that must happen in the step (each matches a notification of its own)."""

    rule: str
    reason: Reason
    subject: str | None = None
    title_contains: Texts = ()
    body_contains: Texts = ()
    # True: kept in the history below the rule's thresholds, not notified (a plain expectation
    # never matches one, and one nobody expected fails the step as a notification would).
    below_threshold: bool = False

    def matches(self, record: AlertRecord) -> bool:
        return (
            (BELOW_THRESHOLD_FACT in record.alert.facts) == self.below_threshold
            and record.alert.rule == self.rule
            and record.alert.reason == self.reason
            and (self.subject is None or record.alert.subject == self.subject)
            and all(text in record.alert.title for text in self.title_contains)
            and all(text in record.alert.body for text in self.body_contains)
        )

    def describe(self) -> str:
        parts = [f"rule {self.rule}", f"reason {self.reason}"]
        if self.subject is not None:
            parts.append(f"subject {self.subject}")
        parts.extend(f"title containing {text!r}" for text in self.title_contains)
        parts.extend(f"body containing {text!r}" for text in self.body_contains)
        if self.below_threshold:
            parts.append("below the threshold")
        return ", ".join(parts)


class Step(_Strict):
    name: str | None = None
    wait: Duration = 0.0  # time passing before the actions
    actions: list[Action] = []
    expect: list[Expected]  # [] means: nothing may be notified in this step


class RuleTestFile(_Strict):
    rule_files: Annotated[list[str], Field(min_length=1)]
    ledger: LedgerSetup = LedgerSetup()
    steps: Annotated[list[Step], Field(min_length=1)]


# -- reading ---------------------------------------------------------------------------------


def read_test_file(path: Path) -> tuple[YamlDocument, RuleTestFile]:
    """Read and validate a test file. Raises ``ConfigError`` listing every problem."""
    document = load_yaml(path)
    if document.data is None:
        raise ConfigError([Problem(document.file, None, "empty file: expected a rule test")])
    if not isinstance(document.data, dict):
        got = describe_value(document.data)
        message = f"expected a mapping (rule_files, ledger, steps), got {got}"
        raise ConfigError([document.problem((), message)])
    try:
        test = RuleTestFile.model_validate(document.data)
    except ValidationError as exc:
        problems = [
            document.problem(error_loc(error), _message(error)) for error in user_errors(exc)
        ]
        raise ConfigError(sorted(problems, key=lambda problem: problem.line or 0)) from None
    return document, test


def _message(error: Any) -> str:
    loc = error_loc(error)
    if error["type"] != "extra_forbidden":
        return error_message(error, RuleTestFile)
    # keys_at walks models by field name: list positions are not fields.
    known = keys_at(RuleTestFile, tuple(part for part in loc[:-1] if isinstance(part, str)))
    where = format_loc(loc[:-1])
    text = unknown_key_message(loc[-1], known)
    return f"{where}: {text}" if where else text
