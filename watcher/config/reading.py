"""Reading a settings file with the environment: ``load_settings`` (raises ``ConfigError``) and
``read_settings`` (every problem, as ``FILE:LINE: message`` or ``$WATCHER_KEY: message``), with
``${VAR}`` expansion and relative paths resolved against the file's folder (see
``watcher.config.settings`` for the rules)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)
from pydantic_settings import (
    SettingsError,
)

from watcher.config.settings import (
    ENV_NESTED_DELIMITER,
    ENV_PREFIX,
    SECRET_KEYS,
    EnvSource,
    FileSource,
    Settings,
)
from watcher.config.yamlpos import (
    Loc,
    YamlDocument,
    describe_value,
    display_path,
    error_loc,
    error_message,
    format_loc,
    load_yaml,
    normalized,
    user_errors,
)
from watcher.core.errors import ConfigError, Problem

VARIABLE_PATTERN = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class SettingsReading:
    """What reading a settings file gave: the settings when valid, else the problems, plus
    what could still be learned for checking the rule files anyway."""

    settings: Settings | None
    problems: list[Problem]
    rule_paths: list[Path] = field(default_factory=list)  # existing entries of `rules`
    channels: set[str] | None = None  # channel names, None when unknown


def load_settings(path: Path | str, env: Mapping[str, str] | None = None) -> Settings:
    """Read, expand, merge with the environment (``env``, default ``os.environ``) and validate
    a settings file. Raises ``ConfigError`` listing every problem."""
    reading = read_settings(path, env)
    if reading.settings is None or reading.problems:
        raise ConfigError(reading.problems)
    return reading.settings


# What valid settings point at, checked by a caller that knows the parts (``watcher.checks``):
# each problem as the location of the key it is about and why.
DeepCheck = Callable[[Settings], Iterable[tuple[Loc, str]]]


def read_settings(
    path: Path | str, env: Mapping[str, str] | None = None, *, deep: DeepCheck | None = None
) -> SettingsReading:
    """Like ``load_settings``, but returns the problems instead of raising. ``deep``: also
    check what valid settings point at (``watcher check`` and ``run`` do: the state database,
    the channel URLs), each problem placed at its key's line."""
    environ: Mapping[str, str] = os.environ if env is None else env
    config_path = normalized(Path(path), Path.cwd())
    try:
        document = load_yaml(config_path)
    except ConfigError as exc:
        return SettingsReading(None, exc.problems)
    data = document.data
    if data is None:
        return SettingsReading(None, [Problem(document.file, None, "empty file")])
    if not isinstance(data, dict):
        message = f"expected a mapping of settings, got {describe_value(data)}"
        return SettingsReading(None, [document.problem((), message)])

    problems: list[Problem] = []
    data = _expand(data, (), environ, document, problems)
    env_source = EnvSource(environ)
    env_readable = True
    try:
        from_env = env_source()
    except SettingsError as exc:
        problems.append(_env_parse_problem(exc, environ))
        env_readable, from_env = False, {}

    base = config_path.parent
    rule_paths = _rule_paths(data, from_env, base)
    for index, entry in enumerate(rule_paths):
        if entry is not None and not entry.exists():
            message = f"rules[{index}]: no such file or folder: {display_path(entry)}"
            problems.append(_locate(("rules", index), message, document, from_env, environ))
    existing = [entry for entry in rule_paths if entry is not None and entry.exists()]
    settings: Settings | None = None
    if env_readable:
        try:
            settings = Settings(_build_sources=((env_source, FileSource(data)), {}))
        except ValidationError as exc:
            for error in user_errors(exc):
                problems.append(_problem(error, document, from_env, environ))
    if settings is None:
        channels = _channel_names(data, from_env)
        return SettingsReading(None, _ordered(problems, document), existing, channels)

    settings = settings._resolved(base, config_path)
    if deep is not None:
        for loc, why in deep(settings):
            message = f"{format_loc(loc)}: {why}"
            problems.append(_locate(loc, message, document, from_env, environ))
    return SettingsReading(settings, _ordered(problems, document), existing, set(settings.channels))


