"""What the rules will cost at the provider: RPC calls per second and per month, for each method,
at the configured intervals, against ``rpc.max_rps`` (``watcher check`` prints it), so that a
user sees before deploying that "100 addresses every 30 s = 8.6 M calls a month".

Pure: jobs in (one per source and interval, ``watcher.alerting.ruleset.Job``), lines out. The
figures are the quiet minimum: one call per target per poll (a busy address pages further, a
large token-account listing takes more pages); the ``accounts`` source asks for up to 100 keys
per call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from watcher.alerting.ruleset import Job

MONTH_SECONDS: Final = 30 * 86400
# The method(s) one poll of a target of each source calls, once each.
SOURCE_CALLS: Final[Mapping[str, tuple[str, ...]]] = {
    "signatures": ("getSignaturesForAddress",),
    "holders": ("getTokenLargestAccounts",),
    "votes": ("getVoteAccounts",),
    "nodes": ("getClusterNodes", "getVoteAccounts"),
    "accounts": ("getMultipleAccounts",),
    "supply": ("getTokenSupply",),
    "token_accounts": ("getTokenAccounts",),
    "assets": ("getAssetsByGroup/Creator/searchAssets",),
    "programs": ("getProgramAccounts",),
    "asset": ("getAssets",),
    "fees": ("getFeeForMessage",),
    "editions": ("getNftEditions",),
}
KEYS_PER_CALL: Final = {"accounts": 100}  # targets one call serves


@dataclass(frozen=True)
class MethodCost:
    method: str
    targets: int
    per_second: float

    @property
    def per_month(self) -> float:
        return self.per_second * MONTH_SECONDS


def method_costs(jobs: Iterable[Job]) -> list[MethodCost]:
    """Calls per second of each method, summed over the jobs, most expensive first."""
    targets: dict[str, int] = {}
    rates: dict[str, float] = {}
    for job in jobs:
        per_call = KEYS_PER_CALL.get(job.source, 1)
        calls = math.ceil(len(job.targets) / per_call)
        for method in SOURCE_CALLS.get(job.source, (job.source,)):
            targets[method] = targets.get(method, 0) + len(job.targets)
            rates[method] = rates.get(method, 0.0) + calls / job.interval
    costs = [MethodCost(method, targets[method], rates[method]) for method in rates]
    return sorted(costs, key=lambda cost: (-cost.per_second, cost.method))


def _count(value: float) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:.1f} {suffix}"
    return f"{value:.0f}"


def cost_lines(jobs: Iterable[Job], max_rps: float | None, batch_size: int) -> list[str]:
    """The lines ``watcher check`` prints: one per method, the total, and the share of
    ``max_rps`` the requests take (calls grouped ``batch_size`` to a request)."""
    costs = method_costs(jobs)
    if not costs:
        return []
    width = max(len(cost.method) for cost in costs)
    out = ["RPC calls at the configured intervals (quiet minimum: busy targets page further):"]
    for cost in costs:
        out.append(
            f"  {cost.method:<{width}}  {cost.targets:>7} targets  {cost.per_second:9.2f}/s  "
            f"{_count(cost.per_month):>8} a month"
        )
    total = sum(cost.per_second for cost in costs)
    out.append(
        f"  {'total':<{width}}  {'':>15}  {total:9.2f}/s  {_count(total * MONTH_SECONDS):>8}"
        " a month"
    )
    if max_rps is not None:
        requests = total / max(1, batch_size)
        share = f"{requests / max_rps:.0%}"
        verdict = "fits" if requests <= max_rps else "does NOT fit: sweeps will stretch"
        out.append(
            f"  about {requests:.2f} requests/s with batch_size {batch_size}: {share} of "
            f"max_rps {max_rps:g} ({verdict})"
        )
    return out
