"""Reading YAML fast and safely: libyaml's C parser gives the events, and one loop (no recursion)
builds both the plain data (dict, list, str, int, float, bool, None) and the line of every key
and item, so that every problem can be reported as ``FILE:LINE: message``.

Time and memory are linear in the size of the text. Limits, each refused with one problem:
``MAX_BYTES`` (16 MiB), ``MAX_DEPTH`` nested collections (64) and ``MAX_VALUES`` values once
aliases are counted as expanded (2,000,000: an "alias bomb" of a few hundred bytes stops at
once). Scalars follow YAML 1.2's core schema (``no`` and ``on`` are strings, ``0o17`` is octal);
duplicate keys are refused; ``<<: *anchor`` merges keys; a scalar with a tag of its own
(``!secret x``) is read as its text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml import events as ev

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 2_000_000

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_NULL = re.compile(r"~|null|Null|NULL|")
_TRUE = re.compile(r"true|True|TRUE")
_FALSE = re.compile(r"false|False|FALSE")
_INT = re.compile(r"[-+]?[0-9]+")
_OCT = re.compile(r"0o[0-7]+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_INF = re.compile(r"([-+]?)\.(?:inf|Inf|INF)")
_NAN = re.compile(r"\.(?:nan|NaN|NAN)")
_MAX_NUMBER_LENGTH = 400  # a longer run of digits stays text (int() refuses > 4300 digits)

_CORE = "tag:yaml.org,2002:"


class YamlProblem(Exception):
    """One problem with the text: its 1-based line (None when unknown) and message."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass
class Positions:
    """The 0-based line of a node, and of each key (mappings) or item (sequences) in it."""

    line: int
    keys: dict[Any, tuple[int, Positions | None]] = field(default_factory=dict)
    items: list[tuple[int, Positions | None]] = field(default_factory=list)


@dataclass
class _Frame:
    is_map: bool
    data: Any
    positions: Positions
    anchor: str | None
    size: int = 1
    key: Any = None
    key_line: int = 0
    has_key: bool = False
    key_is_merge: bool = False
    merged: list[dict[Any, Any]] = field(default_factory=list)


