"""The registry of watch kinds: each kind is one module and one line in ``KINDS``.

A kind's module, named after the kind (``new_transactions``, ``holder_changes``,
``delinquent_validators``, ``version_drift``), holds all of it: its rule model, its source
(``observe``, the I/O edge; ``doubt`` and ``step``, pure), its default wording and its digest's
words, gathered in one ``Kind`` value (``watcher.kinds.base``). The sources several kinds share
live in ``watcher.kinds.sources``; what kinds reuse without being one (account layouts, alert
samples, the names of the /metrics values, wording helpers) in ``watcher.kinds.toolkit``.
Everything else is derived from ``KINDS``: the rule models and their discriminated union
(``AnyRule``), the sources the scheduler polls (``SOURCES``), the wording of each alert.

``KINDS`` is a module constant, the only registry: what reads it imports it (or what is derived
from it) and never takes a registry as a parameter. So the two readers of rules that need it
are here, above the rule models of ``watcher.config`` that the kinds are built on: the rule
files' loader (``watcher.kinds.rule_files``: a rule validated by its kind's model) and the rule
set (``watcher.kinds.ruleset``: rules grouped into jobs by their kinds' sources).

Why a kind *names* the source it rides on instead of being one: one RPC call must serve
every rule watching the same thing. A source is that call, per target (an address, a
mint, the ``cluster``); it is polled once per target, at the shortest ``every`` of the rules
watching it, and its ``step`` is handed every one of those rules and serves the kinds it lists
(``rule_kinds``). So two kinds reading the same answer ride one source (one ``Kind`` line each,
the same ``source``), and ``SOURCES`` still holds it once: one call per target, whatever the
number of kinds: the ``votes`` source (``watcher.kinds.sources.votes``) serves every kind reading
getVoteAccounts (``delinquent_validators``, ``cluster_stalled``, ``vote_lag``, ``credits_low``,
``stake_changed``, ``commission_changed``), each naming its part (``Kind.part``);
``balance_below`` and ``account_changed`` share the ``accounts`` source (getMultipleAccounts,
``watcher.kinds.sources.accounts``); the other kinds ride a source of their own. A shared
source is composed of its riders' parts here, when the registry is built (``sources_of``, in
``KINDS``' order): importing a kind's module changes no source.
``version_drift`` does read getVoteAccounts besides getClusterNodes, but riding the ``votes``
source would fetch the gossip table (megabytes) at the delinquency rules' pace (seconds); the
two share the pure reading of getVoteAccounts (``watcher.kinds.toolkit.cluster``), and, like
``vat_eligibility`` (one target per validator), its call: the sources reading getVoteAccounts
ask ``watcher.kinds.sources.vote_accounts``, one call per tick for all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Union

from pydantic import Field

from watcher.alerting import formatting, messages
from watcher.config.rule_models import (
    CLUSTER_DELINQUENT_STAKE,
    RPC_DISAGREEMENT,
    RPC_UNHEALTHY,
    RuleBase,
)
from watcher.config.yamlpos import keys_at
from watcher.core.events import AlertMessage
from watcher.kinds import (
    account_changed,
    asset_changed,
    balance_below,
    base,
    cluster_stalled,
    commission_changed,
    credits_low,
    delinquent_validators,
    fee_above,
    holder_changes,
    multisig_changed,
    new_assets,
    new_editions,
    new_transactions,
    nonce_accounts,
    program_accounts,
    stake_changed,
    supply_changed,
    token_accounts,
    token_authorities,
    upgrade_authority,
    vat_eligibility,
    version_drift,
    vote_lag,
)
from watcher.kinds.toolkit.metric_values import Sampler

KINDS: Mapping[str, base.Kind[Any]] = {
    kind.name: kind
    for kind in (
        new_transactions.KIND,
        holder_changes.KIND,
        delinquent_validators.KIND,
        version_drift.KIND,
        cluster_stalled.KIND,
        vote_lag.KIND,
        balance_below.KIND,
        supply_changed.KIND,
        token_accounts.KIND,
        new_assets.KIND,
        program_accounts.KIND,
        asset_changed.KIND,
        credits_low.KIND,
        stake_changed.KIND,
        commission_changed.KIND,
        fee_above.KIND,
        account_changed.KIND,
        new_editions.KIND,
        vat_eligibility.KIND,
        nonce_accounts.KIND,
        token_authorities.KIND,
        upgrade_authority.KIND,
        multisig_changed.KIND,
    )
}

# The models of every kind, by name, and their union discriminated by ``kind``.
RULE_MODELS: Mapping[str, type[RuleBase]] = {name: kind.model for name, kind in KINDS.items()}
AnyRule: Any = Annotated[
    Union[tuple(RULE_MODELS.values())],  # noqa: UP007 (a union built at run time)
    Field(discriminator="kind"),
]


def sources_of(kinds: Iterable[base.Kind[Any]]) -> dict[str, base.Source[Any]]:
    """The sources to poll, by name: each once, however many kinds ride on it; a shared source
    (``SharedSource``) composed of the parts of the kinds riding it, in their order."""
    named: dict[str, base.Source[Any]] = {}
    parts: dict[str, dict[str, base.Part[Any]]] = {}
    for kind in kinds:
        known = named.setdefault(kind.source.name, kind.source)
        if known is not kind.source:
            raise ValueError(f"two sources are named {kind.source.name!r}")
        if kind.part is not None:
            parts.setdefault(kind.source.name, {})[kind.name] = kind.part
    sources: dict[str, base.Source[Any]] = {}
    for name, source in named.items():
        if name not in parts:
            sources[name] = source
        elif isinstance(source, base.SharedSource):
            sources[name] = source.composed(parts[name])
        else:
            raise ValueError(f"kinds hand parts to {name!r}, a source that takes none")
    return sources


SOURCES: Mapping[str, base.Source[Any]] = sources_of(KINDS.values())
# What each source showing values on /metrics maps an accepted answer to (``base.Graphed``).
SAMPLERS: Mapping[str, Sampler] = {
    name: source.metric_values
    for name, source in SOURCES.items()
    if isinstance(source, base.Graphed)
}
# The built-in alerts (``watcher.alerting.builtin``) are worded like a kind's.
BUILTIN_WORDINGS: Mapping[str, messages.Wording] = {
    RPC_UNHEALTHY: messages.rpc_text,
    RPC_DISAGREEMENT: messages.disagreement_text,
    CLUSTER_DELINQUENT_STAKE: delinquent_validators.cluster_stake_text,
}


def source_of(kind: str) -> base.Source[Any]:
    """The source a rule kind rides on, as polled (``KeyError`` for an unknown kind)."""
    return SOURCES[KINDS[kind].source.name]


def wording_of(kind: str) -> messages.Wording | None:
    """The default wording of a rule kind's (or a built-in alert's) alerts."""
    known = KINDS.get(kind)
    return known.wording if known is not None else BUILTIN_WORDINGS.get(kind)


def word(
    alert: AlertMessage,
    rule: messages.PresentedRule | None,
    shown: formatting.Presentation = formatting.PLAIN,
) -> AlertMessage:
    """Word a step's alert, once: its kind's default wording or its rule's templates, with
    the address book's labels and explorer links (``shown``). ``rule``: the rule that made
    it (None: not known any more; worded minimally)."""
    return messages.word_alert(alert, rule, None if rule is None else wording_of(rule.kind), shown)


def digest_words(kind: str) -> base.DigestWords | None:
    """How a digest of a kind's alerts counts; None: the generic words."""
    known = KINDS.get(kind)
    return None if known is None else known.digest


def kinds_taking(key: str) -> list[str]:
    """The kinds whose rules accept ``key`` (to explain a key used on the wrong kind)."""
    return [name for name, model in RULE_MODELS.items() if key in keys_at(model, ())]
