"""The Grafana dashboard of the watcher, as code: ``deploy/grafana/watcher-dashboard.json``.

Built with Grafana's ``grafana-foundation-sdk`` (the Grafana 11 build, in the ``dev`` extra).
Regenerate the committed JSON after a change here (a test fails while they differ):

    .venv/bin/python deploy/grafana/dashboard.py > deploy/grafana/watcher-dashboard.json

The dashboard reads what the watcher's ``/metrics`` (``http.listen``) serves, through a
Prometheus data source chosen with ``$datasource``; ``$job`` is the scrape job of the watcher and
``$instance`` one or all of its instances. Values about validators, the cluster, nodes, balances
and tokens are the latest each instance saw (``max by`` the labels that name the thing: several
instances sharing a database serve the same target once each). It keeps to what Grafana 10 and
11 both provision (``schemaVersion`` 39; timeseries, stat and table panels).
"""

from __future__ import annotations

import json
import sys

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

UID = "watcher"
SCHEMA_VERSION = 39  # Grafana 10.3/10.4; Grafana 11 migrates it on load
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
WATCHER = 'job="$job", instance=~"$instance"'  # every query's selector
SOL = "suffix: SOL"

Panel = timeseries.Panel | stat.Panel | table.Panel


def query(
    expr: str, legend: str = "", *, ref: str = "A", table_format: bool = False
) -> prometheus.Dataquery:
    target = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DATASOURCE)
    if legend:
        target = target.legend_format(legend)
    if table_format:  # one row per series, its labels as columns: the latest value
        target = target.instant().format(PromQueryFormat.TABLE)
    return target


def graph(title: str, description: str, unit: str, *targets: prometheus.Dataquery) -> Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(12)
        .height(8)
    )
    for ref, target in zip("ABCDEFGH", targets, strict=False):
        panel = panel.with_target(target.ref_id(ref))
    return panel


def figure(
    title: str, description: str, unit: str, expr: str, legend: str = "", *, absent: str = ""
) -> Panel:
    """A stat; ``absent``: what it shows when the series is not exported at all (a gauge only
    some settings export)."""
    panel = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(6)
        .height(5)
        .with_target(query(expr, legend))
    )
    return panel.no_value(absent) if absent else panel


def listing(title: str, description: str, expr: str, span: int = 24) -> Panel:
    return (
        table.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .span(span)
        .height(8)
        .with_target(query(expr, table_format=True))
    )


def health() -> list[Panel]:
    return [
        graph(
            "Polls and failed polls",
            "Polls a second by source, and the failed ones (timeouts, errors, refused answers).",
            "reqps",
            query(
                f"sum by (source) (rate(watcher_polls_total{{{WATCHER}}}[$__rate_interval]))",
                "{{source}}",
            ),
            query(
                f"sum by (source) "
                f"(rate(watcher_poll_failures_total{{{WATCHER}}}[$__rate_interval]))",
                "{{source}} failed",
            ),
        ),
        graph(
            "RPC latency",
            "Quantiles of one RPC HTTP request's duration, by method.",
            "s",
            *(
                query(
                    f"histogram_quantile({q}, sum by (le, method) "
                    f"(rate(watcher_rpc_latency_seconds_bucket{{{WATCHER}}}[$__rate_interval])))",
                    f"{{{{method}}}} p{round(q * 100)}",
                )
                for q in (0.5, 0.95, 0.99)
            ),
        ),
        graph(
            "RPC rate limiting and retries",
            "Answers of HTTP 429 from the RPC provider, and retried calls, a second.",
            "reqps",
            query(
                f"sum(rate(watcher_rpc_rate_limited_total{{{WATCHER}}}[$__rate_interval]))", "429s"
            ),
            query(
                f"sum(rate(watcher_rpc_retries_total{{{WATCHER}}}[$__rate_interval]))", "retries"
            ),
        ),
        graph(
            "Notifications by outcome",
            "Sends by channel and outcome (sent, failed: retried later, dead: given up).",
            "short",
            query(
                f"sum by (channel, outcome) "
                f"(increase(watcher_notifications_total{{{WATCHER}}}[$__rate_interval]))",
                "{{channel}} {{outcome}}",
            ),
        ),
        graph(
            "Outbox",
            "Deliveries pending, and dead letters kept in the history.",
            "short",
            query(f"sum(watcher_outbox_depth{{{WATCHER}}})", "pending"),
            query(f"max(watcher_dead_deliveries{{{WATCHER}}})", "dead"),
        ),
        graph(
            "Oldest pending delivery",
            "How long the oldest pending delivery has waited: growing, notifications are stuck.",
            "s",
            query(
                f"max by (instance) (watcher_outbox_oldest_pending_seconds{{{WATCHER}}})",
                "{{instance}}",
            ),
        ),
        figure(
            "Alerts firing now",
            "State alerts firing now (the table below lists them).",
            "short",
            f"max(watcher_firing_alerts{{{WATCHER}}})",
        ),
        figure(
            "Since the last heartbeat",
            "Time since the heartbeat (heartbeat:) was last pinged successfully (since the "
            "start, until the first ping is accepted). Without heartbeat: nothing to show.",
            "s",
            f"time() - max(watcher_heartbeat_last_success_timestamp_seconds{{{WATCHER}}})",
            absent="no heartbeat configured",
        ),
        figure(
            "Last reload",
            "1: the last reload (SIGHUP) of the settings and rules is in force; 0: it was "
            "refused and the previous ones keep running (the log says why).",
            "none",
            f"min(watcher_config_last_reload_successful{{{WATCHER}}})",
        ),
        figure(
            "Shards held",
            "With state_url: the shards the instances hold, of 1024 (fewer: the targets of "
            "the others are polled by nobody).",
            "short",
            f"sum(watcher_shards_held{{{WATCHER}}})",
            absent="one instance (no state_url)",
        ),
        figure(
            "Live instances",
            "With state_url: the instances sharing the database, alive.",
            "short",
            f"max(watcher_live_instances{{{WATCHER}}})",
            absent="one instance (no state_url)",
        ),
    ]


