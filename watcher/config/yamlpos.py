"""YAML with line numbers, so that every problem can be reported as ``FILE:LINE: message``.

``watcher.config.yamlload`` reads the text (fast, within size, depth and alias limits), YAML 1.2
(``no``
is a string, not false), refusing duplicate keys. ``load_yaml`` returns both the position of
every key and item and the plain data (dicts, lists, str, int, float ... for validation);
``YamlDocument.line(loc)`` maps a pydantic error location back to a line.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from watcher.config.yamlload import MAX_BYTES, Positions, YamlProblem, parse
from watcher.core.errors import ConfigError, Problem

Loc = tuple[str | int, ...]


def display_path(path: Path) -> str:
    """How a file is named in problems: relative to the working folder when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class YamlDocument:
    file: str  # as shown to the user
    tree: Positions | None  # the line of every key and item
    data: Any  # the same content as plain Python values; None for an empty file

    def line(self, loc: Loc) -> int | None:
        """1-based line of the node at ``loc`` (a key's own line for a mapping entry), or of its
        nearest ancestor present in the file."""
        return line_of(self.tree, loc)

    def problem(self, loc: Loc, message: str) -> Problem:
        return Problem(self.file, self.line(loc), message)


def load_yaml(path: Path) -> YamlDocument:
    """Read one YAML file. Raises ``ConfigError`` (one problem, with its line when known) when
    the file cannot be read or is not valid YAML."""
    file = display_path(path)
    try:
        if path.is_file() and path.stat().st_size > MAX_BYTES:
            limit = f"larger than the limit of {MAX_BYTES // (1024 * 1024)} MiB"
            raise ConfigError([Problem(file, None, limit)])
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem(file, None, "no such file")]) from None
    except IsADirectoryError:
        raise ConfigError([Problem(file, None, "is a folder, expected a YAML file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError([Problem(file, None, f"cannot read: {reason}")]) from None
    try:
        data, tree = parse(text)
    except YamlProblem as exc:
        raise ConfigError([Problem(file, exc.line, exc.message)]) from None
    return YamlDocument(file=file, tree=tree, data=data)


def line_of(tree: Positions | None, loc: Loc) -> int | None:
    """Walk ``tree`` along ``loc``; the 1-based line of the last step found (see YamlDocument)."""
    if tree is None:
        return None
    line = tree.line + 1
    node: Positions | None = tree
    for part in loc:
        if node is None:
            break
        step: tuple[int, Positions | None] | None = None
        if node.keys and _has_key(node.keys, part):
            step = node.keys[part]
        elif node.items and isinstance(part, int) and 0 <= part < len(node.items):
            step = node.items[part]
        if step is None:
            break
        line, node = step[0] + 1, step[1]
    return line


def _has_key(keys: Mapping[Any, Any], key: object) -> bool:
    try:
        return key in keys
    except TypeError:  # an unhashable part of a location
        return False


# -- pydantic errors -> short human messages ------------------------------------------------

_TYPE_NAMES = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    int: "a whole number",
    float: "a number",
    bool: "true/false",
    type(None): "nothing (null)",
}

_EXPECTED = {
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "path_type": "a file or folder path",
}


def describe_value(value: object) -> str:
    """A value as quoted in a message: scalars as written, containers by their kind."""
    if isinstance(value, str):
        return repr(value if len(value) <= 80 else value[:77] + "...")
    if isinstance(value, bool | int | float) or value is None:
        return "null" if value is None else repr(value)
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def format_loc(loc: Sequence[str | int]) -> str:
    """``("channels", "ops", 0)`` -> ``channels.ops[0]``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def user_errors(exc: ValidationError) -> list[ErrorDetails]:
    """The errors worth showing: pydantic also reports a list whose every item was invalid as
    "too short after validation", which would tell a user their non-empty list is empty."""
    return [
        error
        for error in exc.errors()
        if not (error["type"] == "too_short" and _non_empty(error.get("input")))
    ]


def _non_empty(value: object) -> bool:
    return isinstance(value, list | tuple | dict | str) and len(value) > 0


def error_loc(error: ErrorDetails) -> Loc:
    """The location of a pydantic error, pointing at the offending item when a validator says
    which one (``ctx["index"]``), and at the key itself for a bad mapping key."""
    loc: Loc = tuple(error["loc"])
    index = (error.get("ctx") or {}).get("index")
    if isinstance(index, int):
        loc = (*loc, index)
    return loc


def error_message(
    error: ErrorDetails,
    model: type[BaseModel] | None = None,
    *,
    show_value: bool = True,
) -> str:
    """One pydantic error as ``path: what is wrong`` (``show_value=False`` for secrets).

    ``model``: the model that was validated, to suggest the closest key for a misspelt one.
    """
    loc = error_loc(error)
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    is_key = bool(loc) and loc[-1] == "[key]"
    if is_key:  # a bad mapping key: name the mapping, quote the key
        loc = loc[:-2]
    where = format_loc(loc)
    if kind == "extra_forbidden":
        known = () if model is None else keys_at(model, loc[:-1])
        return _prefixed(format_loc(loc[:-1]), unknown_key_message(loc[-1], known))
    if kind == "missing":
        return _prefixed(format_loc(loc[:-1]), f"missing key '{loc[-1]}'")
    got = f", got {describe_value(value)}" if show_value else ""
    if kind in ("value_error", "assertion_error"):
        text = str(ctx.get("error", error["msg"]))
    elif kind in _EXPECTED:
        text = f"expected {_EXPECTED[kind]}{got}"
    elif kind == "literal_error":
        text = f"expected {ctx.get('expected')}{got}"
    elif kind == "too_short":
        text = "must not be empty"
    elif kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        text = f"must be {error['msg'].removeprefix('Input should be ')}{got}"
    else:
        text = error["msg"][:1].lower() + error["msg"][1:]
    return _prefixed(where, text)


def keys_at(model: type[BaseModel], loc: Loc) -> set[str]:
    """The keys the (nested) model at ``loc`` accepts, as written in a file (aliases)."""
    current: type[BaseModel] | None = model
    for part in loc:
        field = None if current is None else current.model_fields.get(str(part))
        current = None if field is None else _model_in(field.annotation)
    if current is None:
        return set()
    return {field.alias or name for name, field in current.model_fields.items()}


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """``Rpc`` or ``Rpc | None`` -> ``Rpc``; anything else -> None."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def unknown_key_message(key: object, known_keys: Iterable[str]) -> str:
    known = sorted(known_keys)
    close = difflib.get_close_matches(str(key), known, n=1) if known else []
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown key {describe_value(key)}{hint}"


def _prefixed(where: str, text: str) -> str:
    return f"{where}: {text}" if where else text


def normalized(path: Path, base: Path) -> Path:
    """``path`` resolved against the folder ``base`` (``..`` folded, symlinks kept)."""
    return Path(os.path.normpath(base / path.expanduser()))
