"""The YAML reader: YAML 1.2 values, positions, and the limits on what it parses."""

from __future__ import annotations

import math
from typing import Any

import pytest

from watcher.config.yamlload import MAX_DEPTH, MAX_VALUES, YamlProblem, parse
from watcher.config.yamlpos import line_of


def test_plain_scalars_follow_yaml_1_2() -> None:
    data, _ = parse(
        "a: [no, yes, on, off, true, False, null, ~, '', 0o17, 0x1f, 017, 1.5, 1e3, .inf,"
        " -.INF, 1_000, 12:30, '1', \"true\"]\nb:\n"
    )
    assert data["a"][:10] == ["no", "yes", "on", "off", True, False, None, None, "", 15]
    assert data["a"][10:15] == [31, 17, 1.5, 1000.0, math.inf]
    assert data["a"][15:] == [-math.inf, "1_000", "12:30", "1", "true"]
    assert data["b"] is None


def test_tags() -> None:
    data, _ = parse("a: !!str 12\nb: !!float 1\nc: !secret abc\nd: !!int '7'\n")
    assert data == {"a": "12", "b": 1.0, "c": "abc", "d": 7}
    with pytest.raises(YamlProblem, match="is not a !!int") as raised:
        parse("x: 1\ny: !!int abc\n")
    assert raised.value.line == 2


def test_a_long_run_of_digits_stays_text() -> None:
    data, _ = parse(f"a: {'9' * 5000}\n")
    assert data == {"a": "9" * 5000}


def test_positions_of_keys_and_items() -> None:
    data, tree = parse("# top\nrules:\n  - name: a\n    kind: x\n\n  - name: b\n")
    assert data == {"rules": [{"name": "a", "kind": "x"}, {"name": "b"}]}
    assert line_of(tree, ()) == 2
    assert line_of(tree, ("rules",)) == 2
    assert line_of(tree, ("rules", 0, "kind")) == 4
    assert line_of(tree, ("rules", 1)) == 6
    assert line_of(tree, ("rules", 1, "missing")) == 6
    assert line_of(tree, ("rules", 7, "name")) == 2


def test_merge_keys_and_aliases() -> None:
    data, tree = parse("base: &b {every: 30s, notify: [ops]}\nr:\n  <<: *b\n  every: 1m\n")
    assert data["r"] == {"every": "1m", "notify": ["ops"]}
    assert line_of(tree, ("r", "every")) == 4
    assert line_of(tree, ("r", "notify")) == 2  # merged: the line of the mapping holding it
    data, _ = parse("a: &x [1, 2]\nb: *x\n'<<': 3\n")
    assert data == {"a": [1, 2], "b": [1, 2], "<<": 3}


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a: 1\nb: 2\na: 3\n", 3, "duplicate key 'a'"),
        ("a: &x [1, *x]\n", 1, "invalid YAML: recursive alias"),
        ("a: *nope\n", 1, "invalid YAML: undefined alias 'nope'"),
        ("a: 1\n---\nb: 2\n", 2, "invalid YAML: expected a single document"),
        ("a: [1, 2\n", 2, "invalid YAML: did not find expected ',' or ']'"),
        ("x:\n  <<: [1]\n", 2, "invalid YAML: '<<' merges only mappings"),
    ],
)
def test_problems_have_their_line(text: str, line: int, message: str) -> None:
    with pytest.raises(YamlProblem) as raised:
        parse(text)
    assert (raised.value.line, raised.value.message) == (line, message)


def test_nesting_is_limited() -> None:
    deepest: Any = parse("a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))[0]["a"]
    for _ in range(MAX_DEPTH - 2):
        [deepest] = deepest
    assert deepest == []
    with pytest.raises(YamlProblem, match=f"nested deeper than the limit of {MAX_DEPTH}"):
        parse("a: " + "[" * 100_000 + "]" * 100_000)


def test_an_alias_bomb_is_refused_at_once() -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 12)]
    with pytest.raises(YamlProblem, match=f"more than {MAX_VALUES:,} values"):
        parse("\n".join(lines))


def test_aliases_within_the_limit_are_fine() -> None:
    data, _ = parse("a: &a [1, 2, 3]\nb: [*a, *a, *a]\n")
    assert data["b"] == [[1, 2, 3]] * 3


def test_size_is_limited() -> None:
    with pytest.raises(YamlProblem, match="larger than the limit of 16 MiB"):
        parse("#" * (16 * 1024 * 1024 + 1))


def test_empty() -> None:
    assert parse("") == (None, None)
    assert parse("# only a comment\n") == (None, None)
