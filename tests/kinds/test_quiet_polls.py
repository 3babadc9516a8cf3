"""A sweep ends a poll at its first answer when the source reads it as nothing new
(``FirstCall.quiet``): such a poll is counted, never run. Its promise is checked here against
the path it skips, over every state, rule set and answer below: whenever ``quiet`` says so,
the whole poll would have made no other call, doubted nothing, and stepped to the very state
it started from, with no alert."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import pytest

from watcher.config.rule_models import RuleBase
from watcher.core.errors import RpcTimeout
from watcher.core.events import DOUBT_KEY, SET_ASIDE_KEY, TargetState
from watcher.kinds import RULE_MODELS, SOURCES
from watcher.kinds.base import FirstCall, LedgerReader
from watcher.kinds.new_transactions import BALANCE_ERROR
from watcher.kinds.toolkit.signature_cursor import EMPTY_HISTORY
from watcher.kinds.toolkit.tx_amounts import BalanceRead
from watcher.ledger.models import SignatureEntry, SignaturePage
from watcher.ledger.rpc import RpcClient, RpcSettings

from support.balances import Balances
from support.values import entry, history, key

ADDRESS = key("quiet deposit")
SIGNATURES = SOURCES["signatures"]
QUIET = cast(FirstCall, SIGNATURES)
NOW = 1_750_100_000.0


def rule(**fields: Any) -> RuleBase:
    return RULE_MODELS["new_transactions"].model_validate(
        {"kind": "new_transactions", "addresses": [ADDRESS], "notify": ["ops"], **fields}
    )


PLAIN = (rule(name="deposits"),)
TOKENS = (rule(name="deposits", tokens=True),)
ELSEWHERE = (rule(name="others", addresses=[key("someone else")]),)


class FirstAnswer(Balances):
    """A ledger whose first getSignaturesForAddress answers ``answer``; every call is kept."""

    def __init__(self, answer: Any = None, entries: Sequence[SignatureEntry] = ()) -> None:
        super().__init__()
        self.answer, self.entries = answer, list(entries)
        self.calls: list[tuple[str | None, str | None, int]] = []

    async def get_signatures_for_address(
        self, address: str, *, before: str | None = None, until: str | None = None, limit: int = 1
    ) -> list[SignatureEntry]:
        self.calls.append((before, until, limit))
        if self.answer is None:
            return self.entries[:limit]
        if isinstance(self.answer, Exception):
            raise self.answer
        answer: list[SignatureEntry] = self.answer
        return answer


async def polled(rules: Sequence[RuleBase], state: TargetState | None) -> TargetState:
    """The state after a whole poll of a ledger with a short history."""
    ledger = FirstAnswer(entries=history(5))
    observation = await SIGNATURES.observe(cast(LedgerReader, ledger), ADDRESS, state)
    return SIGNATURES.step(rules, ADDRESS, state, observation, NOW).state


async def states() -> dict[str, TargetState | None]:
    """States a target can be in: after real polls, and the odd cases written out."""
    plain = await polled(PLAIN, None)
    tokens = await polled(TOKENS, await polled(TOKENS, None))  # the tokens' baseline taken
    kept = BalanceRead.from_json(tokens["balance"])
    assert kept is not None and kept.tokens is not None  # what "tokens read" means below
    return {
        "never polled": None,
        "plain": plain,
        "tokens read": tokens,
        "tokens asked, not read": {**tokens, "balance": replace(kept, tokens=None).to_json()},
        "plain, last read failed": {**plain, BALANCE_ERROR: "timeout"},
        "tokens asked, read failed": {
            **tokens,
            "balance": replace(kept, tokens=None).to_json(),
            BALANCE_ERROR: "timeout",
        },
        "an entry doubted": {**plain, DOUBT_KEY: {"picture": "x", "seen": 1}},
        "an entry set aside": {**plain, SET_ASIDE_KEY: [history(1)[0].signature]},
        "no cursor yet": {k: v for k, v in plain.items() if k != "cursor"},
    }


ANSWERS: dict[str, Any] = {
    "empty": SignaturePage([]),
    "empty, one entry unreadable": SignaturePage.with_left_out(
        [], ({"signature": "?", "slot": 1},)
    ),
    "a new entry": SignaturePage([entry("new", 5000)]),
    "a failed call": RpcTimeout("read timeout", method="getSignaturesForAddress"),
}
RULES = {"plain": PLAIN, "tokens": TOKENS, "elsewhere": ELSEWHERE, "none": ()}


async def test_a_poll_called_quiet_would_have_changed_nothing_and_called_nothing_more() -> None:
    seen_quiet = 0
    for (state_name, state), (rules_name, rules), (answer_name, answer) in itertools.product(
        (await states()).items(), RULES.items(), ANSWERS.items()
    ):
        case = f"{state_name} / rules {rules_name} / answer {answer_name}"
        if not QUIET.quiet(rules, ADDRESS, state, answer):
            continue
        seen_quiet += 1
        ledger = FirstAnswer(answer)
        observation = await SIGNATURES.observe(cast(LedgerReader, ledger), ADDRESS, state)
        assert len(ledger.calls) == 1 and ledger.balance_calls == [], case
        assert SIGNATURES.doubt(state, observation, NOW) is None, case
        outcome = SIGNATURES.step(rules, ADDRESS, state, observation, NOW)
        assert outcome.alerts == () and outcome.state == state, case
    assert seen_quiet == 8  # the quiet cases below, under each rule set that fits them


@pytest.mark.parametrize(
    ("state_name", "rules_name", "answer_name", "quiet"),
    [
        ("plain", "plain", "empty", True),
        ("plain", "elsewhere", "empty", True),  # a rule dropped: still nothing to do
        ("plain", "none", "empty", True),
        ("tokens read", "tokens", "empty", True),
        ("plain, last read failed", "plain", "empty", True),
        ("tokens asked, read failed", "tokens", "empty", True),  # retried when one moves
        ("plain", "plain", "a new entry", False),
        ("plain", "plain", "empty, one entry unreadable", False),
        ("plain", "plain", "a failed call", False),
        ("plain", "tokens", "empty", False),  # a reload asked for tokens: their baseline
        ("tokens read", "plain", "empty", False),  # ... or dropped them
        ("tokens asked, not read", "tokens", "empty", False),  # their read is due
        ("an entry doubted", "plain", "empty", False),
        ("an entry set aside", "plain", "empty", False),
        ("no cursor yet", "plain", "empty", False),
        ("never polled", "plain", "empty", False),
    ],
)
async def test_which_first_answers_end_a_poll(
    state_name: str, rules_name: str, answer_name: str, quiet: bool
) -> None:
    state = (await states())[state_name]
    assert QUIET.quiet(RULES[rules_name], ADDRESS, state, ANSWERS[answer_name]) is quiet


# -- at rest: what a sweep keeps of a quiet target instead of its state --------------------------


async def test_a_rest_says_of_its_state_what_quiet_and_the_first_call_say() -> None:
    """``rest`` is the state in short: from it, the same first call and the same verdict on
    every answer under every rule set; a state it cannot stand for has no quiet answer."""
    rested = 0
    async with RpcClient("http://127.0.0.1:9/", RpcSettings(batch_size=10)) as client:
        for state_name, state in (await states()).items():
            rest = QUIET.rest(state)
            for (rules_name, rules), (answer_name, answer) in itertools.product(
                RULES.items(), ANSWERS.items()
            ):
                case = f"{state_name} / rules {rules_name} / answer {answer_name}"
                quiet = QUIET.quiet(rules, ADDRESS, state, answer)
                if rest is None:
                    assert not quiet, case
                else:
                    assert QUIET.quiet_at_rest(rules, ADDRESS, rest, answer) is quiet, case
            if rest is not None:
                rested += 1
                assert len(rest) <= 89 and rest.isascii()  # fits a sweep's slot
                at_rest = QUIET.call_at_rest(client, ADDRESS, rest)
                assert at_rest == QUIET.first_call(client, ADDRESS, state), state_name
    # plain, tokens read, and the two whose last read failed
    assert rested == 4


@pytest.mark.parametrize(
    ("state_name", "rest"),
    [
        ("plain", "S" + history(5)[0].signature),  # the newest entry the cursor holds
        ("tokens read", "T" + history(5)[0].signature),
        ("tokens asked, not read", None),  # their read is due
        ("an entry doubted", None),
        ("no cursor yet", None),
        ("never polled", None),
    ],
)
async def test_what_a_rest_holds(state_name: str, rest: str | None) -> None:
    assert QUIET.rest((await states())[state_name]) == rest


async def test_an_address_with_no_history_rests_with_no_signature_to_continue_from() -> None:
    state = {**await polled(PLAIN, None), "cursor": EMPTY_HISTORY.to_json()}
    assert QUIET.rest(state) == "S"
    assert QUIET.quiet_at_rest(PLAIN, ADDRESS, "S", ANSWERS["empty"])
    async with RpcClient("http://127.0.0.1:9/", RpcSettings()) as client:
        assert QUIET.call_at_rest(client, ADDRESS, "S") == QUIET.first_call(client, ADDRESS, state)
