"""Rule files: what a user sees for each mistake (exact ``FILE:LINE: message`` lines), the
values of valid rules, and durations."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from watcher.core.durations import MAX_DURATION_SECONDS, format_duration, parse_duration
from watcher.core.errors import ConfigError
from watcher.core.events import Severity
from watcher.kinds import KINDS, AnyRule, kinds_taking, source_of
from watcher.kinds.delinquent_validators import DelinquentValidatorsRule
from watcher.kinds.holder_changes import HolderChangesRule
from watcher.kinds.new_transactions import NewTransactionsRule
from watcher.kinds.rule_files import load_rules, read_rules
from watcher.kinds.version_drift import VersionDriftRule

TREASURY = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
USDC = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
VOTE = "3N7s9zXMZ4QqvHQR15t5GNHyqc89KduzMP7423eWiD5g"
NODE = "DRpbCBMxVnDK7maPM5tGv6MvB3v1sRMC86PZ8okm21hy"
CHANNELS = {"ops", "oncall"}
# Every kind, in registry order, as the messages list them.
KIND_LIST = ", ".join(KINDS)


@pytest.fixture
def rules_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "rules"
    folder.mkdir()
    return folder


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def problem_lines(
    paths: list[Path] | None = None, channels: set[str] | None = CHANNELS
) -> list[str]:
    _, problems = read_rules(paths or [Path("rules")], channels)
    return [str(problem) for problem in problems]


# -- every mistake, as the user reads it -------------------------------------------------------

MISTAKES = [
    pytest.param(
        f"""
        rules:
          - name: treasury
            kind: new_transactions
            addresses:
              - {TREASURY}
              - 9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFi0
            notify: [ops]
        """,
        [
            "rules/a.yaml:6: addresses[1]: not a valid base58 public key: "
            "'9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFi0'"
        ],
        id="bad-pubkey",
    ),
    pytest.param(
        f"""
        rules:
          - name: treasury
            kind: new_transactions
            addresses: [{TREASURY}, abc]
            notify: [ops]
        """,
        ["rules/a.yaml:4: addresses[1]: not a valid base58 public key: 'abc'"],
        id="short-pubkey-in-flow-list",
    ),
    pytest.param(
        """
        rules:
          - name: treasury
            kind: new_transactions
            addresses: [abc]
        """,
        ["rules/a.yaml:4: addresses[0]: not a valid base58 public key: 'abc'"],
        id="the-only-pubkey-is-bad",
    ),
    pytest.param(
        f"""
        rules:
          - name: treasury
            kind: new_transactions
            addresses:
              - {TREASURY}
              - {USDC}
              - {TREASURY}
            notify: [ops]
        """,
        [f"rules/a.yaml:7: addresses[2]: '{TREASURY}' is listed twice (first as item 0)"],
        id="duplicate-address",
    ),
    pytest.param(
        """
        rules:
          - name: treasury
            kind: new_txs
        """,
        [f"rules/a.yaml:3: unknown kind 'new_txs' (expected one of: {KIND_LIST})"],
        id="unknown-kind",
    ),
    pytest.param(
        """
        rules:
          - name: treasury
            kind: [new_transactions]
        """,
        [f"rules/a.yaml:3: kind: expected one of: {KIND_LIST}, got a list"],
        id="kind-not-a-string",
    ),
    pytest.param(
        """
        rules:
          - name: treasury
            kind: new_transactions
            addresses: [1111111111111111111111111111111e5]
        """,
        ["rules/a.yaml:4: addresses[0]: YAML read this pubkey as a number: put it in quotes"],
        id="pubkey-read-as-a-float",
    ),
    pytest.param(
        f"""
        rules:
          - name: treasury
            addresses: [{TREASURY}]
        """,
        [f"rules/a.yaml:2: missing key 'kind' (one of: {KIND_LIST})"],
        id="missing-kind",
    ),
    pytest.param(
        """
        rules:
          - name: treasury
            kind: new_transactions
            notify: [ops]
        """,
        ["rules/a.yaml:2: missing key 'addresses'"],
        id="missing-addresses",
    ),
    pytest.param(
        f"""
        rules:
          - name: treasury
            kind: new_transactions
            adresses: [{TREASURY}]
            notify: [ops]
        """,
        [
            "rules/a.yaml:2: missing key 'addresses'",
            "rules/a.yaml:4: unknown key 'adresses' (did you mean 'addresses'?)",
        ],
        id="misspelt-key",
    ),
    pytest.param(
        f"""
        rules:
          - name: treasury
            kind: new_transactions
            addresses: [{TREASURY}]
            for: 5m
            min_change_pct: 3
        """,
        [
            "rules/a.yaml:5: key 'for' does not apply to kind 'new_transactions' "
            f"(only to: {', '.join(kinds_taking('for'))})",  # the state kinds
            "rules/a.yaml:6: key 'min_change_pct' does not apply to kind 'new_transactions' "
            f"(only to: {', '.join(kinds_taking('min_change_pct'))})",
        ],
        id="key-of-another-kind",
    ),
    pytest.param(
        f"""
        rules:
          - name: treasury
            kind: new_transactions
            addresses: [{TREASURY}]
            notify: [opz, ops]
        """,
        ["rules/a.yaml:5: notify[0]: unknown channel 'opz' (known: oncall, ops)"],
        id="unknown-channel",
    ),
    pytest.param(
        f"""
        rules:
          - name: treasury
            kind: new_transactions
            addresses: [{TREASURY}]
            notify: []
        """,
        ["rules/a.yaml:5: notify: must not be empty"],
        id="empty-notify",
    ),
    pytest.param(
        f"""
        rules:
          - name: w
            kind: holder_changes
            mints: {USDC}
            every: 30
            severity: high
            min_change_pct: 0
        """,
        [
            f"rules/a.yaml:4: mints: expected a list, got '{USDC}'",
            "rules/a.yaml:5: every: 30 has no unit: write e.g. 30s or 30m",
            "rules/a.yaml:6: severity: expected 'info', 'warning' or 'critical', got 'high'",
            "rules/a.yaml:7: min_change_pct: must be greater than 0, got 0",
        ],
        id="bad-values",
    ),
    pytest.param(
        f"""
        rules:
          - name: treasury
            kind: new_transactions
            addresses: [{TREASURY}]
            min_change_sol: -1
            min_change: {{{USDC}: lots}}
            direction: up
            failed: drop
        """,
        [
            "rules/a.yaml:5: min_change_sol: must be greater than or equal to 0, got -1",
            f"rules/a.yaml:6: min_change.{USDC}: input should be a valid decimal",
            "rules/a.yaml:7: direction: expected 'in', 'out' or 'any', got 'up'",
            "rules/a.yaml:8: failed: expected 'notify' or 'ignore', got 'drop'",
        ],
        id="bad-thresholds",
    ),
    pytest.param(
        f"""
        rules:
          - name: deposits
            kind: new_transactions
            addresses: [{TREASURY}]
            every: 30s
            max_every: 10s
          - name: late
            kind: holder_changes
            mints: [{USDC}]
            max_every: soon
        """,
        [
            "rules/a.yaml:2: max_every (10s) must be longer than every (30s)",
            "rules/a.yaml:10: max_every: not a duration: 'soon' (e.g. 500ms, 30s, 5m, 1h, 1d, "
            "1m30s)",
        ],
        id="max-every",
    ),
    pytest.param(
        """
        rules:
          - name: v
            kind: delinquent_validators
            validators: []
            every: 0s
            repeat: soon
            keep_firing_for: 1s5m
        """,
        [
            "rules/a.yaml:4: validators: must not be empty",
            "rules/a.yaml:5: every: must be more than 0",
            "rules/a.yaml:6: repeat: not a duration: 'soon' (e.g. 500ms, 30s, 5m, 1h, 1d, 1m30s)",
            "rules/a.yaml:7: keep_firing_for: not a duration: '1s5m' "
            "(units go from largest to smallest)",
        ],
        id="bad-durations",
    ),
    pytest.param(
        f"""
        rules:
          - name: v
            kind: version_drift
            validators: [{NODE}]
            summary: "  "
            runbook: |
              step one
              step two
          - name: w
            kind: new_transactions
            addresses: [{TREASURY}]
            summary: "{"x" * 201}"
            runbook: 42
        """,
        [
            "rules/a.yaml:5: summary: must not be empty",
            "rules/a.yaml:6: runbook: must be one line",
            "rules/a.yaml:12: summary: at most 200 characters (this one has 201)",
            "rules/a.yaml:13: runbook: expected a string, got 42",
        ],
        id="summary-and-runbook",
    ),
    pytest.param(
        f"""
        rules:
          - name: my rule
            kind: version_drift
            validators: [{NODE}]
            title: "{{{{ rule }}"
            body: |
              line one
              {{{{ x | }}}}
        """,
        [
            "rules/a.yaml:2: name: 'my rule': use only letters, digits, - and _",
            "rules/a.yaml:5: title: template syntax error: unexpected '}' (template line 1)",
            "rules/a.yaml:6: body: template syntax error: expected token 'name', "
            "got 'end of print statement' (template line 2)",
        ],
        id="bad-name-and-templates",
    ),
    pytest.param(
        """
        rules:
          - name: a
            kind: [new_transactions
        """,
        ["rules/a.yaml:4: invalid YAML: did not find expected ',' or ']'"],
        id="yaml-syntax",
    ),
    pytest.param(
        f"""
        rules:
          - name: a
            kind: new_transactions
            addresses: [{TREASURY}]
            name: b
        """,
        ["rules/a.yaml:5: duplicate key 'name'"],
        id="duplicate-key",
    ),
    pytest.param("", ["rules/a.yaml: empty file: expected a 'rules:' list"], id="empty-file"),
    pytest.param(
        "# nothing yet\n", ["rules/a.yaml: empty file: expected a 'rules:' list"], id="only-comment"
    ),
    pytest.param(
        """
        rule:
          - name: a
        """,
        [
            "rules/a.yaml:1: unknown key 'rule' (did you mean 'rules'?)",
            "rules/a.yaml:1: missing key 'rules' (the list of rules)",
        ],
        id="no-rules-key",
    ),
    pytest.param(
        """
        - name: a
        """,
        ["rules/a.yaml:1: expected a mapping with a 'rules:' list, got a list"],
        id="top-level-list",
    ),
    pytest.param(
        """
        rules:
          name: a
        """,
        ["rules/a.yaml:1: rules: expected a list, got a mapping"],
        id="rules-not-a-list",
    ),
    pytest.param(
        f"""
        rules:
          - treasury
          - name: ok
            kind: new_transactions
            addresses: [{TREASURY}]
        """,
        ["rules/a.yaml:2: rules[0]: expected a rule (a mapping), got 'treasury'"],
        id="item-not-a-mapping",
    ),
]


@pytest.mark.parametrize(("text", "expected"), MISTAKES)
def test_each_mistake_is_reported_at_its_line(
    rules_dir: Path, text: str, expected: list[str]
) -> None:
    write(rules_dir, "a.yaml", text)
    assert problem_lines() == expected


def test_duplicate_rule_name_across_files_names_the_first_definition(rules_dir: Path) -> None:
    rule = f"""
        rules:
          - name: treasury
            kind: new_transactions
            addresses: [{TREASURY}]
        """
    write(rules_dir, "a.yaml", rule)
    write(rules_dir, "b.yaml", "# the same again\n" + textwrap.dedent(rule).lstrip("\n"))
    assert problem_lines() == [
        "rules/b.yaml:3: duplicate rule name 'treasury' (first defined at rules/a.yaml:2)"
    ]


def test_all_problems_of_all_files_are_collected_in_reading_order(rules_dir: Path) -> None:
    write(rules_dir, "b.yaml", "rules:\n  - name: x\n    kind: nope\n")
    write(rules_dir, "a.yaml", "rules: [\n")
    write(
        rules_dir,
        "c.yml",
        f"""
        rules:
          - name: y
            kind: new_transactions
            addresses: [{TREASURY}]
            notify: [pager]
            every: 1x
        """,
    )
    lines = problem_lines([Path("rules"), Path("missing.yaml")], {"ops"})
    assert lines == [
        "missing.yaml: no such file or folder",
        "rules/a.yaml:2: invalid YAML: did not find expected node content",
        f"rules/b.yaml:3: unknown kind 'nope' (expected one of: {KIND_LIST})",
        "rules/c.yml:5: notify[0]: unknown channel 'pager' (known: ops)",
        "rules/c.yml:6: every: not a duration: '1x' (e.g. 500ms, 30s, 5m, 1h, 1d, 1m30s)",
    ]
    with pytest.raises(ConfigError) as raised:
        load_rules([Path("rules")], {"ops"})
    assert [str(problem) for problem in raised.value.problems] == lines[1:]


def test_empty_folder_is_a_problem(rules_dir: Path) -> None:
    assert problem_lines() == ["rules: no *.yaml or *.yml rule files in this folder"]


def test_folder_reads_yaml_and_yml_sorted_skipping_hidden_other_and_subfolders(
    rules_dir: Path,
) -> None:
    def rule(name: str) -> str:
        return (
            f"rules:\n  - name: {name}\n    kind: new_transactions\n    addresses: [{TREASURY}]\n"
        )

    write(rules_dir, "b.yml", rule("b"))
    write(rules_dir, "a.yaml", rule("a"))
    write(rules_dir, ".a.yaml.swp.yaml", "not: [valid")
    write(rules_dir, "notes.txt", "not yaml: [")
    (rules_dir / "sub").mkdir()
    write(rules_dir / "sub", "c.yaml", rule("c"))
    # a file named on its own and through its folder counts once
    rules = load_rules([Path("rules"), Path("rules/a.yaml")], None)
    assert [rule.name for rule in rules] == ["a", "b"]


def test_channels_none_skips_the_channel_check(rules_dir: Path) -> None:
    write(
        rules_dir,
        "a.yaml",
        f"rules:\n  - name: a\n    kind: new_transactions\n    addresses: [{TREASURY}]\n"
        "    notify: [anything]\n",
    )
    assert problem_lines(channels=None) == []
    assert problem_lines(channels=set()) == [
        "rules/a.yaml:5: notify[0]: unknown channel 'anything' "
        "(known: none: the settings define no channels)"
    ]


@dataclass(frozen=True)
class _Routing:
    default_channels: tuple[str, ...]
    routes: dict[Severity, tuple[str, ...]]


@pytest.mark.parametrize(
    ("default_channels", "routes", "expected"),
    [
        (
            (),
            {},
            ["rules/a.yaml:6: rule 'quiet' has no channel: set notify or default_channels/routes"],
        ),
        (("ops",), {}, []),
        ((), {"critical": ("oncall",)}, []),
        (
            (),
            {"info": ("ops",)},
            ["rules/a.yaml:6: rule 'quiet' has no channel: set notify or default_channels/routes"],
        ),
    ],
)
def test_a_rule_without_any_channel_after_routing_is_a_problem(
    rules_dir: Path,
    default_channels: tuple[str, ...],
    routes: dict[Severity, tuple[str, ...]],
    expected: list[str],
) -> None:
    write(
        rules_dir,
        "a.yaml",
        f"""
        rules:
          - name: routed
            kind: new_transactions
            addresses: [{TREASURY}]
            notify: [ops]
          - name: quiet
            kind: delinquent_validators
            validators: [{VOTE}]
            severity: critical
        """,
    )
    _, problems = read_rules(
        [Path("rules")],
        CHANNELS,
        routing=_Routing(default_channels, routes),
    )
    assert [str(problem) for problem in problems] == expected


# -- valid rules ----------------------------------------------------------------------------


def test_valid_rules_get_their_defaults(rules_dir: Path) -> None:
    write(
        rules_dir,
        "all.yaml",
        f"""
        rules:
          - name: treasury
            kind: new_transactions
            addresses: [{TREASURY}]
          - name: whales
            kind: holder_changes
            mints: [{USDC}]
          - name: my-validator
            kind: delinquent_validators
            validators: [{VOTE}]
          - name: drift
            kind: version_drift
            validators: [{NODE}]
        """,
    )
    treasury, whales, delinquent, drift = load_rules([Path("rules")], None)
    assert isinstance(treasury, NewTransactionsRule)
    assert (treasury.every, treasury.severity, treasury.notify) == (30.0, "warning", None)
    assert (treasury.group_wait, treasury.group_interval, treasury.max_per_hour) == (2, 0, None)
    assert (treasury.title, treasury.body) == (None, None)
    assert isinstance(whales, HolderChangesRule)
    assert (whales.every, whales.min_change_pct) == (60.0, 5.0)
    assert isinstance(delinquent, DelinquentValidatorsRule)
    assert (delinquent.every, delinquent.for_, delinquent.keep_firing_for) == (30.0, 0, 0)
    assert delinquent.repeat is None
    assert isinstance(drift, VersionDriftRule)
    assert drift.every == 300.0
    assert [rule.origin for rule in (treasury, whales, delinquent, drift)] == [
        "rules/all.yaml:2",
        "rules/all.yaml:5",
        "rules/all.yaml:8",
        "rules/all.yaml:11",
    ]
    assert [source_of(rule.kind).name for rule in (treasury, whales, delinquent, drift)] == [
        "signatures",
        "holders",
        "votes",
        "nodes",
    ]
    assert (treasury.targets, whales.targets, delinquent.targets) == (
        (TREASURY,),
        (USDC,),
        ("cluster",),
    )


def test_every_key_is_read(rules_dir: Path) -> None:
    write(
        rules_dir,
        "a.yaml",
        f"""
        rules:
          - name: no               # YAML 1.2: a string, not false
            kind: delinquent_validators
            validators: [{VOTE}, {NODE}]
            every: 1m30s
            for: 2m
            keep_firing_for: 500ms
            repeat: 4h
            severity: critical
            notify: [oncall, ops]
            title: "{{{{ rule }}}} is down"
            body: |
              {{{{ subject }}}}
          - name: w
            kind: holder_changes
            mints: [{USDC}]
            min_change_pct: 2.5
            group_wait: 30s
            group_interval: 5m
            max_per_hour: 12
        """,
    )
    down, whales = load_rules([Path("rules")], CHANNELS)
    assert isinstance(down, DelinquentValidatorsRule)
    assert down.name == "no"
    assert down.validators == (VOTE, NODE)
    assert (down.every, down.for_, down.keep_firing_for, down.repeat) == (90, 120, 0.5, 14400)
    assert (down.severity, down.notify) == ("critical", ("oncall", "ops"))
    assert (down.title, down.body) == ("{{ rule }} is down", "{{ subject }}\n")
    assert isinstance(whales, HolderChangesRule)
    assert (whales.min_change_pct, whales.group_wait, whales.group_interval) == (2.5, 30, 300)
    assert whales.max_per_hour == 12


def test_an_all_digit_pubkey_read_as_an_integer_keeps_its_digits(rules_dir: Path) -> None:
    system_program = "11111111111111111111111111111111"
    write(
        rules_dir,
        "a.yaml",
        f"rules:\n  - name: a\n    kind: new_transactions\n    addresses: [{system_program}]\n",
    )
    (rule,) = load_rules([Path("rules")], None)
    assert isinstance(rule, NewTransactionsRule)
    assert rule.addresses == (system_program,)


def test_a_dumped_rule_validates_back_through_the_union(rules_dir: Path) -> None:
    write(
        rules_dir,
        "a.yaml",
        f"rules:\n  - name: d\n    kind: delinquent_validators\n    validators: [{VOTE}]\n"
        "    for: 1m30s\n    repeat: 1h\n",
    )
    (rule,) = load_rules([Path("rules")], None)
    dumped = rule.model_dump(by_alias=True)
    assert (dumped["for"], dumped["repeat"], dumped["every"]) == ("1m30s", "1h", "30s")
    again = TypeAdapter(AnyRule).validate_python(dumped)
    assert isinstance(again, DelinquentValidatorsRule)
    assert (again.for_, again.repeat) == (90, 3600)
    assert again.model_dump() == rule.model_dump()


def test_rules_are_frozen(rules_dir: Path) -> None:
    write(
        rules_dir,
        "a.yaml",
        f"rules:\n  - name: a\n    kind: new_transactions\n    addresses: [{TREASURY}]\n",
    )
    (rule,) = load_rules([Path("rules")], None)
    with pytest.raises(ValueError, match="frozen"):
        rule.every = 1.0  # type: ignore[misc]
    assert hash(rule) == hash(rule.model_copy())


def test_the_example_rules_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repo)
    rules = load_rules([Path("rules")], CHANNELS)
    # An example of every kind.
    assert sorted({rule.kind for rule in rules}) == sorted(KINDS)
    assert sorted(path.name for path in Path("rules").glob("*.yaml")) == [
        "authorities.yaml",
        "balances.yaml",
        "drift.yaml",
        "nft.yaml",
        "nonces.yaml",
        "programs.yaml",
        "supply.yaml",
        "treasury.yaml",
        "treasury_moves.yaml",
        "validator_health.yaml",
        "validators.yaml",
        "vat.yaml",
        "whales.yaml",
    ]


# -- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("10s", 10),
        ("5m", 300),
        ("1h", 3600),
        ("1d", 86400),
        ("1m30s", 90),
        ("1h2m3s4ms", 3723.004),
        ("1.5h", 5400),
        ("0s", 0),
        ("0", 0),
        (0, 0),
        (" 30s ", 30),
    ],
)
def test_parse_duration(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "not a duration: '' (e.g. 500ms, 30s, 5m, 1h, 1d, 1m30s)"),
        ("10", "'10' has no unit: write e.g. 10s or 10m"),
        ("10 s", "not a duration: '10 s' (e.g. 500ms, 30s, 5m, 1h, 1d, 1m30s)"),
        ("-5s", "not a duration: '-5s' (e.g. 500ms, 30s, 5m, 1h, 1d, 1m30s)"),
        ("5sec", "not a duration: '5sec' (e.g. 500ms, 30s, 5m, 1h, 1d, 1m30s)"),
        ("30s1m", "not a duration: '30s1m' (units go from largest to smallest)"),
        ("1m1m", "not a duration: '1m1m' (units go from largest to smallest)"),
        (30, "30 has no unit: write e.g. 30s or 30m"),
        (1.5, "1.5 has no unit: write e.g. 1.5s or 1.5m"),
        (True, "not a duration: True (e.g. 500ms, 30s, 5m, 1h, 1d, 1m30s)"),
        (None, "not a duration (e.g. 500ms, 30s, 5m, 1h, 1d, 1m30s)"),
        ("365d1ms", "'365d1ms' is longer than the limit of 365d"),
        ("2000000000d", "'2000000000d' is longer than the limit of 365d"),
        ("9" * 5000 + "s", "not a duration: '99999999999999999999'... is too long"),
    ],
)
def test_parse_duration_refuses(value: object, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_duration(value)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.5, "500ms"), (90, "1m30s"), (86400, "1d"), (90061.001, "1d1h1m1s1ms")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=0, max_value=MAX_DURATION_SECONDS * 1000))
def test_duration_round_trip_at_millisecond_precision(millis: int) -> None:
    seconds = millis / 1000
    text = format_duration(seconds)
    assert parse_duration(text) == seconds
    assert format_duration(parse_duration(text)) == text


@given(
    st.tuples(
        st.integers(min_value=0, max_value=299),  # days: the limit is 365d
        *[st.integers(min_value=0, max_value=999)] * 4,
    ).filter(any)  # at least one part: "" is no duration
)
def test_any_written_duration_parses_to_the_sum_of_its_parts(counts: tuple[int, ...]) -> None:
    units = [("d", 86400), ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001)]
    text = "".join(
        f"{count}{unit}" for count, (unit, _) in zip(counts, units, strict=True) if count
    )
    expected = sum(count * size for count, (_, size) in zip(counts, units, strict=True))
    assert parse_duration(text) == pytest.approx(expected, abs=1e-9)


def test_a_rules_target_set_is_its_targets_and_a_copy_makes_its_own() -> None:
    rule = NewTransactionsRule(name="r", addresses=[TREASURY], notify=["ops"])
    assert rule.target_set == frozenset(rule.targets) == {TREASURY}
    moved = rule.model_copy(update={"addresses": (USDC,)})
    assert moved.target_set == {USDC} and rule.target_set == {TREASURY}
