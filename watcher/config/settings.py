"""The settings file (docs/settings.md) plus the environment -> ``Settings``.

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
``state_url`` (a PostgreSQL database, a secret like ``rpc_url``: ``state_url_masked`` is the form
to show) stands instead of ``state_path`` (a SQLite file): giving both is an error.
Channel URLs hold tokens too: they are left out of repr and never quoted in messages.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BeforeValidator,
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
)
from pydantic_settings.sources.utils import parse_env_vars

from watcher.config.endpoints import RpcEndpoint, RpcEndpoints, http_url, redacted
from watcher.config.rule_models import NAME_PATTERN, Duration, Pubkey
from watcher.config.sections import (
    DeliverySettings,
    HealthSettings,
    HeartbeatSettings,
    HttpSettings,
    RpcSettings,
)
from watcher.config.state_url import masked_url, postgres_url
from watcher.config.yamlpos import (
    error_message,
    normalized,
    user_errors,
)
from watcher.core.errors import ConfigError, Problem
from watcher.core.events import Severity

# ``lease_ttl``'s default: a lease's time to live, by the database's clock. The lease loop
# renews three times per time to live, so two renewals may fail before a lease lapses; a
# delivery's claim lives as long and is extended at each renewal.
LEASE_TTL_SECONDS = 15.0
ENV_PREFIX = "WATCHER_"
ENV_NESTED_DELIMITER = "__"
# Keys whose values are secrets: never quoted in a problem.
SECRET_KEYS = frozenset({"rpc_url", "rpc_urls", "channels", "state_url"})
BOTH_STATES = "give either state_path (SQLite) or state_url (PostgreSQL), not both"
INSTANCE_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")


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


def _instance(value: str) -> str:
    if not INSTANCE_PATTERN.fullmatch(value):
        raise ValueError("use 1 to 64 letters, digits, ., - and _")
    return value


class _BothStates:
    """Stands for ``state_url`` when ``state_path`` was given too, so that the error is told at
    ``state_url``'s line (a model-wide error would have none)."""


def _not_both_states(value: Any) -> Any:
    if isinstance(value, _BothStates):
        raise ValueError(BOTH_STATES)
    return value


# The shortest retention: the history of the last day is what an operator looks at first.
MIN_RETENTION_SECONDS = 86400.0


def _retention(seconds: float) -> float:
    if seconds < MIN_RETENTION_SECONDS:
        raise ValueError("must be at least 1d (the history is kept that long at least)")
    return seconds


# The default is seconds, not a duration's text: not validated again.
RetentionDuration = Annotated[Duration, AfterValidator(_retention), Field(validate_default=False)]
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
    # Instead of state_path: a PostgreSQL database, shared by several instances.
    state_url: (
        Annotated[SecretStr, BeforeValidator(_not_both_states), AfterValidator(postgres_url)] | None
    ) = None
    # This instance's name among those sharing state_url (status, /metrics); see instance_name.
    instance: Annotated[str, AfterValidator(_instance)] | None = None
    # With state_url: how long a shard's lease lasts unrenewed (renewed every third of it), so
    # how soon the others take over the targets of an instance that died or was cut off.
    lease_ttl: Annotated[Duration, Field(ge=1.0, le=600.0, validate_default=False)] = (
        LEASE_TTL_SECONDS
    )
    # Finished alerts and deliveries, and the state of targets no rule names, older than this
    # are deleted (watcher.state.retention).
    retention: RetentionDuration = 90 * 86400.0
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
            settings = cls(_build_sources=((FileSource(dict(values)),), {}))
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

    @property
    def state_url_masked(self) -> str | None:
        """``postgresql://watcher:***@db.example.com/watcher``: ``state_url`` without its
        password, for messages; None with a SQLite ``state_path``."""
        return None if self.state_url is None else masked_url(self.state_url.get_secret_value())

    @property
    def instance_name(self) -> str:
        """``instance``, else ``HOSTNAME-PID``: unique among running instances without a
        setting, though not stable across restarts."""
        return self.instance or f"{socket.gethostname()}-{os.getpid()}"

    @model_validator(mode="before")
    @classmethod
    def _state_keys(cls, data: Any) -> Any:
        # An explicit state_path (file or environment) with state_url: which one the daemon
        # should use would be a guess. The default state_path does not count.
        if (
            isinstance(data, dict)
            and data.get("state_url") is not None
            and data.get("state_path") is not None
        ):
            return {**data, "state_url": _BothStates()}
        return data

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


# -- sources ---------------------------------------------------------------------------------


class FileSource(PydanticBaseSettingsSource):
    """The settings file's data as it is (keys are case-sensitive, unknown keys kept so that
    validation reports them)."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(Settings)
        self._data = data

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data


class EnvSource(EnvSettingsSource):
    """pydantic-settings' environment source reading a given mapping (tests pass their own)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        super().__init__(Settings)
        self.env_vars = parse_env_vars(
            environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


# -- ${VAR} expansion and partial reading ----------------------------------------------------
