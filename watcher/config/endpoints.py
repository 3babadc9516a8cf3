"""The RPC endpoints of the settings: ``rpc_url`` (one) or ``rpc_urls`` (several, each a URL or
``{url, max_rps}``). Every URL is a secret: never quoted in a message."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, SecretStr


def http_url(value: SecretStr) -> SecretStr:
    parts = urlsplit(value.get_secret_value())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL (its value is not shown)")
    return value


def redacted(url: SecretStr) -> str:
    """``https://rpc.example.com/***``: an endpoint without its key, for logs."""
    parts = urlsplit(url.get_secret_value())
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/***"


def _endpoint_entry(value: Any) -> Any:
    # A plain URL is short for {url: URL}.
    return {"url": value} if isinstance(value, str) else value


class RpcEndpoint(BaseModel):
    """One entry of ``rpc_urls``. ``max_rps``: this endpoint's own ``rpc.max_rps``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: Annotated[SecretStr, AfterValidator(http_url)]
    max_rps: Annotated[float, Field(gt=0)] | None = None


RpcEndpoints = Annotated[
    list[Annotated[RpcEndpoint, BeforeValidator(_endpoint_entry)]], Field(min_length=1)
]