def by_validator(metric: str) -> str:
    return f"max by (votekey, nodekey) ({metric}{{{WATCHER}}})"


def validators() -> list[Panel]:
    legend = "{{votekey}}"
    return [
        listing(
            "Delinquent validators",
            "1: the validator is delinquent (or absent from the vote accounts), 0: voting.",
            by_validator("solana_validator_delinquent"),
            span=12,
        ),
        listing(
            "Commission",
            "Each watched validator's commission, percent.",
            by_validator("solana_validator_commission"),
            span=12,
        ),
        graph(
            "Active stake",
            "Activated stake of each watched validator.",
            SOL,
            query(by_validator("solana_validator_active_stake"), legend),
        ),
        graph(
            "Vote lag",
            "Slots between the cluster's highest vote and the validator's last vote.",
            "short",
            query(by_validator("solana_validator_vote_lag_slots"), legend),
        ),
        graph(
            "Last vote and root slot",
            "The slot of each watched validator's last vote and root.",
            "none",
            query(by_validator("solana_validator_last_vote"), f"{legend} vote"),
            query(by_validator("solana_validator_root_slot"), f"{legend} root"),
        ),
        graph(
            "Epoch credits",
            "Vote credits earned in the current epoch.",
            "short",
            query(by_validator("solana_validator_epoch_credits"), legend),
        ),
    ]


def vat() -> list[Panel]:
    legend = "{{votekey}}"
    return [
        graph(
            "VAT rank",
            "Each watched validator's rank by activated stake among the staked vote accounts "
            "(ties count against it): the admission ticket takes ranks up to its cut (2,000, or "
            "the rule's max_rank). The worst it can be: others' balances cannot be seen.",
            "none",
            query(by_validator("solana_validator_vat_rank"), legend),
        ),
        graph(
            "VAT stake gap",
            "Activated stake each watched validator lacks to pass the cut (0: it passes).",
            SOL,
            query(by_validator("solana_validator_vat_stake_gap"), legend),
        ),
        graph(
            "Vote account balance against the ticket's line",
            "Each watched vote account's balance, and the balance the ticket needs: its "
            "rent-exempt minimum and 1.6 SOL (the rule's min_vote_balance_sol), burnt at the "
            "boundary. Under the line, it sits out the epoch after the next.",
            SOL,
            query(by_validator("solana_validator_vote_account_balance"), legend),
            query(by_validator("solana_validator_vat_min_vote_balance"), f"{legend} needs"),
        ),
        figure(
            "Time to the epoch boundary",
            "Until the next epoch boundary, where the ticket is checked (the slots left at the "
            "rule's slot_time: an estimate).",
            "s",
            f"min(solana_validator_vat_boundary_seconds{{{WATCHER}}})",
        ),
    ]