def _ordered(problems: list[Problem], document: YamlDocument) -> list[Problem]:
    """The file's problems by line, then those of environment variables."""
    return sorted(problems, key=lambda problem: (problem.file != document.file, problem.line or 0))


def _env_parse_problem(exc: SettingsError, environ: Mapping[str, str]) -> Problem:
    match = re.search(r'field "(\w+)"', str(exc))
    key = match.group(1) if match else ""
    prefix = f"{ENV_PREFIX}{key.upper()}"
    # The variable itself, or one of its nested keys (WATCHER_CHANNELS__OPS).
    candidates = [name for name in environ if name.upper().startswith(prefix)]
    name = min(candidates, key=len) if candidates else prefix
    return Problem(
        f"${name}",
        None,
        f"{key}: not valid JSON (lists and mappings from the environment are JSON)",
    )


def _env_name(environ: Mapping[str, str], loc: Loc) -> str | None:
    """The environment variable that set the value at ``loc`` (or an enclosing key), if any."""
    names = {name.upper(): name for name in environ}
    keys = [str(part) for part in loc if isinstance(part, str)]
    for length in range(len(keys), 0, -1):
        candidate = ENV_PREFIX + ENV_NESTED_DELIMITER.join(keys[:length]).upper()
        if candidate in names:
            return names[candidate]
    return None


def _from_env(from_env: Mapping[str, Any], loc: Loc) -> bool:
    """Whether the value at ``loc`` came from the environment (it or a key above it)."""
    node: Any = from_env
    for part in loc:
        if isinstance(node, Mapping):
            if part not in node:
                return False
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            break  # the environment gave a value above this location
    return bool(loc)


def _locate(
    loc: Loc,
    message: str,
    document: YamlDocument,
    from_env: Mapping[str, Any],
    environ: Mapping[str, str],
) -> Problem:
    """A problem at ``loc``: in the file, or in the environment variable that set it."""
    if _from_env(from_env, loc):
        name = _env_name(environ, loc)
        if name is not None:
            return Problem(f"${name}", None, message)
    return document.problem(loc, message)


def _problem(
    error: Any,
    document: YamlDocument,
    from_env: Mapping[str, Any],
    environ: Mapping[str, str],
) -> Problem:
    loc = error_loc(error)
    secret = bool(loc) and loc[0] in SECRET_KEYS
    message = error_message(error, Settings, show_value=not secret)
    return _locate(loc, message, document, from_env, environ)


def _expand(
    value: Any,
    loc: Loc,
    environ: Mapping[str, str],
    document: YamlDocument,
    problems: list[Problem],
) -> Any:
    if isinstance(value, dict):
        return {
            key: _expand(item, (*loc, key), environ, document, problems)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [
            _expand(item, (*loc, index), environ, document, problems)
            for index, item in enumerate(value)
        ]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        escaped, name = match.groups()
        if escaped:
            return match.group(0)[1:]
        if name not in environ:
            where = format_loc(loc)
            problems.append(
                document.problem(loc, f"{where}: environment variable {name} is not set")
            )
            return match.group(0)
        return environ[name]

    return VARIABLE_PATTERN.sub(substitute, value)


def _rule_paths(
    data: Mapping[str, Any], from_env: Mapping[str, Any], base: Path
) -> list[Path | None]:
    """The ``rules`` entries resolved (None for an entry that is not a string), read before
    validation so that rule files are still checked when other settings are wrong."""
    entries = from_env.get("rules", data.get("rules"))
    if not isinstance(entries, list):
        return []
    return [normalized(Path(entry), base) if isinstance(entry, str) else None for entry in entries]


def _channel_names(data: Mapping[str, Any], from_env: Mapping[str, Any]) -> set[str] | None:
    """The channel names when they can be told without validation, else None."""
    names: set[str] = set()
    for channels in (data.get("channels", {}), from_env.get("channels", {})):
        if not isinstance(channels, Mapping):
            return None
        names |= {key for key in channels if isinstance(key, str)}
    return names
