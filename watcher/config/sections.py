"""The sections of the settings file (``rpc:``, ``delivery:``, ``health:``, ``http:``,
``heartbeat:``): each a strict, frozen model with its defaults (docs/settings.md)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SecretStr,
    field_validator,
)

from watcher.config.call_budget import Budget, parse_budget
from watcher.config.rule_models import PositiveDuration
from watcher.core.events import Severity

_LISTEN = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^:\[\]]+):(\d{1,5})$")


CallBudget = Annotated[Budget, BeforeValidator(parse_budget), PlainSerializer(str, return_type=str)]


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
    # Calls per month (or day) of all rules together: the intervals of rules with max_every
    # stretch by activity to fit (watcher.budget). None: no cap.
    budget: CallBudget | None = None


class DeliverySettings(_Section):
    first_retry: PositiveDuration = 2.0  # delay before the first retry of a refused delivery
    max_backoff: PositiveDuration = 300.0  # longest delay between retries
    deadline: PositiveDuration = 86400.0  # after this a delivery is given up (dead)
    # One send to one URL; past it the attempt counts as failed and is retried with backoff.
    send_timeout: PositiveDuration = 30.0
    # Alertmanager keeps alerts in memory: a firing one is posted again this often, and ends
    # there four intervals after its last post (as Prometheus's --rules.alert.resend-delay).
    alertmanager_repost_every: PositiveDuration = 60.0


class HealthSettings(_Section):
    """The built-in alerts rpc_unhealthy, rpc_disagreement and cluster_delinquent_stake
    (watcher.alerting.builtin)."""

    unhealthy_after: Annotated[int, Field(ge=1)] = 3  # failed rounds in a row before firing
    # quorum: endpoints disagreeing on a target this long without a break before firing. Nodes
    # a few slots apart disagree briefly around a change; a stuck or forked node keeps on.
    disagreement_for: PositiveDuration = 300.0
    # More than this share of activated stake delinquent: one cluster-wide alert. None: off.
    cluster_delinquent_stake_pct: Annotated[float, Field(gt=0, le=100)] | None = 10.0
    severity: Severity = "critical"
    channels: tuple[str, ...] = ()  # checked against `channels` by Settings._health_channels
    # The state database failing this long without a break: `watcher run` exits non-zero.
    database_down_for: PositiveDuration = 300.0


class HttpSettings(_Section):
    """The HTTP endpoint for /metrics and /healthz."""

    listen: str  # HOST:PORT, e.g. 127.0.0.1:9102 or [::1]:9102
    # How often a tick samples the event loop's lag (watcher_event_loop_lag_seconds). Each tick
    # wakes the whole process: at ten a second they were half the daemon's CPU at rest and a
    # tenth of a 1,000-address sweep's. Two a second see a hold of D ms about D times in 500,
    # plenty for a histogram scraped every 15 s; shorter sees shorter holds.
    loop_lag_every: PositiveDuration = 0.5

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
