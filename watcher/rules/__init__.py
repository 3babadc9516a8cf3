"""Rules: the file format (``schema``) and reading files with ``FILE:LINE`` errors (``loader``)."""

from watcher.rules.loader import Routing, channels_of, load_rules, read_rules
from watcher.rules.schema import (
    RULE_MODELS,
    SOURCE_OF_KIND,
    AnyRule,
    DelinquentValidatorsRule,
    EventRule,
    HolderChangesRule,
    NewTransactionsRule,
    Rule,
    StateRule,
    VersionDriftRule,
)

__all__ = [
    "RULE_MODELS",
    "SOURCE_OF_KIND",
    "AnyRule",
    "DelinquentValidatorsRule",
    "EventRule",
    "HolderChangesRule",
    "NewTransactionsRule",
    "Routing",
    "Rule",
    "StateRule",
    "VersionDriftRule",
    "channels_of",
    "load_rules",
    "read_rules",
]
