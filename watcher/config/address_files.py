"""``addresses_file:`` on a ``new_transactions`` rule: a plain file of addresses, one per line,
``#`` comments and blank lines ignored, path relative to the rule file, read with the rules (so
on every reload too). Each bad line is one ``FILE:LINE: message`` problem; the file's addresses
join the rule's ``addresses`` before the rule is validated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from watcher.config.rule_models import check_pubkey
from watcher.config.yamlload import MAX_BYTES
from watcher.config.yamlpos import display_path
from watcher.core.errors import Problem

KEY = "addresses_file"


def read_addresses(path: Path, listed: Sequence[str] = ()) -> tuple[list[str], list[Problem]]:
    """The file's addresses in order, and its problems (``listed``: the rule's own
    ``addresses``; an address already there, or twice in the file, is a problem)."""
    shown = display_path(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            limit = f"larger than the limit of {MAX_BYTES // (1024 * 1024)} MiB"
            return [], [Problem(shown, None, f"{KEY}: {limit}")]
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return [], [Problem(shown, None, f"{KEY}: not UTF-8 text")]
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return [], [Problem(shown, None, f"{KEY}: cannot read {shown}: {reason}")]
    already = set(listed)
    # A set and the list, not a dict of value -> line: a million addresses would hold an int
    # per line until the rule is built. The first lines are found again for a duplicate only.
    seen: set[str] = set()
    addresses: list[str] = []
    first_lines: dict[str, int] | None = None
    problems: list[Problem] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        value = _value(line)
        if not value:
            continue
        try:
            check_pubkey(value)
        except ValueError as exc:
            problems.append(Problem(shown, number, str(exc)))
            continue
        if value in seen:
            if first_lines is None:
                first_lines = _first_lines(lines)
            message = f"duplicate address {value} (first on line {first_lines[value]})"
            problems.append(Problem(shown, number, message))
        elif value in already:
            problems.append(Problem(shown, number, f"{value} is already in the rule's addresses"))
        else:
            seen.add(value)
            addresses.append(value)
    return addresses, problems


def _value(line: str) -> str:
    """A line's address, or "" (a blank line or a comment)."""
    return line.split("#", 1)[0].strip()


def _first_lines(lines: Sequence[str]) -> dict[str, int]:
    """Each value's first line (numbered from 1)."""
    first: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        first.setdefault(_value(line), number)
    return first


def with_address_file(
    raw: Mapping[str, Any], rule_file: Path
) -> tuple[dict[str, Any], list[Problem]] | None:
    """The rule's mapping with the file's addresses added to ``addresses`` (the key itself
    kept), and the file's problems; None when the rule names no file (or not as text: the
    model then says so)."""
    name = raw.get(KEY)
    if not isinstance(name, str) or not name.strip():
        return None
    listed = raw.get("addresses") or []
    listed = list(listed) if isinstance(listed, list) else []
    path = rule_file.parent / name.strip()
    addresses, problems = read_addresses(path, [a for a in listed if isinstance(a, str)])
    return {**raw, "addresses": [*listed, *addresses]}, problems