def cluster() -> list[Panel]:
    return [
        figure(
            "Cluster active stake",
            "Activated stake of all vote accounts.",
            SOL,
            f"max(solana_cluster_active_stake{{{WATCHER}}})",
        ),
        figure(
            "Cluster last vote",
            "The highest last-vote slot of any vote account.",
            "none",
            f"max(solana_cluster_last_vote{{{WATCHER}}})",
        ),
        figure(
            "Cluster root slot",
            "The highest root slot of any vote account.",
            "none",
            f"max(solana_cluster_root_slot{{{WATCHER}}})",
        ),
        figure(
            "Validators by state",
            "Vote accounts current and delinquent.",
            "short",
            f"max by (state) (solana_cluster_validator_count{{{WATCHER}}})",
            "{{state}}",
        ),
    ]


def nodes() -> list[Panel]:
    return [
        listing(
            "Node versions",
            "The software version of each watched node.",
            f"max by (nodekey, version) (solana_node_version_info{{{WATCHER}}})",
            span=12,
        ),
        listing(
            "Versions behind",
            "How far each watched node's version is behind the cluster's.",
            f"max by (nodekey) (solana_node_version_behind{{{WATCHER}}})",
            span=12,
        ),
    ]


def balances() -> list[Panel]:
    return [
        graph(
            "Balances",
            "The balance of each watched account.",
            SOL,
            query(f"max by (address) (solana_account_balance{{{WATCHER}}})", "{{address}}"),
        ),
    ]


def tokens() -> list[Panel]:
    return [
        graph(
            "Token supply",
            "The supply of each watched mint (in its own units).",
            "short",
            query(f"max by (mint) (solana_token_supply{{{WATCHER}}})", "{{mint}}"),
        ),
        graph(
            "Largest token accounts",
            "The balances of each watched mint's largest accounts.",
            "short",
            query(
                f"max by (mint, account) (solana_token_largest_account_balance{{{WATCHER}}})",
                "{{account}}",
            ),
        ),
    ]


def alerts() -> list[Panel]:
    return [
        listing(
            "Firing alerts",
            "The watcher's state alerts firing now, by rule, kind, severity and subject.",
            f"max by (rule, kind, severity, subject) (watcher_alert_firing{{{WATCHER}}} == 1)",
        ),
    ]


ROWS = (
    ("Watcher health", health),
    ("Firing alerts", alerts),
    ("Validators", validators),
    ("Validator admission ticket (VAT)", vat),
    ("Cluster", cluster),
    ("Nodes", nodes),
    ("Balances", balances),
    ("Tokens", tokens),
)


def variables() -> list[dashboard.DatasourceVariable | dashboard.QueryVariable]:
    job = (
        dashboard.QueryVariable("job")
        .label("Job")
        .description("The scrape job of the watcher")
        .datasource(DATASOURCE)
        .query("label_values(watcher_polls_total, job)")
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
    )
    instance = (
        dashboard.QueryVariable("instance")
        .label("Instance")
        .description("One or all of the job's instances")
        .datasource(DATASOURCE)
        .query('label_values(watcher_polls_total{job="$job"}, instance)')
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )
    source = dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")
    return [source, job, instance]


def build() -> model.Dashboard:
    board = (
        dashboard.Dashboard("watcher")
        .uid(UID)
        .description(
            "The watcher's health and what it watches: validators, their admission ticket, "
            "cluster, nodes, balances, tokens"
        )
        .tags(["watcher", "solana"])
        .editable()
        .refresh("30s")
        .time("now-6h", "now")
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
    )
    for variable in variables():
        board = board.with_variable(variable)
    for title, panels in ROWS:
        board = board.with_row(dashboard.Row(title))
        for panel in panels():
            board = board.with_panel(panel)
    built = board.build()
    built.schema_version = SCHEMA_VERSION
    for number, item in enumerate(built.panels or [], start=1):  # unique ids, in layout order
        item.id_val = number
    return built


def render() -> str:
    """The committed JSON: sorted keys, two-space indent, a final newline."""
    return json.dumps(build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