def parse(text: str) -> tuple[Any, Positions | None]:
    """(plain data, positions) of a single-document YAML text; (None, None) when empty.
    Raises ``YamlProblem``."""
    if len(text) > MAX_BYTES:
        raise YamlProblem(None, f"larger than the limit of {MAX_BYTES // (1024 * 1024)} MiB")
    loader = _LOADER(text)
    try:
        return _build(loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        if exc.problem == "exceeded maximum nesting depth":  # libyaml >= 0.2.6 stops at 1000
            raise YamlProblem(line, f"nested deeper than the limit of {MAX_DEPTH} levels") from None
        raise YamlProblem(line, f"invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise YamlProblem(None, f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()


def _build(loader: Any) -> tuple[Any, Positions | None]:
    stack: list[_Frame] = []
    anchors: dict[str, tuple[Any, Positions | None, int]] = {}
    result: list[tuple[Any, Positions | None]] = []
    documents = 0

    def attach(value: Any, positions: Positions | None, line: int, size: int) -> None:
        if not stack:
            result.append((value, positions))
            return
        frame = stack[-1]
        frame.size += size
        if frame.size > MAX_VALUES:
            raise YamlProblem(
                line + 1, f"more than {MAX_VALUES:,} values once aliases are expanded"
            )
        if not frame.is_map:
            frame.data.append(value)
            frame.positions.items.append((line, positions))
        elif not frame.has_key:
            frame.key, frame.key_line, frame.has_key = _hashable(value), line, True
        else:
            frame.has_key = False
            if frame.key_is_merge:
                frame.key_is_merge = False
                frame.merged.extend(_merge_sources(value, frame.key_line))
                return
            if frame.key in frame.data:
                raise YamlProblem(frame.key_line + 1, f"duplicate key {_quoted(frame.key)}")
            frame.data[frame.key] = value
            frame.positions.keys[frame.key] = (frame.key_line, positions)

    while True:
        event = loader.get_event()
        if event is None or isinstance(event, ev.StreamEndEvent):
            break
        line = event.start_mark.line
        if isinstance(event, ev.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise YamlProblem(line + 1, "invalid YAML: expected a single document")
        elif isinstance(event, ev.MappingStartEvent | ev.SequenceStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise YamlProblem(line + 1, f"nested deeper than the limit of {MAX_DEPTH} levels")
            is_map = isinstance(event, ev.MappingStartEvent)
            stack.append(_Frame(is_map, {} if is_map else [], Positions(line), event.anchor))
        elif isinstance(event, ev.MappingEndEvent | ev.SequenceEndEvent):
            frame = stack.pop()
            for source in frame.merged:  # explicit keys win over merged ones
                for key, value in source.items():
                    frame.data.setdefault(key, value)
            if frame.anchor is not None:
                anchors[frame.anchor] = (frame.data, frame.positions, frame.size)
            attach(frame.data, frame.positions, frame.positions.line, frame.size)
        elif isinstance(event, ev.ScalarEvent):
            value = _scalar(event, line)
            if event.anchor is not None:
                anchors[event.anchor] = (value, None, 1)
            if stack and stack[-1].is_map and not stack[-1].has_key:
                stack[-1].key_is_merge = value == "<<" and not event.style
            attach(value, None, line, 1)
        elif isinstance(event, ev.AliasEvent):
            if event.anchor not in anchors:
                recursive = any(frame.anchor == event.anchor for frame in stack)
                what = "recursive alias" if recursive else f"undefined alias '{event.anchor}'"
                raise YamlProblem(line + 1, f"invalid YAML: {what}")
            value, positions, size = anchors[event.anchor]
            if stack and stack[-1].is_map and not stack[-1].has_key:
                stack[-1].key_is_merge = False
            attach(value, positions, line, size)
    return result[0] if result else (None, None)


def _merge_sources(value: Any, line: int) -> list[dict[Any, Any]]:
    sources = value if isinstance(value, list) else [value]
    if not all(isinstance(source, dict) for source in sources):
        raise YamlProblem(line + 1, "invalid YAML: '<<' merges only mappings")
    return list(sources)


def _scalar(event: ev.ScalarEvent, line: int) -> Any:
    text: str = event.value
    tag = event.tag
    if tag in (None, "!"):
        return _resolve(text) if tag is None and not event.style else text  # plain: resolved
    if not tag.startswith(_CORE):
        return text  # a tag of its own: the text as written
    kind = tag.removeprefix(_CORE)
    resolved = _resolve(text)
    if kind == "str":
        return text
    if kind == "int" and isinstance(resolved, int) and not isinstance(resolved, bool):
        return resolved
    if kind == "float" and isinstance(resolved, int | float) and not isinstance(resolved, bool):
        return float(resolved)
    if kind == "bool" and isinstance(resolved, bool):
        return resolved
    if kind == "null" and resolved is None:
        return None
    raise YamlProblem(line + 1, f"invalid YAML: {text!r} is not a !!{kind}")


def _resolve(text: str) -> Any:
    """A plain scalar under YAML 1.2's core schema."""
    if _NULL.fullmatch(text):
        return None
    if _TRUE.fullmatch(text):
        return True
    if _FALSE.fullmatch(text):
        return False
    if len(text) > _MAX_NUMBER_LENGTH:
        return text
    if _INT.fullmatch(text):
        return int(text)
    if _OCT.fullmatch(text):
        return int(text[2:], 8)
    if _HEX.fullmatch(text):
        return int(text[2:], 16)
    if _FLOAT.fullmatch(text):
        return float(text)
    infinity = _INF.fullmatch(text)
    if infinity:
        return -math.inf if infinity.group(1) == "-" else math.inf
    if _NAN.fullmatch(text):
        return math.nan
    return text


def _hashable(key: Any) -> Any:
    # A complex key (``? [a, b]``) would be a list or a mapping: keep it usable as a key so
    # that it is reported as an unknown key instead of crashing.
    if isinstance(key, list):
        return tuple(_hashable(part) for part in key)
    if isinstance(key, dict):
        return tuple((_hashable(k), _hashable(v)) for k, v in key.items())
    return key


def _quoted(key: Any) -> str:
    return f"'{key}'" if isinstance(key, str) else repr(key)
