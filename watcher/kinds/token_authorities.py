"""Kind ``token_authorities``: who holds a watched mint's powers, each change one event (source
``mint_powers``: getMultipleAccounts of the rule's mints, decoded as spl-token or Token-2022
mints, ``watcher.kinds.toolkit.layouts.decode_mint``): the mint authority and the freeze authority
changed or removed; for a Token-2022 mint, its permanent delegate (who can move or burn anyone's
tokens of the mint) and its transfer hook program (run on every transfer) too. The inventory,
the "cannot be verified" alert and the state: ``watcher.kinds.sources.powers``.
"""

from __future__ import annotations

from typing import Literal

from watcher.config.rule_models import Pubkeys
from watcher.core.events import AlertMessage
from watcher.kinds.sources import powers
from watcher.kinds.toolkit.alert_samples import sample_key
from watcher.kinds.toolkit.layouts import decode_mint


class TokenAuthoritiesRule(powers.PowersRule):
    kind: Literal["token_authorities"] = "token_authorities"
    mints: Pubkeys

    @property
    def watched(self) -> tuple[str, ...]:
        return self.mints


SOURCE = powers.PowersSource(
    "mint_powers", "token_authorities", powers.decoding_reader(decode_mint, "token mint")
)
WORDS = powers.PowersWords(
    thing="mint",
    labels={
        "mint_authority": "mint authority",
        "freeze_authority": "freeze authority",
        "permanent_delegate": "permanent delegate",
        "transfer_hook_program": "transfer hook program",
    },
)


def samples(rule: TokenAuthoritiesRule) -> list[AlertMessage]:
    """The mint authority handed over, the inventory, a mint that cannot be verified."""
    first = {"mint_authority": sample_key("minter"), "freeze_authority": None}
    later = {"mint_authority": sample_key("new minter"), "freeze_authority": None}
    return powers.walk_samples(SOURCE, rule, first, later)


KIND = powers.powers_kind(
    TokenAuthoritiesRule,
    SOURCE,
    WORDS,
    samples,
    ("mint power change", "mint power changes"),
    ("mint", "mints"),
)
