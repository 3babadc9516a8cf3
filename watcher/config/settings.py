"""The settings file (contract.md, "Settings file") plus the environment -> ``Settings``.

How a settings file is read:

- YAML 1.2 with positions (watcher.config.yamlpos): every problem is reported as ``FILE:LINE:
message``.
- ``${VAR}`` in the file's string values is replaced by the environment variable ``VAR``; a
  variable that is not set is a problem naming the line and the variable. ``$${VAR}`` stays a
  literal ``${VAR}``. Values coming from the environment are not expanded.
- Every key can also come from the environment as ``WATCHER_<KEY>``, nested keys joined with
  ``__`` (``WATCHER_RPC__TIMEOUT=20s``, ``WATCHER_CHANNELS__OPS='["json://host/"]'``); lists and
  mappings are written as JSON. The environment wins over the file, key by key. A problem in a
  value from the environment is reported as ``$WATCHER_<KEY>: message``.
- Relative paths (``state_path`` and each ``rules`` entry, from the file or the environment)
  are resolved against the folder of the settings file, not the working folder, so that the
  daemon reads the same files wherever it is started from.
- Unknown keys are errors. ``rules`` entries must exist.

``rpc_url`` holds the RPC API key in its path: it is a ``SecretStr`` (hidden in repr, str and
dumps; ``rpc_url.get_secret_value()`` gives it) and no message ever quotes it. ``rpc_urls``
(several endpoints, each a URL or ``{url, max_rps}``) is its alternative: giving both is an
error (which one wins would be a guess); ``Settings.endpoints`` gives the endpoints either way.
``quorum`` (state kinds confirmed by that many endpoints) cannot exceed their number.
Channel URLs hold tokens too: they are left out of repr and never quoted in messages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)
from pydantic_settings.sources.utils import parse_env_vars

from watcher.alerting.events import Severity
from watcher.config.endpoints import RpcEndpoint, RpcEndpoints, http_url, redacted
from watcher.config.rule_models import NAME_PATTERN, PositiveDuration, Pubkey
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

ENV_PREFIX = "WATCHER_"
ENV_NESTED_DELIMITER = "__"
# Keys whose values are secrets: never quoted in a problem.
SECRET_KEYS = frozenset({"rpc_url", "rpc_urls", "channels"})

_VARIABLE = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}")
_LISTEN = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^:\[\]]+):(\d{1,5})$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RpcSettings(_Section):
    timeout: PositiveDuration = 10.0  # per request
    max_attempts: Annotated[int, Field(ge=1)] = 5  # per call, retries included
    max_concurrency: Annotated[int, Field(ge=1)] = 8  # requests in flight
    # HTTP requests per second to one endpoint, never exceeded (None: no limit); rpc_urls
    # entries may set their own.
    max_rps: Annotated[float, Field(gt=0)] | None = None
    # JSON-RPC calls per HTTP request; 1 = no batching (watcher.ledger.batching.DEFAULT_BATCH_SIZE)
    batch_size: Annotated[int, Field(ge=1, le=100)] = 10


class DeliverySettings(_Section):
    first_retry: PositiveDuration = 2.0  # delay before the first retry of a refused delivery
    max_backoff: PositiveDuration = 300.0  # longest delay between retries
    deadline: PositiveDuration = 86400.0  # after this a delivery is given up (dead)
    # One send to one URL; past it the attempt counts as failed and is retried with backoff.
    send_timeout: PositiveDuration = 30.0


class HealthSettings(_Section):
    """The built-in alerts rpc_unhealthy and cluster_delinquent_stake (watcher.alerting.builtin)."""

    unhealthy_after: Annotated[int, Field(ge=1)] = 3  # failed rounds in a row before firing
    # More than this share of activated stake delinquent: one cluster-wide alert. None: off.
    cluster_delinquent_stake_pct: Annotated[float, Field(gt=0, le=100)] | None = 10.0
    severity: Severity = "critical"
    channels: tuple[str, ...] = ()  # checked against `channels` by Settings._health_channels
    # The state database failing this long without a break: `watcher run` exits non-zero.
    database_down_for: PositiveDuration = 300.0


class HttpSettings(_Section):
    """The HTTP endpoint for /metrics and /healthz."""

    listen: str  # HOST:PORT, e.g. 127.0.0.1:9102 or [::1]:9102

    @field_validator("listen")
    @classmethod
    def _host_and_port(cls, value: str) -> str:
        match = _LISTEN.match(value)
        if not match or int(match.group(2)) > 65535:
            raise ValueError(f"expected HOST:PORT such as 127.0.0.1:9102, got {value!r}")
        return value

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


class HeartbeatSettings(_Section):
    """A dead man's switch: ``url`` (Apprise, or plain http(s) fetched with GET; a secret)
    pinged after a healthy round, at most every ``every``."""

    url: Annotated[SecretStr, Field(repr=False)]
    every: PositiveDuration = 60.0


def _channel_name(value: str) -> str:
    if not NAME_PATTERN.fullmatch(value):
        raise ValueError(f"channel name {value!r}: use only letters, digits, - and _")
    return value


LogLevel = Literal["debug", "info", "warning", "error", "critical"]


def _level(value: Any) -> Any:
    # INFO and info alike; anything else is left as written for the error message.
    if isinstance(value, str) and value.lower() in get_args(LogLevel):
        return value.lower()
    return value


ChannelName = Annotated[str, AfterValidator(_channel_name)]
AppriseUrl = Annotated[str, Field(min_length=1)]


def _known_channels(refs: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
    """Channel names must name one of ``channels`` (declared, hence validated, before)."""
    channels = info.data.get("channels")
    if channels is None:  # channels itself is invalid: reported there
        return refs
    for index, name in enumerate(refs):
        if name not in channels:
            known = ", ".join(sorted(channels)) or "none: no channels are defined"
            raise PydanticCustomError(
                "unknown_channel",
                "unknown channel {name} (known: {known})",
                {"name": repr(name), "known": known, "index": index},
            )
    return refs


ChannelRefs = Annotated[tuple[str, ...], AfterValidator(_known_channels)]


class Settings(BaseSettings):
    """Validated settings. Read a settings file with ``load_settings`` (which applies the
    environment, resolves relative paths and sets ``config_path``), or build them in code with
    ``Settings.build``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        extra="forbid",
        frozen=True,
    )

    # Required unless rpc_urls is given (see _endpoint_keys).
    rpc_url: Annotated[SecretStr, AfterValidator(http_url)] | None
    rpc_urls: Annotated[RpcEndpoints | None, Field(repr=False)] = None
    # State kinds: a transition is taken only when this many endpoints agree on it.
    quorum: Annotated[int, Field(ge=1)] = 1
    commitment: Literal["finalized", "confirmed"] = "finalized"
    state_path: Path = Path("state/watcher.db")
    rules: Annotated[list[Path], Field(min_length=1)]
    # Declared before the keys that name channels: their validators check against it.
    channels: Annotated[
        dict[ChannelName, Annotated[list[AppriseUrl], Field(min_length=1)]], Field(repr=False)
    ] = {}
    default_channels: ChannelRefs = ()
    routes: dict[Severity, ChannelRefs] = {}  # severity -> channels, for rules without notify
    # The daemon's own notices (e.g. the RPC endpoint failing) when no rule channel applies.
    fallback_channels: ChannelRefs = ()
    labels: dict[Pubkey, str] = {}  # pubkey -> a name shown next to it in notifications
    log_level: Annotated[LogLevel, BeforeValidator(_level)] = "info"
    log_format: Literal["auto", "json", "console"] = "auto"
    rpc: RpcSettings = RpcSettings()
    delivery: DeliverySettings = DeliverySettings()
    health: HealthSettings = HealthSettings()
    # Link in notifications: {kind} is "tx" or "address", {id} the signature or pubkey.
    explorer_url: str | None = "https://explorer.solana.com/{kind}/{id}"
    http: HttpSettings | None = None  # None: no HTTP endpoint
    heartbeat: HeartbeatSettings | None = None  # None: no dead man's switch

    _config_path: Path = PrivateAttr(default=Path("."))

    @classmethod
    def build(cls, *, base: Path | str | None = None, **values: Any) -> Settings:
        """Settings given in code, with the keys and values a settings file holds (durations
        such as ``"500ms"`` included), e.g. ``Settings.build(rpc_url=..., rules=[path],
        channels={"ops": ["json://..."]})``. The environment is not read; relative paths are
        taken from ``base`` (default: the current folder). Raises ``ConfigError`` listing
        every problem (no value is shown: values given in code may hold secrets)."""
        folder = normalized(Path.cwd() if base is None else Path(base), Path.cwd())
        try:
            settings = cls(_build_sources=((_FileSource(dict(values)),), {}))
        except ValidationError as exc:
            problems = [
                Problem("Settings.build", None, error_message(error, Settings, show_value=False))
                for error in user_errors(exc)
            ]
            raise ConfigError(problems) from None
        return settings._resolved(folder, folder)

    def _resolved(self, base: Path, config_path: Path) -> Settings:
        """Relative paths taken from ``base``; ``config_path`` set."""
        settings = self.model_copy(
            update={
                "state_path": normalized(self.state_path, base),
                "rules": [normalized(entry, base) for entry in self.rules],
            }
        )
        settings._config_path = config_path
        return settings

    @property
    def config_path(self) -> Path:
        """The settings file this was read from (absolute)."""
        return self._config_path

    @property
    def endpoints(self) -> tuple[RpcEndpoint, ...]:
        """The RPC endpoints, from ``rpc_urls`` or the one ``rpc_url``."""
        if self.rpc_urls is not None:
            return tuple(self.rpc_urls)
        assert self.rpc_url is not None  # _endpoint_keys
        return (RpcEndpoint(url=self.rpc_url),)

    @property
    def rpc_url_redacted(self) -> str:
        """``https://rpc.example.com/***``: the endpoints without their keys, for logs."""
        return ", ".join(redacted(endpoint.url) for endpoint in self.endpoints)

    @model_validator(mode="before")
    @classmethod
    def _endpoint_keys(cls, data: Any) -> Any:
        # rpc_urls stands in for rpc_url; with neither, the error names rpc_url as before.
        if isinstance(data, dict) and data.get("rpc_urls") is not None and "rpc_url" not in data:
            return {**data, "rpc_url": None}
        return data

    @field_validator("rpc_urls")
    @classmethod
    def _not_both(cls, value: list[RpcEndpoint] | None, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("rpc_url") is not None:
            raise ValueError("give either rpc_url (one endpoint) or rpc_urls, not both")
        return value

    @field_validator("quorum")
    @classmethod
    def _enough_endpoints(cls, value: int, info: ValidationInfo) -> int:
        urls = info.data.get("rpc_urls")
        count = len(urls) if urls is not None else 1
        if value > count and ("rpc_urls" in info.data or info.data.get("rpc_url")):
            raise ValueError(f"quorum {value} needs at least {value} endpoints in rpc_urls")
        return value

    @model_validator(mode="after")
    def _an_endpoint(self) -> Settings:
        if self.rpc_url is None and self.rpc_urls is None:
            raise ValueError("rpc_url: give rpc_url or rpc_urls")
        return self

    @field_validator("health")
    @classmethod
    def _health_channels(cls, value: HealthSettings, info: ValidationInfo) -> HealthSettings:
        # A nested section cannot see `channels` itself: checked here, located at `health`.
        try:
            _known_channels(value.channels, info)
        except PydanticCustomError as exc:
            where = f"channels[{(exc.context or {}).get('index')}]"
            problem = {"where": where, "problem": exc.message()}
            raise PydanticCustomError("unknown_channel", "{where}: {problem}", problem) from None
        return value

    @field_validator("explorer_url")
    @classmethod
    def _placeholders(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                value.format(kind="tx", id="x")
            except (KeyError, IndexError, ValueError):
                raise ValueError("use only the placeholders {kind} and {id}") from None
        return value


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


def read_settings(
    path: Path | str, env: Mapping[str, str] | None = None, *, deep: bool = False
) -> SettingsReading:
    """Like ``load_settings``, but returns the problems instead of raising. ``deep``: also check
    what the settings point at (as ``watcher check`` and ``run`` do): that ``state_path`` can be
    the state database (opened read-only if it exists; nothing is created) and that Apprise can
    read every channel URL."""
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
    env_source = _EnvSource(environ)
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
            settings = Settings(_build_sources=((env_source, _FileSource(data)), {}))
        except ValidationError as exc:
            for error in user_errors(exc):
                problems.append(_problem(error, document, from_env, environ))
    if settings is None:
        channels = _channel_names(data, from_env)
        return SettingsReading(None, _ordered(problems, document), existing, channels)

    settings = settings._resolved(base, config_path)
    if deep:
        from watcher.state.database import state_path_problem

        state_problem = state_path_problem(settings.state_path)
        if state_problem is not None:
            message = f"state_path: {display_path(settings.state_path)}: {state_problem}"
            problems.append(_locate(("state_path",), message, document, from_env, environ))
        from watcher.delivery.notify_check import unreadable_urls

        for name, index in unreadable_urls(settings.channels):
            loc: Loc = ("channels", name, index)
            why = "Apprise cannot read this URL (not shown: it may hold secrets)"
            message = f"{format_loc(loc)}: {why}"
            problems.append(_locate(loc, message, document, from_env, environ))
    return SettingsReading(settings, _ordered(problems, document), existing, set(settings.channels))


def _ordered(problems: list[Problem], document: YamlDocument) -> list[Problem]:
    """The file's problems by line, then those of environment variables."""
    return sorted(problems, key=lambda problem: (problem.file != document.file, problem.line or 0))


# -- sources ---------------------------------------------------------------------------------


class _FileSource(PydanticBaseSettingsSource):
    """The settings file's data as it is (keys are case-sensitive, unknown keys kept so that
    validation reports them)."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(Settings)
        self._data = data

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data


class _EnvSource(EnvSettingsSource):
    """pydantic-settings' environment source reading a given mapping (tests pass their own)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        super().__init__(Settings)
        self.env_vars = parse_env_vars(
            environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


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


# -- ${VAR} expansion and partial reading ----------------------------------------------------


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

    return _VARIABLE.sub(substitute, value)


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
