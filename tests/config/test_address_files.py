"""`addresses_file:` on new_transactions rules: a plain file of addresses beside the rule file."""

from __future__ import annotations

import gc
import textwrap
import weakref
from pathlib import Path

import pytest

from watcher.config.address_files import RuleAddresses
from watcher.config.packed_keys import PackedAddresses
from watcher.kinds.rule_files import read_rules

from support.values import key

A, B, C, D = key("file a"), key("file b"), key("file c"), key("file d")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules").mkdir()
    return tmp_path / "rules"


def rule_file(folder: Path, *lines: str, kind: str = "new_transactions") -> Path:
    path = folder / "deposits.yaml"
    body = "\n".join(f"    {line}" for line in lines)
    path.write_text(f"rules:\n  - name: deposits\n    kind: {kind}\n{body}\n")
    return path


def read(path: Path) -> tuple[list[str], list[str]]:
    rules, problems = read_rules([path], channels=None)
    addresses = [a for rule in rules for a in getattr(rule, "addresses", ())]
    return addresses, [str(problem) for problem in problems]


def test_the_files_addresses_join_the_listed_ones_comments_and_blanks_ignored(
    folder: Path,
) -> None:
    (folder / "deposits.txt").write_text(f"# exchange deposits\n{B}\n\n  {C}  # hot\n{D}\n")
    path = rule_file(folder, f"addresses: [{A}]", "addresses_file: deposits.txt")
    assert read(path) == ([A, B, C, D], [])


def test_a_file_alone_is_enough(folder: Path) -> None:
    (folder / "lists").mkdir()
    (folder / "lists" / "d.txt").write_text(f"{A}\n{B}\n")
    assert read(rule_file(folder, "addresses_file: lists/d.txt")) == ([A, B], [])


def test_each_bad_line_is_one_problem_at_its_line(folder: Path) -> None:
    (folder / "deposits.txt").write_text(f"{B}\nnot-a-key\n{B}\n{A}\n")
    path = rule_file(folder, f"addresses: [{A}]", "addresses_file: deposits.txt")
    assert read(path) == (
        [],
        [
            "rules/deposits.txt:2: not a valid base58 public key: 'not-a-key'",
            f"rules/deposits.txt:3: duplicate address {B} (first on line 1)",
            f"rules/deposits.txt:4: {A} is already in the rule's addresses",
        ],
    )


def test_a_missing_file_is_one_line(folder: Path) -> None:
    path = rule_file(folder, "addresses_file: nope.txt")
    missing = "rules/nope.txt: addresses_file: cannot read rules/nope.txt: No such file or " + (
        "directory"
    )
    assert read(path) == ([], [missing])


def test_only_new_transactions_takes_it(folder: Path) -> None:
    (folder / "deposits.txt").write_text(f"{A}\n")
    path = rule_file(folder, f"mints: [{A}]", "addresses_file: deposits.txt", kind="holder_changes")
    assert read(path)[1] == [
        "rules/deposits.yaml:5: key 'addresses_file' does not apply to kind 'holder_changes' "
        "(only to: new_transactions)"
    ]


def test_read_again_with_the_rules(folder: Path) -> None:
    listing = folder / "deposits.txt"
    listing.write_text(f"{A}\n")
    path = rule_file(folder, "addresses_file: deposits.txt")
    assert read(path)[0] == [A]
    listing.write_text(
        textwrap.dedent(f"""\
        {A}
        {B}
        """)
    )
    assert read(path)[0] == [A, B]  # what a reload (SIGHUP) reads


def packed_of(path: Path) -> PackedAddresses:
    rules, problems = read_rules([path], channels=None)
    assert problems == []
    addresses = getattr(rules[0], "addresses", None)
    assert isinstance(addresses, RuleAddresses)
    return addresses.packed


def test_a_file_read_again_unchanged_gives_the_very_list_the_rules_in_force_hold(
    folder: Path,
) -> None:
    """A reload reads every file again: an unchanged million addresses is not packed a second
    time beside the list the rules in force hold (40 MB)."""
    (folder / "deposits.txt").write_text(f"{B}\n{C}\n")
    path = rule_file(folder, f"addresses: [{A}]", "addresses_file: deposits.txt")
    first = packed_of(path)
    assert packed_of(path) is first
    (folder / "deposits.txt").write_text(f"{B}\n{D}\n")
    changed = packed_of(path)
    assert changed is not first and list(changed) == [B, D]
    # The rule's own addresses changed: the file is read for them (its problems are theirs).
    path = rule_file(folder, f"addresses: [{D}]", "addresses_file: deposits.txt")
    assert read(path)[1] == [f"rules/deposits.txt:2: {D} is already in the rule's addresses"]
    # Kept only while held: a list no rule holds any more is freed.
    held = weakref.ref(changed)
    del first, changed
    gc.collect()
    assert held() is None
