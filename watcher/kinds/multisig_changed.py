"""Kind ``multisig_changed``: a watched Squads v4 multisig's members added or removed, a
member's permissions, its threshold, its time lock or its config authority changed (source
``multisig_powers``: getMultipleAccounts of the rule's multisigs, decoded as Squads v4's
``Multisig`` account, ``watcher.kinds.toolkit.layouts.decode_multisig``). Its transaction counters
are not powers: they move with every transaction and are not compared. The inventory (members and
threshold), the "cannot be verified" alert and the state: ``watcher.kinds.sources.powers``.
"""

from __future__ import annotations

from typing import Any, Literal

from watcher.config.rule_models import Pubkeys
from watcher.core.clock import human_duration
from watcher.core.events import AlertMessage
from watcher.kinds.sources import powers
from watcher.kinds.toolkit.alert_samples import sample_key
from watcher.kinds.toolkit.layouts import decode_multisig

# Squads v4's permission bits (`Permission`: Initiate 1, Vote 2, Execute 4).
PERMISSIONS = ((1, "initiate"), (2, "vote"), (4, "execute"))


class MultisigChangedRule(powers.PowersRule):
    kind: Literal["multisig_changed"] = "multisig_changed"
    multisigs: Pubkeys

    @property
    def watched(self) -> tuple[str, ...]:
        return self.multisigs


SOURCE = powers.PowersSource(
    "multisig_powers",
    "multisig_changed",
    powers.decoding_reader(decode_multisig, "Squads v4 multisig"),
)


def permissions_text(mask: int) -> str:
    named = [name for bit, name in PERMISSIONS if mask & bit]
    return ", ".join(named) if named else "no permissions"


def _show(name: str, value: Any) -> str | None:
    if name == "members":
        if isinstance(value, dict):
            listed = (f"{key} ({permissions_text(int(mask))})" for key, mask in value.items())
            return "; ".join(listed) or "none"
        return "not a member" if value is None else permissions_text(int(value))
    if name == "time_lock" and value is not None:
        return human_duration(float(value)) if value else "none"
    if name == "config_authority" and value is None:
        return "none (autonomous: changes go through the members' vote)"
    return None


WORDS = powers.PowersWords(
    thing="multisig",
    labels={
        "threshold": "threshold",
        "members": "members",
        "time_lock": "time lock",
        "config_authority": "config authority",
    },
    show=_show,
)


def samples(rule: MultisigChangedRule) -> list[AlertMessage]:
    """A member added and the threshold raised, the inventory, a multisig that cannot be
    verified."""
    members = {sample_key("member 1"): 7, sample_key("member 2"): 7}
    first = {"threshold": 2, "time_lock": 0, "config_authority": None, "members": members}
    later = {**first, "members": {**members, sample_key("member 3"): 2}}
    return powers.walk_samples(SOURCE, rule, first, later)


KIND = powers.powers_kind(
    MultisigChangedRule,
    SOURCE,
    WORDS,
    samples,
    ("multisig change", "multisig changes"),
    ("multisig", "multisigs"),
)
