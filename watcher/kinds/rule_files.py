"""Rule files -> validated rules, or every problem found, each as ``FILE:LINE: message``.

``paths`` are rule files or folders; a folder contributes its ``*.yaml`` and ``*.yml`` files,
sorted by name, not recursing into sub-folders and skipping hidden files. All files are read
and all problems are collected before anything is refused: a user fixes everything in one go.
A rule is of one of the registered kinds (``watcher.kinds.KINDS``), validated by its model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from watcher.config.address_files import KEY, with_address_file
from watcher.config.rule_models import Routing, RuleBase, channels_of
from watcher.config.yamlpos import (
    YamlDocument,
    describe_value,
    display_path,
    error_loc,
    error_message,
    keys_at,
    load_yaml,
    unknown_key_message,
    user_errors,
)
from watcher.core.errors import ConfigError, Problem
from watcher.kinds import KINDS

RULE_SUFFIXES = (".yaml", ".yml")
_FILE_KEYS = ("rules",)
_KIND_NAMES = ", ".join(KINDS)


def load_rules(
    paths: Sequence[Path],
    channels: set[str] | None,
    *,
    routing: Routing | None = None,
) -> list[RuleBase]:
    """Every rule of every file, in file order. Raises ``ConfigError`` with all the problems.

    ``channels``: the channel names of the settings (None: do not check ``notify``).
    ``routing``: when given, a rule that would end up with no channel at all is a problem.
    """
    rules, problems = read_rules(paths, channels, routing=routing)
    if problems:
        raise ConfigError(problems)
    return rules


def read_rules(
    paths: Sequence[Path],
    channels: set[str] | None,
    *,
    routing: Routing | None = None,
) -> tuple[list[RuleBase], list[Problem]]:
    """Like ``load_rules``, but returns the valid rules and the problems instead of raising."""
    problems: list[Problem] = []
    files = list(_rule_files(paths, problems))
    entries: list[_Entry] = []
    for file in files:
        try:
            document = load_yaml(file)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        file_problems: list[Problem] = []
        entries.extend(_read_file(document, file_problems))
        problems.extend(file_problems)
    problems.extend(_duplicate_names(entries))
    for entry in entries:
        if channels is not None:
            problems.extend(_unknown_channels(entry, channels))
        if entry.rule is not None and routing is not None and not channels_of(entry.rule, routing):
            problems.append(
                entry.problem(
                    ("name",),
                    f"rule '{entry.rule.name}' has no channel: "
                    "set notify or default_channels/routes",
                )
            )
    rules = [entry.rule for entry in entries if entry.rule is not None]
    return rules, _in_reading_order(problems, files)


def _in_reading_order(problems: list[Problem], files: Sequence[Path]) -> list[Problem]:
    """Problems grouped by file, in the order the files were read, then by line."""
    rank = {display_path(file): position for position, file in enumerate(files)}
    return sorted(problems, key=lambda problem: (rank.get(problem.file, -1), problem.line or 0))


@dataclass
class _Entry:
    """One item of a file's ``rules`` list, valid or not."""

    document: YamlDocument
    index: int
    raw: Mapping[str, Any]
    rule: RuleBase | None

    def loc(self, *parts: str | int) -> tuple[str | int, ...]:
        return ("rules", self.index, *parts)

    def problem(self, loc: tuple[str | int, ...], message: str) -> Problem:
        return self.document.problem(self.loc(*loc), message)

    @property
    def location(self) -> str:
        line = self.document.line(self.loc("name"))
        return f"{self.document.file}:{line}"


def _rule_files(paths: Sequence[Path], problems: list[Problem]) -> Iterator[Path]:
    seen: set[Path] = set()
    for path in paths:
        if path.is_dir():
            try:
                found = sorted(
                    child
                    for child in path.iterdir()
                    if child.suffix in RULE_SUFFIXES
                    and not child.name.startswith(".")
                    and child.is_file()
                )
            except OSError as exc:
                problems.append(Problem(display_path(path), None, f"cannot read: {exc.strerror}"))
                continue
            if not found:
                message = "no *.yaml or *.yml rule files in this folder"
                problems.append(Problem(display_path(path), None, message))
        elif path.exists():
            found = [path]
        else:
            problems.append(Problem(display_path(path), None, "no such file or folder"))
            found = []
        for file in found:
            key = file.resolve()
            if key not in seen:  # a file named twice (itself and via its folder) counts once
                seen.add(key)
                yield file


