"""Kind ``upgrade_authority``: a watched program's upgrade authority changed or removed (the
program made immutable), and the program redeployed (source ``program_powers``:
getMultipleAccounts of the rule's programs, decoded as the upgradeable loader's ``Program``, then
of their program data accounts, decoded as ``ProgramData``: ``watcher.kinds.toolkit.layouts``). A
redeploy is the program data's deploy slot moving. The inventory, the "cannot be verified" alert
and the state: ``watcher.kinds.sources.powers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from watcher.alerting import formatting
from watcher.config.rule_models import Pubkeys
from watcher.core.events import AlertMessage
from watcher.kinds import base
from watcher.kinds.sources import powers
from watcher.kinds.toolkit.alert_samples import sample_key
from watcher.kinds.toolkit.layouts import NotDecodable, decode_program, decode_program_data


class UpgradeAuthorityRule(powers.PowersRule):
    kind: Literal["upgrade_authority"] = "upgrade_authority"
    programs: Pubkeys

    @property
    def watched(self) -> tuple[str, ...]:
        return self.programs


async def read_programs(ledger: base.LedgerReader, keys: Sequence[str]) -> powers.PowersObservation:
    """Each program, then its program data: two reads (100 keys a call)."""
    programs, refused = await powers.read_accounts(ledger, keys)
    if refused is not None:
        return powers.PowersObservation({}, dict.fromkeys(keys, refused))
    unverifiable: dict[str, str] = {}
    data_of: dict[str, str] = {}
    for key in keys:
        account = programs.get(key)
        if account is None:
            unverifiable[key] = "no such account: not an upgradeable program"
            continue
        try:
            data_of[key] = decode_program(account.owner, account.raw_data)
        except NotDecodable as exc:
            unverifiable[key] = f"not an upgradeable program: {exc}"
    datas, refused = await powers.read_accounts(ledger, sorted(set(data_of.values())))
    decoded: dict[str, dict[str, Any]] = {}
    for key, address in data_of.items():
        data = datas.get(address)
        if refused is not None:
            unverifiable[key] = refused
        elif data is None:
            unverifiable[key] = f"its program data account {address} does not exist"
        else:
            try:
                decoded[key] = decode_program_data(data.owner, data.raw_data)
            except NotDecodable as exc:
                unverifiable[key] = f"its program data account {address}: {exc}"
    return powers.PowersObservation(decoded, unverifiable)


# The programs, then their program data: 50 programs a call.
SOURCE = powers.PowersSource("program_powers", "upgrade_authority", read_programs, keys_per_call=50)


def _verb(facts: Mapping[str, Any], shown: formatting.Presentation) -> str | None:
    if facts["field"] == "deploy_slot":
        return f"redeployed (deploy slot {facts['old']} -> {facts['new']})"
    if facts["field"] == "upgrade_authority" and facts["new"] is None:
        return f"made immutable: upgrade authority removed (was {shown.short(facts['old'] or '')})"
    return None


WORDS = powers.PowersWords(
    thing="program",
    labels={"upgrade_authority": "upgrade authority", "deploy_slot": "deploy slot"},
    nobody="none (immutable)",
    verb=_verb,
)


def samples(rule: UpgradeAuthorityRule) -> list[AlertMessage]:
    """The upgrade authority handed over and the program redeployed, the inventory, a program
    that cannot be verified."""
    first = {"upgrade_authority": sample_key("deployer"), "deploy_slot": 300_000_000}
    later = {"upgrade_authority": sample_key("new deployer"), "deploy_slot": 300_000_500}
    return powers.walk_samples(SOURCE, rule, first, later)


KIND = powers.powers_kind(
    UpgradeAuthorityRule,
    SOURCE,
    WORDS,
    samples,
    ("program change", "program changes"),
    ("program", "programs"),
)