def _read_file(document: YamlDocument, problems: list[Problem]) -> Iterator[_Entry]:
    data = document.data
    if data is None:
        problems.append(Problem(document.file, None, "empty file: expected a 'rules:' list"))
        return
    if not isinstance(data, dict):
        problems.append(
            document.problem(
                (), f"expected a mapping with a 'rules:' list, got {describe_value(data)}"
            )
        )
        return
    for key in data:
        if key not in _FILE_KEYS:
            problems.append(document.problem((key,), unknown_key_message(key, _FILE_KEYS)))
    if "rules" not in data:
        problems.append(document.problem((), "missing key 'rules' (the list of rules)"))
        return
    items = data["rules"]
    if not isinstance(items, list):
        problems.append(
            document.problem(("rules",), f"rules: expected a list, got {describe_value(items)}")
        )
        return
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(
                document.problem(
                    ("rules", index),
                    f"rules[{index}]: expected a rule (a mapping), got {describe_value(item)}",
                )
            )
            continue
        entry = _Entry(document, index, item, None)
        entry.rule = _validate_rule(entry, problems)
        yield entry


def _validate_rule(entry: _Entry, problems: list[Problem]) -> RuleBase | None:
    kind = entry.raw.get("kind")
    if kind is None:
        problems.append(entry.problem((), f"missing key 'kind' (one of: {_KIND_NAMES})"))
        return None
    if not isinstance(kind, str):
        message = f"kind: expected one of: {_KIND_NAMES}, got {describe_value(kind)}"
        problems.append(entry.problem(("kind",), message))
        return None
    known = KINDS.get(kind)
    if known is None:
        message = f"unknown kind '{kind}' (expected one of: {_KIND_NAMES})"
        problems.append(entry.problem(("kind",), message))
        return None
    model = known.model
    raw = entry.raw
    if KEY in model.model_fields:
        expanded = with_address_file(raw, Path(entry.document.file))
        if expanded is not None:
            raw, file_problems = expanded
            if file_problems:
                problems.extend(file_problems)
                return None
    try:
        rule = model.model_validate(raw)
    except ValidationError as exc:
        for error in user_errors(exc):
            loc = error_loc(error)
            if error["type"] == "extra_forbidden" and len(loc) == 1:
                message = _misplaced_key_message(str(loc[0]), model)
            else:
                message = error_message(error, model)
            problems.append(entry.problem(loc, message))
        return None
    rule._origin = entry.location
    return rule


def _misplaced_key_message(key: str, model: type[RuleBase]) -> str:
    """An unknown key, or one that belongs to other kinds only."""
    elsewhere = [name for name, kind in KINDS.items() if key in keys_at(kind.model, ())]
    if elsewhere:
        return (
            f"key '{key}' does not apply to kind '{model.kind_name()}' "
            f"(only to: {', '.join(elsewhere)})"
        )
    return unknown_key_message(key, keys_at(model, ()))


def _duplicate_names(entries: Sequence[_Entry]) -> Iterator[Problem]:
    first_seen: dict[str, str] = {}
    for entry in entries:
        name = entry.raw.get("name")
        if not isinstance(name, str):
            continue
        if name in first_seen:
            yield entry.problem(
                ("name",), f"duplicate rule name '{name}' (first defined at {first_seen[name]})"
            )
        else:
            first_seen[name] = entry.location


def _unknown_channels(entry: _Entry, channels: set[str]) -> Iterator[Problem]:
    # Read from the raw item so that a rule with other problems is checked too.
    notify = entry.raw.get("notify")
    if not isinstance(notify, list):
        return
    known = ", ".join(sorted(channels)) or "none: the settings define no channels"
    for index, channel in enumerate(notify):
        if isinstance(channel, str) and channel not in channels:
            yield entry.problem(
                ("notify", index),
                f"notify[{index}]: unknown channel '{channel}' (known: {known})",
            )
